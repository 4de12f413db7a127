// Leading beside members of the Go nats-kv-leader-elect (the `goMembers`
// option of natsLeader): a member that wins the key keeps it, renewing it,
// and leads only once every Go member that may still believe it leads must
// have found out that it does not.
//
// Why a Go member can go on believing: it has no watch. It learns that its
// key was deleted, purged, or won anew only when its next tick's
// revision-checked update fails, and says IsLeader() true until then. Its
// ticks are one campaign interval apart (0.75 × TTL, the library's fixed
// default) and its update gives up after 5 s (nats.go's JetStream timeout),
// so a Go member stops believing at the latest
//
//     (its last successful write) + 0.75 × TTL + 5 s.
//
// Its last successful write is a value written to the key before our winning
// write: one after ours fails its revision check while we hold the key. So
// every Go member has stopped believing by
//
//     V + 0.75 × TTL + 5 s + 200 ms,
//
// V being a time by which the newest value written to the key before our win
// had been written, and 200 ms a margin (the Go library's own, the pause its
// winners leave after their update) for timers and clock rates. V is read
// off our watch, opened before our first create, which delivers the key's
// entries in order: the arrival of the entry just before our own, a value or
// the delete or purge marker our create went over (a value that marker
// replaced may never be delivered: the bucket keeps one entry per key), or,
// if none came before it, when the watch opened (a value it did not deliver
// was written before that). If the watch cannot tell (it ended, or went past
// our entry without it), the answer to our winning write bounds V.
//
// What that costs, against a member without the option (TTL ≥ 21 s):
// - a key that aged out (a crashed leader): nothing; the leader's last write
//   came a TTL before the key could be won, more than 0.75 × TTL + 5.2 s;
// - a key deleted or purged (an operator, or a leader of ours that stopped):
//   the winner leads 0.75 × TTL + 5.2 s after the delete or purge reached
//   it, and not before the key is won;
// - a member that starts and wins at once (nothing seen yet): 0.75 × TTL +
//   5.2 s after it started watching.
// It assumes Go members tick at 0.75 × TTL (a WithBackoff policy must not tick
// a leader more slowly) and clocks whose rates differ by less than the margin.
import { deadline, untilAborted } from "../../util/abort";
import type { Claim } from "../../contract/backend";
import { Backoff } from "../../util/backoff";
import type { Clock } from "../../util/clock";
import { isMembershipLost } from "../../contract/errors";
import { log } from "../../util/log";
import type { KeyHolder, NatsMembership } from "./holder";
import type { KeyWatch } from "./watch";

/** A Go member's update gives up after this (nats.go's default JetStream request timeout). */
export const GO_UPDATE_TIMEOUT_MS = 5_000;
/** The margin past the Go member's update timeout: the pause its own winners leave after their update. */
export const GO_MARGIN_MS = 200;

/** How long after its last successful write a Go member may still say it leads, on a bucket whose TTL is `ttlMs`. */
export function goLeaderBelief(ttlMs: number): number {
  return 0.75 * ttlMs + GO_UPDATE_TIMEOUT_MS + GO_MARGIN_MS;
}

/** The member's own timing, which the key is renewed with while it waits. */
export interface GoMemberTiming {
  readonly refreshInterval: number;
  readonly requestTimeout: number;
  readonly retryInitialDelay: number;
  readonly retryMaxDelay: number;
}

export class GoMemberWait {
  constructor(
    private readonly holder: KeyHolder,
    private readonly timing: GoMemberTiming,
    private readonly clock: Clock,
    private readonly random: () => number,
  ) {}

  /**
   * Holds the key that `won` created (its answer came at `answeredAt`), renewing
   * it every refresh interval, until the Go members must have stood down;
   * resolves then with the claim to lead on, whose `sentAt` is that of the
   * newest confirmed write, or with undefined if the key was lost meanwhile
   * (a failed renewal, or another write on `watch`). On any other end (the
   * signal aborted, the watch failed) it gives the key back and rejects.
   */
  async hold(
    won: Claim<NatsMembership>,
    answeredAt: number,
    watch: KeyWatch,
    signal: AbortSignal,
  ): Promise<Claim<NatsMembership> | undefined> {
    const { membership } = won;
    const { refreshInterval, requestTimeout, retryInitialDelay, retryMaxDelay } = this.timing;
    const belief = goLeaderBelief(won.ttlMs);
    let leadAt = answeredAt + belief;
    let bounded = false;
    let confirmedSentAt = won.sentAt;
    let renewAt = confirmedSentAt + refreshInterval;
    // As the state machine's renewals back off: several tries fit in what is left of the TTL.
    const backoff = new Backoff(retryInitialDelay, Math.max(retryInitialDelay, Math.min(retryMaxDelay, refreshInterval / 4)), this.random);
    let renewing: Promise<void> | undefined;
    try {
      for (;;) {
        if (!bounded) {
          const before = watch.valueWrittenBefore(membership.token);
          if (before !== "pending") {
            bounded = true;
            if (typeof before === "number") leadAt = Math.min(leadAt, before + belief);
            log.nats("won %s (token %d): Go members stand down %d ms from now", membership.id, won.token, Math.round(leadAt - this.clock.now()));
          }
        }
        const now = this.clock.now();
        // Led on only with a write confirmed within the refresh interval, as
        // the state machine would renew first: after failed renewals, once one succeeds.
        if (now >= leadAt && now < confirmedSentAt + refreshInterval) return { ...won, sentAt: confirmedSentAt };
        if (now >= renewAt) {
          const sentAt = this.clock.now();
          const bound = deadline(requestTimeout, this.clock);
          renewing = this.holder.renew(membership, bound.signal).finally(bound.clear);
          try {
            await untilAborted("renew", renewing, signal);
            confirmedSentAt = sentAt;
            renewAt = sentAt + refreshInterval;
            backoff.reset();
          } catch (err) {
            if (signal.aborted) throw err;
            if (isMembershipLost(err)) return undefined;
            renewAt = this.clock.now() + backoff.next();
            log.nats("renewing %s while Go members stand down failed: %s", membership.id, (err as Error).message);
          }
          continue;
        }
        // Past leadAt only while a renewal is due again after failing.
        const entry = await watch.next(now < leadAt ? Math.min(leadAt, renewAt) : renewAt, signal);
        if (entry && !(await this.holder.stillOurs(membership, entry))) return undefined;
      }
    } catch (err) {
      this.giveBack(membership, renewing);
      throw err;
    }
  }

  /** Deletes the key, once a renewal in flight has settled (it moves the revision the delete is conditioned on). */
  private giveBack(membership: NatsMembership, renewing: Promise<void> | undefined): void {
    void (async () => {
      await renewing?.catch(() => undefined);
      const bound = deadline(this.timing.requestTimeout, this.clock);
      try {
        await this.holder.leave(membership, bound.signal);
      } finally {
        bound.clear();
      }
    })().then(
      () => log.nats("gave back %s (token %d), won while Go members stood down", membership.id, membership.token),
      (err: unknown) => log.nats("could not give back %s: %s", membership.id, (err as Error).message),
    );
  }
}
