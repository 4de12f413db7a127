// An election on one Redis key, race-style: members race to create the key,
// the winner keeps it alive, and everyone else waits for it to go.
//
//   campaign  one script (scripts.ts): SET key "<token>:<name>" NX PX ttl,
//             the token from an INCR of a counter in the same hash slot,
//             announced on the election's channel. Lost: it names the holder
//             and the key's PTTL.
//   renew     PEXPIRE, only while the key holds our token (holder.ts). Not
//             ours any more: a loss.
//   follow    subscribe to the channel (follower.ts): an announced release
//             starts the next race at once; an announced acquire names the
//             new leader. Expiry is silent there, so a follower checks once,
//             when PTTL says the key must have run out, or hears it at once
//             through keyspace notifications where the server sends them.
//   leave     DEL and announce it, only while the key holds our token.
//
// Expiry is on the server's clock, from when it applied the write; a claim's
// `sentAt` is taken on the member's clock just before the script was sent,
// so the key lives at least until `sentAt + ttlMs` (as the leader counts it)
// unless the server's clock runs fast, a fail-over loses the write, or the
// key is deleted from outside (docs/redis.md says what each does).
//
// The store is the port (port.ts), which ioredis/adapter.ts implements on the
// user's client; time, turns and chance come from the clock, turn queue and
// random source the backend is given, so a simulated store can run this in
// virtual time.
import { deadline, untilAborted } from "../../util/abort";
import { systemClock, type Clock } from "../../util/clock";
import type { Claim, ElectionBackend, Leader, LeaderListener } from "../../contract/backend";
import { log } from "../../util/log";
import { processTurns, type TurnQueue } from "../../util/turns";
import { KeyEvents } from "./events";
import { Follower, jitter, type Candidate, type Holder, type RaceResult } from "./follower";
import { KeyHolder, type RedisMembership, type Replication } from "./holder";
import type { ElectionKeys, RedisHolding, RedisPort } from "./port";
import { electionKeys } from "./scripts";

export type { RedisMembership };

/** Whether to hear expiries and outside deletions through keyspace notifications: ask the server, or be told. */
export type KeyspaceNotifications = "auto" | boolean;

export class RedisBackend implements ElectionBackend<RedisMembership>, Candidate {
  readonly keys: ElectionKeys;
  private readonly holder: KeyHolder;
  /** Whether the server sends the key's keyspace notifications, once asked ("auto"). */
  private serverNotifies: boolean | undefined;

  constructor(
    private readonly port: RedisPort,
    /** The election's name; its keys are `{<key>}` and `{<key>}:token`. */
    readonly key: string,
    readonly name: string,
    /** How long an acquire or a renewal sets the key to live (its PX). */
    readonly ttlMs: number,
    private readonly keyspaceNotifications: KeyspaceNotifications = "auto",
    /** Where followers that heard the leader leave take their turn to race. */
    readonly turns: TurnQueue = processTurns,
    /** What the member's waits, deadlines and `sentAt` are read on: the election's clock. */
    readonly clock: Clock = systemClock,
    /** A number in [0, 1), for the followers' jitter. */
    readonly random: () => number = Math.random,
  ) {
    this.keys = electionKeys(key);
    this.holder = new KeyHolder(port, this.keys, name, clock, ttlMs);
  }

  get description(): string {
    return `Redis ${this.keys.key}`;
  }

  /**
   * From now on a win or a renewal counts only once `replication.replicas`
   * replicas acknowledged it (WAIT, within `replication.timeoutMs`): what
   * redisLeader's `replicas` option sets. A fail-over to such a replica keeps
   * the key (docs/redis.md says what WAIT does not promise).
   */
  requireReplicas(replication: Replication | undefined): void {
    this.holder.replication = replication && replication.replicas > 0 ? replication : undefined;
  }

  async awaitTurn(held: Claim<RedisMembership> | undefined, onLeader: LeaderListener, signal: AbortSignal): Promise<Claim<RedisMembership>> {
    // The state machine passes back what we won when it starts a phase over
    // (after a store outage): still ours, it is our turn again; else lost.
    if (held) {
      await this.holder.confirm(held.membership, signal);
      return held;
    }
    // Subscribed before the first acquire, so no announcement after it goes unheard.
    const events = await KeyEvents.open(this.port, this.keys, await this.keyspaceChannel(signal), this.clock, signal);
    try {
      return await new Follower(this, events, this.ttlMs, onLeader, signal).follow();
    } finally {
      events.close();
    }
  }

