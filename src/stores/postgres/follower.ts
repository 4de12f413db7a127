// A follower's wait in the PostgreSQL election: from its first acquire until
// it takes the row, following whoever holds it meanwhile.
//
//   acquire   one statement takes the row if it is absent or expired, on the
//             server's clock; lost, it names the holder and how long its
//             lease has left on that clock.
//   due       nothing is said when a lease expires, so the follower tries
//             again once: when the lease it read must be over, counted from
//             the answer's arrival (the server measured what was left before
//             then, so the try comes at or after the expiry, a little jitter
//             later). A leader that renews pushes its expiry back, and the
//             try finds it renewed: one acquire per TTL, nothing in a loop.
//   released  a notice (LISTEN): the holder gave the row up. The next try
//             goes at once, on our turn among the process's followers.
//   acquired  a notice: another member took the row. It names the leader at
//             once, without a read, and its lease ends a TTL from the commit
//             at the latest, so the next try is due a TTL after the notice
//             arrived.
//
// Without LISTEN only `due` is left: a release is learnt at the released
// lease's expiry, a TTL after its last renewal at the latest.
import type { Claim, LeaderListener } from "../../contract/backend";
import type { Clock } from "../../util/clock";
import type { TurnQueue } from "../../util/turns";
import type { LeaseNotices, SeenNotice } from "./lease-notices";
import type { LeaseHolder } from "./port";

/** A row we took, identified by the election's key and the token our acquire got. */
export interface PostgresMembership {
  /** The election key. */
  readonly id: string;
  /** The token of the acquire that took the row: the fencing token. */
  readonly token: number;
}

/** What an acquire that did not win learnt: the holder (undefined if it could not be seen), and when the answer came. */
export interface AcquireLost {
  readonly holder: LeaseHolder | undefined;
  /** When (on the member's clock) the answer arrived. */
  readonly receivedAt: number;
}

/** The member a follower competes for (the backend, recipe.ts), and what it runs on. */
export interface Candidate {
  readonly clock: Clock;
  /** A number in [0, 1), as Math.random. */
  readonly random: () => number;
  /** Where followers that saw the leader leave take their turn to acquire. */
  readonly turns: TurnQueue;
  /** The lease's length in ms, as every member of the election applies it. */
  readonly ttlMs: number;
  /** One acquire: the claim if it took the row, else what it learnt. */
  tryAcquire(signal: AbortSignal): Promise<Claim<PostgresMembership> | AcquireLost>;
  /** One read of the row: its live holder, and when the answer came. */
  readHolder(signal: AbortSignal): Promise<AcquireLost>;
}

/** Whoever holds the row, as a follower knows it. */
interface Followed {
  readonly name: string;
  readonly token: number;
  /** When (on the member's clock) its lease must be over, unless renewed. */
  dueAt: number;
}

export class Follower {
  private holder: Followed | undefined;

  constructor(
    private readonly candidate: Candidate,
    /** Listening before our first acquire, so that no commit after it goes unseen. */
    private readonly notices: LeaseNotices,
    private readonly onLeader: LeaderListener,
    private readonly signal: AbortSignal,
  ) {}

  /** Resolves with the claim to lead on, once we took the row. */
  async follow(): Promise<Claim<PostgresMembership>> {
    const { candidate, notices, signal } = this;
    let tryNow = true;
    /** The holder whose lease was due when the try went out, if it was a due try. */
    let overdue: Followed | undefined;
    for (;;) {
      if (tryNow) {
        tryNow = false;
        const answer = await candidate.tryAcquire(signal);
        if ("membership" in answer) return answer;
        // Taken in the same instant by a member the statement could not see: read who.
        const seen = answer.holder ? answer : await candidate.readHolder(signal);
        if (!seen.holder) {
          tryNow = true;
          continue;
        }
        this.heldBy(seen.holder, seen.receivedAt);
        // A newer holder than the one that was due took the row without our
        // hearing of it. Its notice may still be on its way (the answer came
        // on another connection); or the LISTEN connection went silent, and
        // would miss every notice from now on: ask it to show that it still
        // answers (one statement, only then).
        if (overdue && seen.holder.token > overdue.token) notices.probe();
        overdue = undefined;
      }
      const holder = this.holder;
      const notice = await notices.next(holder ? holder.dueAt + jitter(candidate.ttlMs, candidate.random) : Infinity, signal);
      if (!notice) {
        overdue = holder;
        tryNow = true;
      } else if (notice.kind === "acquired") {
        this.acquired(notice);
      } else if (holder === undefined || notice.token >= holder.token) {
        this.holder = undefined;
        this.onLeader(undefined);
        // Every follower in the process got the same notice: they acquire
        // one per turn of the event loop (src/util/turns.ts). One whose turn
        // comes after the winner's notice arrived follows it instead of
        // sending an acquire that can only lose.
        await candidate.turns.next();
        signal.throwIfAborted();
        tryNow = !notices.acquiredAfter(notice.token);
      }
    }
  }

  /** The holder an acquire or a read named, whose lease had `remainingMs` left when the answer came at `receivedAt`. */
  private heldBy(holder: LeaseHolder, receivedAt: number): void {
    const known = this.holder;
    // A notice of a newer term may have come first.
    if (known && known.token > holder.token) return;
    this.holder = { name: holder.name, token: holder.token, dueAt: receivedAt + holder.remainingMs };
    if (known?.token !== holder.token || known.name !== holder.name) this.onLeader({ name: holder.name, token: holder.token });
  }

  /** A member took the row: it leads, for a TTL from the commit at most unless it renews. */
  private acquired(notice: SeenNotice & { kind: "acquired" }): void {
    // A notice older than what an acquire already showed us.
    if (this.holder && notice.token <= this.holder.token) return;
    this.holder = { name: notice.name, token: notice.token, dueAt: notice.seenAt + notice.ttlMs };
    this.onLeader({ name: notice.name, token: notice.token });
  }
}

/**
 * A follower's try at a lease's expiry is spread over a few per cent of the
 * TTL (at most 50 ms), so that many followers do not all send their acquire
 * in the same millisecond; one wins either way.
 */
export function jitter(ttlMs: number, random: () => number): number {
  return random() * Math.min(50, ttlMs / 20);
}
