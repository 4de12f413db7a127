// An election on one row of a PostgreSQL table: race-style, like a
// Kubernetes Lease. The row holds the leader's name, its fencing token and
// when its lease expires on the server's clock.
//
//   campaign  acquire: one INSERT … ON CONFLICT (key) DO UPDATE … WHERE the
//             lease has expired, on clock_timestamp(). It takes the row when
//             it is absent or expired and answers the new token (from a
//             sequence: it grows with every term, across a row deleted from
//             outside too), and sends a notice of the acquisition in the
//             same statement.
//   renew     an UPDATE of the expiry, only while the row holds our token
//             and has not expired on the server's clock; nothing changed is
//             a loss.
//   follow    LISTEN for the election's notices (follower.ts): a release
//             starts the next acquire at once, an acquisition names the new
//             leader. An expiry sends nothing: a follower tries once when
//             the lease it read must be over.
//   leave     a DELETE conditioned on our token, with its notice in the same
//             statement.
//
// Why the successor cannot lead beside us: a leader believes it leads until
// S + TTL - stepDownMargin on its own monotonic clock, S being when its last
// confirmed write (the acquire, or a renewal) was *sent*. The server ran that
// write after S and set the expiry a TTL after it, on its clock; no acquire
// can take the row before then. So while the old leader believes, the row
// is its own, as long as the server's clock does not run faster than ours by
// more than the margin over a TTL, and does not jump forward (docs/postgres.md).
// A row deleted (or its lease cut short) from outside is the exception: the
// leader learns of it from the successor's acquisition notice, or at its
// next renewal without LISTEN.
//
// The store is the port (port.ts), which pg/adapter.ts implements on the
// user's pool; time, turns and chance come from the clock, turn queue and
// random source the backend is given.
import { deadline, untilAborted } from "../../util/abort";
import { detachedTimeout, systemClock, type Clock } from "../../util/clock";
import type { Claim, ElectionBackend, Leader, LeaderListener } from "../../contract/backend";
import { MembershipLostError } from "../../contract/errors";
import { log } from "../../util/log";
import { processTurns, type TurnQueue } from "../../util/turns";
import { Follower, jitter, type AcquireLost, type Candidate, type PostgresMembership } from "./follower";
import { LeaseNotices } from "./lease-notices";
import type { LeaseHolder, PostgresPort } from "./port";

export type { PostgresMembership };

/** How the backend follows the election besides its own requests. */
export interface PostgresRecipeOptions {
  /**
   * LISTEN for the election's notices (default true): followers learn of a
   * release at once, and a leader of a successor at once. False for a
   * transaction pooler (PgBouncer in transaction mode), which cannot keep a
   * LISTEN: a release is then learnt at the lease's expiry.
   */
  readonly listen: boolean;
  /**
   * How long one request of a follower or an observer (an acquire, a read,
   * a LISTEN) may go unanswered before it is given up and the state machine
   * retries; min(TTL / 2, 5 s) if left out. pg sets no timeout of its own: a
   * query on a connection that died silently waits for TCP to give up, many
   * minutes later.
   */
  readonly requestTimeout?: number;
}

export class PostgresBackend implements ElectionBackend<PostgresMembership>, Candidate {
  private readonly listen: boolean;
  private readonly requestTimeout: number;

  constructor(
    private readonly port: PostgresPort,
    private readonly key: string,
    readonly name: string,
    /** The lease's length, in ms: what acquires and renewals ask the server for. */
    readonly ttlMs: number,
    options: PostgresRecipeOptions = { listen: true },
    /** Where followers that saw the leader leave take their turn to acquire. */
    readonly turns: TurnQueue = processTurns,
    /** What the member's waits, deadlines and `sentAt` are read on: the election's clock. */
    readonly clock: Clock = systemClock,
    /** A number in [0, 1), for the followers' jitter. */
    readonly random: () => number = Math.random,
  ) {
    this.listen = options.listen;
    this.requestTimeout = options.requestTimeout ?? Math.min(ttlMs / 2, 5_000);
  }

  /** "PostgreSQL <table> <key>", for logs and diagnostics. */
  get description(): string {
    return `PostgreSQL ${this.port.table} ${this.key}`;
  }

