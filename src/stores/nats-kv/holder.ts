// The leader's side of the NATS KV election: the key it won, kept by updates
// conditioned on the revision of its own last write, watched for anyone
// else's write, and deleted on leaving only if it is still ours.
//
// Why a failed conditional update is the end: an update with our last
// revision succeeds only if nobody wrote the key since, so a failure means
// someone deleted, purged or overwrote it, or it expired and was won anew.
// (An update of ours that timed out yet was applied later makes the next one
// fail too: a needless step-down, never two leaders.)
import { untilAborted } from "../../util/abort";
import type { Clock } from "../../util/clock";
import type { Membership } from "../../contract/backend";
import { MembershipLostError } from "../../contract/errors";
import { readKey, type KeyState } from "./key-state";
import type { NatsKvPort } from "./port";
import { KeyWatch } from "./watch";

export interface NatsMembership extends Membership {
  /** The election key. */
  readonly id: string;
  /** The revision of the winning create: the fencing token. */
  readonly token: number;
  /** The revision of our latest confirmed write to the key. */
  revision: number;
  /** The update in flight, if any: a watch entry newer than `revision` may be its own. */
  renewing: Promise<unknown> | undefined;
}

export class KeyHolder {
  constructor(
    private readonly kv: NatsKvPort,
    private readonly key: string,
    private readonly name: string,
    private readonly clock: Clock,
  ) {}

  membership(revision: number): NatsMembership {
    return { id: this.key, token: revision, revision, renewing: undefined };
  }

  async renew(membership: NatsMembership, signal: AbortSignal): Promise<void> {
    const update = this.kv.update(this.key, this.name, membership.revision);
    membership.renewing = update;
    try {
      const revision = await untilAborted("renew", update, signal);
      membership.revision = Math.max(membership.revision, revision);
    } catch (err) {
      const current = this.kv.wrongLastSequence(err);
      if (current !== undefined) throw lost(membership, `its revision ${membership.revision} is stale (the key is at ${current})`, err);
      // The bucket was deleted: so was the key. (Made again, it starts empty.)
      if (this.kv.isBucketMissing(err)) throw lost(membership, "the bucket is gone", err);
      throw err;
    } finally {
      if (membership.renewing === update) membership.renewing = undefined;
    }
  }

  /**
   * For a member that won the key before (the state machine starts a phase
   * over after a store outage): resolves if the key is still ours, throws
   * MembershipLostError if not.
   */
  async confirm(membership: NatsMembership, signal: AbortSignal): Promise<void> {
    const now = await readKey(this.kv, this.key, this.clock, signal);
    if (!(await this.stillOurs(membership, now))) {
      throw lost(membership, now.name === undefined ? "the key is gone" : `the key holds ${JSON.stringify(now.name)} at revision ${now.revision}`, undefined);
    }
  }

  /** Resolves once the key shows a write that is not ours: a delete, a purge, another member's value, or no entry at all. */
  async awaitLoss(membership: NatsMembership, signal: AbortSignal): Promise<void> {
    const watch = await KeyWatch.open(this.kv, this.key, this.clock, signal);
    try {
      // Whatever happened between winning and opening the watch.
      const now = await readKey(this.kv, this.key, this.clock, signal);
      if (!(await this.stillOurs(membership, now))) return;
      for (;;) {
        const entry = await watch.next(Infinity, signal);
        if (entry && !(await this.stillOurs(membership, entry))) return;
      }
    } finally {
      watch.close();
    }
  }

  /** Whether `state`, an entry or a read of the key, shows it still ours. */
  async stillOurs(membership: NatsMembership, state: KeyState): Promise<boolean> {
    // No entry at all: it aged out (or the bucket was emptied).
    if (state.revision === 0) return false;
    if (state.revision < membership.revision) return true;
    if (state.name !== this.name) return false;
    // Our own update's entry can arrive before the update's answer does.
    if (state.revision > membership.revision) await membership.renewing?.catch(() => undefined);
    return state.revision <= membership.revision;
  }

  async leave(membership: NatsMembership, signal: AbortSignal): Promise<void> {
    // Conditioned on our last revision: a member that leaves late can never
    // delete the key a successor won meanwhile.
    try {
      await untilAborted("leave", this.kv.delete(this.key, membership.revision), signal);
    } catch (err) {
      if (this.kv.wrongLastSequence(err) === undefined) throw err;
    }
  }
}

function lost(membership: NatsMembership, why: string, cause: unknown): MembershipLostError {
  const message = `${membership.id} (token ${membership.token}) is no longer ours: ${why}`;
  return new MembershipLostError(message, cause === undefined ? undefined : { cause });
}
