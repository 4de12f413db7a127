// A follower's wait in the NATS KV election: from its first create until it
// wins the key, racing whenever nobody holds it and following whoever does.
//
//   race      send our create (over the marker the key was last seen at, if
//             any); won: lead on it (after the Go members' wait, where they
//             may take part); lost: follow the write that beat ours.
//   follow    a value names the leader and pushes back the moment its entry
//             ages out; a delete or purge marker starts the next race, on our
//             turn among the process's followers.
//   due       silent on 2.9 (no marker, no watch event), so a follower counts
//             from when it saw the holder's last write arrive: the server
//             wrote it before then, so it is gone by (arrival + bucket TTL).
//             It races then, with a little jitter. While the leader renews,
//             every renewal pushes that moment back, so a healthy election
//             costs followers no request at all; the moment doubles as the
//             safety net for a watch that missed an event.
//   markers   on a replicated bucket a marker is not raced over: the only
//             write a replicated stream serializes is a create of an absent
//             key, so a follower waits for the marker to age out as it
//             waits for a holder's entry (recipe.ts says why).
//
// The loop in follow() holds every wait (for our create's answer, for the
// next entry or the holder's moment, for our turn); what each event means is
// decided, without waiting, by the method named after it.
import type { Claim, LeaderListener } from "../../contract/backend";
import type { Clock } from "../../util/clock";
import { log } from "../../util/log";
import type { TurnQueue } from "../../util/turns";
import type { GoMemberWait } from "./go-members";
import type { NatsMembership } from "./holder";
import { holderOf, isValue, type Holder, type KeyState, type ValueState } from "./key-state";
import type { EntryPeeker, KeyWatch } from "./watch";

/** The member a follower races for (the backend, recipe.ts), and what it runs on. */
export interface Candidate {
  /** Our member's name: a write under it is our own. */
  readonly name: string;
  readonly clock: Clock;
  /** A number in [0, 1), as Math.random. */
  readonly random: () => number;
  /** Where followers that saw the leader leave take their turn to race. */
  readonly turns: TurnQueue;
  /** Set where Go members may take part: a win is led on only once they must have stood down. */
  readonly goMembers: GoMemberWait | undefined;
  /** On a replicated bucket: a delete or purge marker is waited out until it ages out, not raced over. */
  readonly waitsOutMarkers: boolean;
  /** One create (over the marker at revision `marker`, if one was seen): the claim if it won, else the key's current revision. */
  tryCreate(ttlMs: number, marker: number | undefined, signal: AbortSignal): Promise<Claim<NatsMembership> | number>;
  /** One read of the key. */
  read(signal: AbortSignal): Promise<KeyState>;
}

export class Follower implements EntryPeeker {
  /** Whoever holds the key, as far as we know; undefined while we race for it. */
  private holder: Holder | undefined;
  /** The revision of the delete or purge marker the key was last seen at, if it was. */
  private marker: number | undefined;
  /** The holder whose entry should have aged out by now, while we check that it did. */
  private overdue: Holder | undefined;
  /** How often we found the overdue holder's entry still there. */
  private overdueChecks = 0;
  /** Where markers are waited out: when (on the member's clock) the marker at `marker` must have aged out. */
  private markerGoneBy: number | undefined;
  /** The marker whose wait ended, while we check that it aged out. */
  private dueMarker: number | undefined;
  /** How often we found that marker still there when it was due. */
  private markerChecks = 0;

  constructor(
    private readonly candidate: Candidate,
    /** Opened before our first create, so no write after it goes unseen. */
    private readonly watch: KeyWatch,
    /** The bucket's TTL, as read when the campaign began. */
    private readonly ttlMs: number,
    private readonly onLeader: LeaderListener,
    private readonly signal: AbortSignal,
  ) {}

  /** Resolves with the claim to lead on, once we won the key (and, with Go members, held it long enough). */
  async follow(): Promise<Claim<NatsMembership>> {
    const { candidate, watch, signal } = this;
    for (;;) {
      const holder = this.holder;
      if (!holder && this.markerGoneBy !== undefined) {
        const entry = await watch.next(this.markerGoneBy + jitter(this.ttlMs, candidate.random), signal);
        if (!entry) {
          this.dueMarker = this.marker;
          this.markerGoneBy = undefined;
        } else if (entry.revision <= (this.marker ?? 0)) {
          // Seen already.
        } else if (isValue(entry)) this.newHolder(entry);
        else this.markerSeen(entry);
        continue;
      }
      if (!holder) {
        watch.peek(this);
        let answer: Claim<NatsMembership> | number;
        try {
          answer = await candidate.tryCreate(this.ttlMs, this.marker, signal);
        } finally {
          watch.stopPeeking(this);
        }
        if (typeof answer === "number") {
          // The write that beat ours (revision `answer`) is usually on the
          // watch already: the new leader is known without a read.
          this.createLost(watch.newest(answer) ?? (await candidate.read(signal)));
          continue;
        }
        if (!candidate.goMembers) return answer;
        const led = await candidate.goMembers.hold(answer, candidate.clock.now(), watch, signal);
        if (led) return led;
        this.lostWhileGoMembersStoodDown(answer);
        continue;
      }
      const entry = await watch.next(holder.goneBy + jitter(this.ttlMs, candidate.random), signal);
      if (!entry) {
        this.holderDue(holder);
      } else if (entry.revision <= holder.revision) {
        // Seen already (the read, or the entry that named it).
      } else if (isValue(entry)) {
        this.holderWrote(holder, entry);
      } else {
        this.markerSeen(entry);
        if (candidate.waitsOutMarkers) continue;
        // Every follower in a process saw the same marker: they race one per
        // turn of the event loop (src/util/turns.ts), and the first one's
        // create is on its way while the others wait. One whose turn comes
        // after the winning write arrived follows it instead of sending a
        // create that can only lose (with a hundred followers in one
        // process, a change sent 2 to 24 creates instead of 99).
        await candidate.turns.next();
        signal.throwIfAborted();
        this.turnCame(entry.revision);
      }
    }
  }