  async awaitTurn(held: Claim<PostgresMembership> | undefined, onLeader: LeaderListener, signal: AbortSignal): Promise<Claim<PostgresMembership>> {
    // The state machine passes back what we won when it starts a phase over
    // (after a store outage): still ours, it is our turn again; else lost.
    if (held) {
      await this.confirm(held.membership, signal);
      return held;
    }
    // Listening before the first acquire, so that no commit after it goes unseen.
    const notices = await this.listenFor(signal);
    try {
      return await new Follower(this, notices, onLeader, signal).follow();
    } finally {
      notices.close();
    }
  }

  async tryAcquire(signal: AbortSignal): Promise<Claim<PostgresMembership> | AcquireLost> {
    // The server sets the expiry a TTL after it runs the statement, which is after this.
    const sentAt = this.clock.now();
    const acquire = this.port.acquire(this.key, this.name, this.ttlMs);
    const request = this.bounded(signal);
    // A row taken after we stopped waiting would be held for a whole TTL
    // with nobody renewing it: give it back.
    acquire.then(
      (answer) => {
        if (answer.won && request.signal.aborted) this.releaseInBackground(this.membership(answer.token));
      },
      () => undefined,
    );
    const answer = await untilAborted("acquire election row", acquire, request.signal).finally(request.done);
    if (answer.won) return { membership: this.membership(answer.token), token: answer.token, sentAt, ttlMs: this.ttlMs };
    return { holder: answer.holder, receivedAt: this.clock.now() };
  }

  /** One read of the row's live holder; a table not made yet holds none. */
  async readHolder(signal: AbortSignal): Promise<AcquireLost> {
    let holder: LeaseHolder | undefined;
    try {
      holder = await this.read(signal);
    } catch (err) {
      if (!this.port.isTableMissing(err)) throw err;
    }
    return { holder, receivedAt: this.clock.now() };
  }

  async renew(membership: PostgresMembership, signal: AbortSignal): Promise<void> {
    let renewed: boolean;
    try {
      renewed = await untilAborted("renew", this.port.renew(this.key, membership.token, this.ttlMs), signal);
    } catch (err) {
      if (this.port.isTableMissing(err)) throw lost(membership, "the table is gone", err);
      throw err;
    }
    if (!renewed) throw lost(membership, "the row no longer holds it, or its lease expired on the server's clock", undefined);
  }

  /**
   * For a leader: resolves once a notice shows the row gone from us (another
   * member took it, or it was released under our token by someone else), or
   * a read after listening shows it. Without LISTEN it never resolves: the
   * next renewal finds the loss.
   */
  async awaitLoss(membership: PostgresMembership, signal: AbortSignal): Promise<void> {
    if (!this.listen) {
      await untilAborted("await loss", new Promise<never>(() => undefined), signal);
      return;
    }
    const notices = await this.listenFor(signal);
    try {
      // Whatever happened between winning and listening.
      const now = await this.read(signal);
      if (now?.token !== membership.token) return;
      for (;;) {
        const notice = await notices.next(Infinity, signal);
        if (notice?.kind === "acquired" && notice.token > membership.token) return;
        if (notice?.kind === "released" && notice.token === membership.token) return;
      }
    } finally {
      notices.close();
    }
  }

  async leave(membership: PostgresMembership, signal: AbortSignal): Promise<void> {
    // Conditioned on our token: a member that leaves late never deletes the row a successor took.
    try {
      await untilAborted("leave", this.port.release(this.key, membership.token), signal);
    } catch (err) {
      if (!this.port.isTableMissing(err)) throw err;
    }
  }

