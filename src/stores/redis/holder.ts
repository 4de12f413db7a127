// The leader's side of the Redis election: the key it won, renewed and given
// back by scripts that act only while the key still holds our token.
//
// Why a failed renewal is the end: the renew script finds another token (or
// none) at the key only if the key expired, was deleted, or was won anew by
// someone else: our term is over, and the next PEXPIRE would extend
// someone else's. An outside DEL of the key is learnt:
// - at once, where keyspace notifications are on (awaitLoss hears "del");
// - at once, when another member wins the key meanwhile (its acquire is
//   announced on the election's channel, which awaitLoss hears);
// - else at our next renewal, at most refreshInterval later, which finds
//   the key gone, and announces it as our release so that followers race
//   for it at once (an expiry too is heard first by whoever looks). Until
//   then we believe we lead while nobody holds the key: no other member can
//   lead before it wins the key, and a win is announced.
import { untilAborted } from "../../util/abort";
import type { Clock } from "../../util/clock";
import type { Membership } from "../../contract/backend";
import { MembershipLostError } from "../../contract/errors";
import { KeyEvents } from "./events";
import type { ElectionKeys, RedisHolding, RedisPort } from "./port";

/** A key we won: what identifies it. */
export interface RedisMembership extends Membership {
  /** The election key, `{<key>}`. */
  readonly id: string;
  /** The token our acquire was given: the fencing token. */
  readonly token: number;
}

/** How many replicas must acknowledge a win or a renewal before it counts, and how long WAIT waits for them. */
export interface Replication {
  readonly replicas: number;
  readonly timeoutMs: number;
}

export class KeyHolder {
  /** Set by the `replicas` option: wins and renewals count once replicated. */
  replication: Replication | undefined;

  constructor(
    private readonly port: RedisPort,
    private readonly keys: ElectionKeys,
    private readonly name: string,
    private readonly clock: Clock,
    /** How long our acquire and renewals set the key to live. */
    private readonly ttlMs: number,
  ) {}

  membership(token: number): RedisMembership {
    return { id: this.keys.key, token };
  }

  async renew(membership: RedisMembership, signal: AbortSignal): Promise<void> {
    const renewed = await untilAborted("renew", this.port.renew(this.keys, membership.token, this.name, this.ttlMs), signal);
    if (!renewed) throw lost(membership, "the key no longer holds its token (expired, deleted, or won by another member)");
    await this.replicated("renewal", signal);
  }

  /**
   * With the `replicas` option: resolves once that many replicas have every
   * write made so far on the connection (WAIT), the one just confirmed
   * included; throws if fewer did within the wait, so that the write does
   * not count. A renewal that does not count extends no term (the election
   * retries it); a win that does not count is given back (recipe.ts).
   */
  async replicated(what: string, signal: AbortSignal): Promise<void> {
    const replication = this.replication;
    if (!replication || !this.port.waitForReplicas) return;
    const acknowledged = await untilAborted("wait for replicas", this.port.waitForReplicas(replication.replicas, replication.timeoutMs), signal);
    if (acknowledged < replication.replicas) {
      throw new Error(
        `the ${what} reached ${acknowledged} of the ${replication.replicas} replicas asked for within ${replication.timeoutMs} ms (WAIT): it does not count`,
      );
    }
  }

  /** For a member that won the key before (a phase started over): resolves if the key still holds our token, throws MembershipLostError if not. */
  async confirm(membership: RedisMembership, signal: AbortSignal): Promise<void> {
    const now = await untilAborted("read election key", this.port.read(this.keys), signal);
    if (now?.token !== membership.token) throw lost(membership, describe(now));
  }

  /** Resolves once the key is heard, or read, to hold something other than our token. */
  async awaitLoss(membership: RedisMembership, keyspaceChannel: string | undefined, signal: AbortSignal): Promise<void> {
    const events = await KeyEvents.open(this.port, this.keys, keyspaceChannel, this.clock, signal);
    try {
      // Whatever happened between winning and subscribing.
      const read = () => untilAborted("read election key", this.port.read(this.keys), signal);
      if ((await read())?.token !== membership.token) return;
      for (;;) {
        const event = await events.next(Infinity, signal);
        if (!event) continue;
        if (event.kind === "acquired" && event.token !== membership.token) return;
        if (event.kind === "released" && event.token === membership.token) return;
        if (event.kind === "gone" && (await read())?.token !== membership.token) return;
      }
    } finally {
      events.close();
    }
  }

  async leave(membership: RedisMembership, signal: AbortSignal): Promise<void> {
    // Conditioned on our token: a member that leaves late never deletes the key a successor won.
    await untilAborted("leave", this.port.release(this.keys, membership.token), signal);
  }
}

function describe(now: RedisHolding | undefined): string {
  return now ? `the key holds ${JSON.stringify(now.holder)} (token ${now.token})` : "the key is gone";
}

function lost(membership: RedisMembership, why: string): MembershipLostError {
  return new MembershipLostError(`${membership.id} (token ${membership.token}) is no longer ours: ${why}`);
}