  /**
   * An entry that arrived while our create is on its way. Every follower
   * sends its create at once; the one that won shows on the watch as soon as
   * the server stored it, often before the answer to ours (one of a hundred
   * in a large election): name its writer then. Our own create shows there
   * too, before its answer: a write under our own name waits for that answer.
   */
  peeked(entry: KeyState): void {
    if (entry.name !== undefined && entry.name !== this.candidate.name) this.onLeader({ name: entry.name, token: entry.revision });
  }

  /** Our create lost: `current` is the key as the watch or a read shows it since. */
  private createLost(current: KeyState): void {
    // Gone again between the create and the read: race for it again.
    this.marker = current.name === undefined && current.revision > 0 ? current.revision : undefined;
    if (this.marker !== undefined && this.candidate.waitsOutMarkers) this.markerFound(current);
    if (!isValue(current)) return;
    const overdue = this.overdue;
    if (overdue && current.revision === overdue.revision) {
      // The server ages entries out on a timer of its own, a little after
      // max_age: look again shortly, a little later each time.
      overdue.goneBy = this.candidate.clock.now() + Math.min(this.ttlMs / 4, 25 * 2 ** this.overdueChecks++);
      this.holder = overdue;
      return;
    }
    this.overdue = undefined;
    this.newHolder(current);
  }

  /** We won, but lost the key while Go members stood down: whoever holds it now is found as after a lost race. */
  private lostWhileGoMembersStoodDown(won: Claim<NatsMembership>): void {
    log.nats("lost %s (token %d) before leading on it", won.membership.id, won.token);
    this.marker = undefined;
    this.overdue = undefined;
  }

  /** The moment the holder's last write must have aged out has come, and no write since. */
  private holderDue(holder: Holder): void {
    // Its last write has aged out unless we missed a renewal: race for the key.
    if (this.overdue !== holder) {
      this.overdue = holder;
      this.overdueChecks = 0;
    }
    this.holder = undefined;
  }

  /** A value newer than the holder's last: its renewal, or another member's write. */
  private holderWrote(holder: Holder, entry: ValueState): void {
    if (entry.name !== holder.name) {
      this.newHolder(entry);
      return;
    }
    holder.revision = entry.revision;
    holder.goneBy = entry.seenAt + this.ttlMs;
  }

  /** A delete or purge marker: the holder left, or an operator removed it. */
  private markerSeen(entry: KeyState): void {
    this.holder = undefined;
    this.overdue = undefined;
    this.marker = entry.revision;
    this.onLeader(undefined);
    if (this.candidate.waitsOutMarkers) {
      this.markerGoneBy = entry.seenAt + this.ttlMs;
      this.dueMarker = undefined;
      this.markerChecks = 0;
    }
  }

  /**
   * Where markers are waited out: our create found the marker `current`.
   * One we waited out is still there (the server ages entries out a little
   * late): look again shortly. Any other was written before we saw it: it
   * is gone a TTL from then at the latest.
   */
  private markerFound(current: KeyState): void {
    if (current.revision === this.dueMarker) {
      this.markerGoneBy = this.candidate.clock.now() + Math.min(this.ttlMs / 4, 25 * 2 ** this.markerChecks++);
      return;
    }
    this.dueMarker = undefined;
    this.markerChecks = 0;
    this.markerGoneBy = current.seenAt + this.ttlMs;
  }

  /** Our turn to race after the marker at `markerRevision`: follow a write that won meanwhile, if one did. */
  private turnCame(markerRevision: number): void {
    const since = this.watch.newest(markerRevision + 1);
    if (!since) return;
    if (isValue(since)) this.newHolder(since);
    else this.marker = since.revision;
  }

  /** `state` shows a holder we did not know: name it. */
  private newHolder(state: ValueState): void {
    const holder = holderOf(state, this.ttlMs);
    this.holder = holder;
    this.markerGoneBy = undefined;
    this.dueMarker = undefined;
    // A value came after the marker: a write conditioned on the marker's
    // revision can only fail now, while the bucket lives, and in a bucket
    // deleted and made again since (its revisions start over) it may succeed
    // over another member's live entry. The next race is a plain create.
    this.marker = undefined;
    this.onLeader({ name: holder.name, token: holder.token });
  }
}

/**
 * A follower's moment to race is spread over a few per cent of the TTL (at
 * most 50 ms), so that many followers do not all send their create in the
 * same millisecond; one wins either way.
 */
export function jitter(ttlMs: number, random: () => number): number {
  return random() * Math.min(50, ttlMs / 20);
}