  async observe(onLeader: LeaderListener, signal: AbortSignal): Promise<void> {
    const notices = await this.listenFor(signal);
    try {
      let seen = await this.readHolder(signal);
      let leader = leaderOf(seen.holder);
      let dueAt = this.dueAt(seen.holder, seen.receivedAt);
      onLeader(leader);
      for (;;) {
        const notice = await notices.next(dueAt + jitter(this.ttlMs, this.random), signal);
        let next: Leader | undefined;
        if (!notice) {
          // Its lease is over unless renewed (or, without LISTEN, a TTL went by with nobody leading): look.
          seen = await this.readHolder(signal);
          next = leaderOf(seen.holder);
          dueAt = this.dueAt(seen.holder, seen.receivedAt);
        } else if (notice.kind === "acquired") {
          if (leader && notice.token <= leader.token) continue;
          next = { name: notice.name, token: notice.token };
          dueAt = notice.seenAt + notice.ttlMs;
        } else {
          if (leader && notice.token < leader.token) continue;
          next = undefined;
          dueAt = this.dueAt(undefined, notice.seenAt);
        }
        if (next?.token !== leader?.token || next?.name !== leader?.name) onLeader(next);
        leader = next;
      }
    } finally {
      notices.close();
    }
  }

  async readLeader(signal: AbortSignal): Promise<Leader | undefined> {
    return leaderOf((await this.readHolder(signal)).holder);
  }

  /**
   * When an observer looks again: when the holder's lease must be over; with
   * nobody leading, never while it listens (an acquisition is notified), and
   * a TTL later without LISTEN.
   */
  private dueAt(holder: LeaseHolder | undefined, receivedAt: number): number {
    if (holder) return receivedAt + holder.remainingMs;
    return this.listen ? Infinity : receivedAt + this.ttlMs;
  }

  /** Resolves if the row still holds our token and its lease; throws MembershipLostError if not. */
  private async confirm(membership: PostgresMembership, signal: AbortSignal): Promise<void> {
    let now: LeaseHolder | undefined;
    try {
      now = await this.read(signal);
    } catch (err) {
      if (this.port.isTableMissing(err)) throw lost(membership, "the table is gone", err);
      throw err;
    }
    if (now?.token === membership.token) return;
    throw lost(membership, now ? `the row holds ${JSON.stringify(now.name)} with token ${now.token}` : "the row is gone or its lease expired", undefined);
  }

  /** One read of the row's live holder, given up at the request timeout. */
  private read(signal: AbortSignal): Promise<LeaseHolder | undefined> {
    const request = this.bounded(signal);
    return untilAborted("read election row", this.port.read(this.key), request.signal).finally(request.done);
  }

  /** The election's notices (if it listens), the LISTEN given up at the request timeout. */
  private listenFor(signal: AbortSignal): Promise<LeaseNotices> {
    const request = this.bounded(signal);
    return LeaseNotices.open(this.port, this.key, this.listen, this.clock, request.signal).finally(request.done);
  }

  /**
   * `signal`, and the request timeout: a signal for one request that aborts
   * with a TimeoutError if no answer came in time, and stays aborted, so
   * that what answers later can be undone. `done` once it settled.
   */
  private bounded(signal: AbortSignal): { signal: AbortSignal; done: () => void } {
    const controller = new AbortController();
    const onAbort = () => controller.abort(signal.reason);
    if (signal.aborted) onAbort();
    else signal.addEventListener("abort", onAbort, { once: true });
    const timer = detachedTimeout(
      this.clock,
      () => controller.abort(new DOMException("The operation was aborted due to timeout", "TimeoutError")),
      this.requestTimeout,
    );
    return {
      signal: controller.signal,
      done: () => {
        this.clock.clearTimeout(timer);
        signal.removeEventListener("abort", onAbort);
      },
    };
  }

  private membership(token: number): PostgresMembership {
    return { id: this.key, token };
  }

  private releaseInBackground(membership: PostgresMembership): void {
    const bound = deadline(5_000, this.clock);
    this.leave(membership, bound.signal).then(
      () => {
        bound.clear();
        log.postgres("gave back %s (token %d) taken after the campaign stopped", this.key, membership.token);
      },
      (err: unknown) => {
        bound.clear();
        log.postgres("could not give back %s: %s", this.key, (err as Error).message);
      },
    );
  }
}

function leaderOf(holder: LeaseHolder | undefined): Leader | undefined {
  return holder && { name: holder.name, token: holder.token };
}

function lost(membership: PostgresMembership, why: string, cause: unknown): MembershipLostError {
  const message = `${membership.id} (token ${membership.token}) is no longer ours: ${why}`;
  return new MembershipLostError(message, cause === undefined ? undefined : { cause });
}
