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

/** A key we won: what identifies it. What we wrote to it since is the holder's (OurWrites). */
export interface NatsMembership extends Membership {
  /** The election key. */
  readonly id: string;
  /** The revision of the winning create: the fencing token. */
  readonly token: number;
}

/** Our writes to a key we won, kept beside the membership rather than on it. */
interface OurWrites {
  /** The revision of our latest confirmed write to the key. */
  revision: number;
  /** The update in flight, if any, settled once its answer is in `revision`: a watch entry newer than `revision` may be its own. */
  renewing: Promise<void> | undefined;
}

/**
 * Per membership, for every holder of this process: a member may leave what
 * an earlier backend on the same key won. Until its first renewal, our
 * latest write is the winning create.
 */
const ourWrites = new WeakMap<NatsMembership, OurWrites>();

function writesTo(membership: NatsMembership): OurWrites {
  let writes = ourWrites.get(membership);
  if (!writes) {
    writes = { revision: membership.token, renewing: undefined };
    ourWrites.set(membership, writes);
  }
  return writes;
}

export class KeyHolder {
  constructor(
    private readonly kv: NatsKvPort,
    private readonly key: string,
    private readonly name: string,
    private readonly clock: Clock,
  ) {}

  /** The membership a create won at `revision`. */
  membership(revision: number): NatsMembership {
    return { id: this.key, token: revision };
  }

  /** The revision of our latest confirmed write to the key `membership` won. */
  lastRevision(membership: NatsMembership): number {
    return writesTo(membership).revision;
  }

  async renew(membership: NatsMembership, signal: AbortSignal): Promise<void> {
    const writes = writesTo(membership);
    const stale = writes.revision;
    const update = this.kv.update(this.key, this.name, stale);
    // The revision is taken from the answer even when the caller gave up on
    // it (stop() cuts a renewal short): the write may have been applied, and
    // leave() must delete at its revision, or the key is left to age out.
    const settled = update.then(
      (revision) => void (writes.revision = Math.max(writes.revision, revision)),
      () => undefined,
    );
    writes.renewing = settled;
    void settled.then(() => {
      if (writes.renewing === settled) writes.renewing = undefined;
    });
    try {
      await untilAborted("renew", update, signal);
    } catch (err) {
      const current = this.kv.wrongLastSequence(err);
      if (current !== undefined) throw lost(membership, `its revision ${stale} is stale (the key is at ${current})`, err);
      // The bucket was deleted: so was the key. (Made again, it starts empty.)
      if (this.kv.isBucketMissing(err)) throw lost(membership, "the bucket is gone", err);
      throw err;
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

  /**
   * Resolves once the key shows a write that is not ours: a delete, a purge,
   * another member's value, or no entry at all. `watchAttemptMs`: as
   * KeyWatch.open's `attemptMs`.
   */
  async awaitLoss(membership: NatsMembership, signal: AbortSignal, watchAttemptMs: number | undefined): Promise<void> {
    const watch = await KeyWatch.open(this.kv, this.key, this.clock, signal, watchAttemptMs);
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
    const writes = writesTo(membership);
    if (state.revision < writes.revision) return true;
    if (state.name !== this.name) return false;
    // Our own update's entry can arrive before the update's answer does.
    if (state.revision > writes.revision) await writes.renewing;
    return state.revision <= writes.revision;
  }

  async leave(membership: NatsMembership, signal: AbortSignal): Promise<void> {
    // Conditioned on our last revision: a member that leaves late can never
    // delete the key a successor won meanwhile.
    const writes = writesTo(membership);
    // A renewal still in flight may move our revision: wait for its answer.
    if (writes.renewing) await untilAborted("leave", writes.renewing, signal);
    try {
      await untilAborted("leave", this.kv.delete(this.key, writes.revision), signal);
    } catch (err) {
      if (this.kv.wrongLastSequence(err) === undefined) throw err;
    }
  }
}

function lost(membership: NatsMembership, why: string, cause: unknown): MembershipLostError {
  const message = `${membership.id} (token ${membership.token}) is no longer ours: ${why}`;
  return new MembershipLostError(message, cause === undefined ? undefined : { cause });
}