  /** One acquire: the claim if it won, else the holder, gone by its PTTL counted from when the script was sent. */
  async race(signal: AbortSignal): Promise<RaceResult> {
    // The key lives its PX from when the server runs the script, which is after this.
    const sentAt = this.clock.now();
    const acquiring = this.port.acquire(this.keys, this.name, this.ttlMs);
    // A win that arrives after we stopped waiting would hold the key for a
    // whole TTL with nobody renewing it: give it back.
    acquiring.then(
      (answer) => {
        if (answer.won && signal.aborted) this.leaveInBackground(this.holder.membership(answer.token));
      },
      () => undefined,
    );
    const answer = await untilAborted("acquire election key", acquiring, signal);
    if (answer.won) {
      const membership = this.holder.membership(answer.token);
      try {
        await this.holder.replicated("win", signal);
      } catch (err) {
        // Not on enough replicas to survive a fail-over: not led on, and given back.
        this.leaveInBackground(membership);
        throw err;
      }
      return { claim: { membership, token: answer.token, sentAt, ttlMs: this.ttlMs } };
    }
    return { holder: this.holderOf(answer, sentAt) };
  }

  renew(membership: RedisMembership, signal: AbortSignal): Promise<void> {
    return this.holder.renew(membership, signal);
  }

  async awaitLoss(membership: RedisMembership, signal: AbortSignal): Promise<void> {
    return this.holder.awaitLoss(membership, await this.keyspaceChannel(signal), signal);
  }

  leave(membership: RedisMembership, signal: AbortSignal): Promise<void> {
    return this.holder.leave(membership, signal);
  }

  async observe(onLeader: LeaderListener, signal: AbortSignal): Promise<void> {
    const events = await KeyEvents.open(this.port, this.keys, await this.keyspaceChannel(signal), this.clock, signal);
    try {
      let holder = await this.readHolder(signal);
      let named = leaderOf(holder);
      onLeader(named);
      for (;;) {
        const event = await events.next(holder ? holder.goneBy + jitter(this.ttlMs, this.random) : Infinity, signal);
        if (!event || event.kind === "gone") holder = await this.readHolder(signal);
        else if (event.kind === "acquired") {
          if (holder && event.token <= holder.token) continue;
          holder = { name: event.name, token: event.token, goneBy: event.seenAt + event.ttlMs, ttlMs: event.ttlMs };
        } else if (event.kind === "released") {
          if (holder && event.token < holder.token) continue;
          holder = undefined;
        } else if (holder) holder.goneBy = event.seenAt + holder.ttlMs;
        const now = leaderOf(holder);
        if (now?.token !== named?.token || now?.name !== named?.name) onLeader(now);
        named = now;
      }
    } finally {
      events.close();
    }
  }

  async readLeader(signal: AbortSignal): Promise<Leader | undefined> {
    return leaderOf(await this.readHolder(signal));
  }

  /** One read of the key: its holder, gone by its PTTL counted from when the read was sent. */
  private async readHolder(signal: AbortSignal): Promise<Holder | undefined> {
    const sentAt = this.clock.now();
    const now = await untilAborted("read election key", this.port.read(this.keys), signal);
    return now && this.holderOf(now, sentAt);
  }

  private holderOf(holding: RedisHolding, sentAt: number): Holder {
    // A key with no expiry (written by hand) is looked at again a TTL later.
    const goneBy = holding.pttl >= 0 ? sentAt + holding.pttl : this.clock.now() + this.ttlMs;
    return { name: holding.holder, token: holding.token, goneBy, ttlMs: this.ttlMs };
  }

  /**
   * The key's keyspace channel if its notifications are to be heard: never
   * with `false`; always with `true` (a managed server that refuses CONFIG
   * but has them on); with "auto", if the server's notify-keyspace-events,
   * asked once, has K and x (expiries), or A. Never on a client that cannot
   * receive them (a cluster's).
   */
  private async keyspaceChannel(signal: AbortSignal): Promise<string | undefined> {
    if (this.keyspaceNotifications === false) return undefined;
    const channel = this.port.keyspaceChannel(this.keys.key);
    if (channel === undefined || this.keyspaceNotifications === true) return channel;
    if (this.serverNotifies === undefined) {
      const flags = await untilAborted("CONFIG GET notify-keyspace-events", this.port.keyspaceEvents(), signal);
      this.serverNotifies = notifiesExpiry(flags);
      log.redis("%s: keyspace notifications %s (notify-keyspace-events %s)", this.description, this.serverNotifies ? "on" : "off", flags ?? "unknown");
    }
    return this.serverNotifies ? channel : undefined;
  }

  private leaveInBackground(membership: RedisMembership): void {
    const bound = deadline(5_000, this.clock);
    this.holder.leave(membership, bound.signal).then(
      () => {
        bound.clear();
        log.redis("gave back %s (token %d) won after the campaign stopped", this.keys.key, membership.token);
      },
      (err: unknown) => {
        bound.clear();
        log.redis("could not give back %s: %s", this.keys.key, (err as Error).message);
      },
    );
  }
}

/** Whether notify-keyspace-events flags send keyspace events (K) for expiries (x, or A for all). */
export function notifiesExpiry(flags: string | undefined): boolean {
  return flags !== undefined && flags.includes("K") && (flags.includes("x") || flags.includes("A"));
}

function leaderOf(holder: Holder | undefined): Leader | undefined {
  return holder && { name: holder.name, token: holder.token };
}
