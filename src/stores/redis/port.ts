// What the Redis recipe asks of its store, in Redis's own terms: one string
// key per election that lives its PX from its last write, a counter beside it
// in the same hash slot, and a pub/sub channel on which the scripts announce
// who took and who gave up the key.
//
// The recipe (recipe.ts, follower.ts, holder.ts, events.ts) knows the store
// only through this port. ioredis/adapter.ts implements it on the user's
// ioredis client; a simulated store implements it too (test/sim/stores/redis.ts)
// and runs the same recipe in virtual time.
//
// What the recipe relies on:
// - `acquire` is one atomic step (a Lua script): it sets the key only if it
//   is absent, with a PX of `ttlMs`, under a token larger than any the
//   election's counter gave before and, where the counter was lost (a restart
//   without persistence), larger than the server's clock in microseconds
//   (scripts.ts says why that is enough); it publishes the win on the
//   channel in the same step. A key that is held is answered with its
//   holder, token and remaining time to live.
// - `renew` and `release` act only while the key holds `token`; `release`
//   deletes and publishes in the same step, and so does a `renew` that finds
//   the key gone (so followers hear of an expiry or an outside DEL from the
//   first member that notices it). An answer of false means the key
//   is not ours (gone, or someone else's): the membership is lost.
// - `read` answers the key's holder, token and remaining time to live from one
//   moment on the server (GET and PTTL in one script).
// - A subscription delivers every message published on its channels after
//   `subscribe` resolved, in order, and nothing published before; it reports
//   its own end (a lost connection: messages may have been missed), never
//   after stop().
// - Every failure is transient: the state machine retries it. A request the
//   recipe stopped waiting for may still be applied later; the recipe gives
//   back a win it no longer waits for. An adapter must not hold requests
//   while its connection is down (ioredis's offline queue) only to send
//   them minutes later: it fails them at once instead.
// - Keyspace notifications, where the server has them on, arrive on a
//   channel of the key's own (`keyspaceChannel`): the event's name ("del",
//   "expired", "expire", "set") as the message. They are what the server
//   says, when it says it: an expiry is announced when the server removes
//   the key, which may be a little after its PTTL ran out.

/** Who holds the election key, as a script read it. */
export interface RedisHolding {
  /** The name of the member that holds it. */
  readonly holder: string;
  /** The fencing token its acquire was given (0 for a value this recipe did not write). */
  readonly token: number;
  /** Milliseconds the key has left on the server, as PTTL answered; -1 if it has no expiry. */
  readonly pttl: number;
}

/** What an acquire came to: the key is ours under `token`, or someone holds it. */
export type AcquireAnswer = { readonly won: true; readonly token: number } | ({ readonly won: false } & RedisHolding);

/** A message on a subscribed channel: the channel, and the message as published. */
export interface RedisMessageListener {
  onMessage(channel: string, message: string): void;
  /** The subscription ended by itself (its connection closed): messages may have been missed. Never after stop(). */
  onEnd(error: Error): void;
}

/** An open subscription on a connection of its own. */
export interface RedisSubscription {
  /** Unsubscribes and closes the connection. */
  stop(): void;
  /**
   * Checks that the connection still answers (a PING), without waiting: if
   * it does not within the request timeout, the subscription ends (onEnd),
   * as if its connection had closed. Optional: a store whose connections
   * cannot go silent leaves it out.
   */
  probe?(): void;
}

/** The keys and channel of one election. */
export interface ElectionKeys {
  /** The election key, which holds the leader's token and name: `{<key>}`. */
  readonly key: string;
  /** The token counter, in the same hash slot: `{<key>}:token`. */
  readonly counter: string;
  /** Where acquisitions and releases are announced: `{<key>}:leader`. */
  readonly channel: string;
}

export interface RedisPort {
  /** SET key NX PX ttlMs under a new token, announced on the channel; or who holds the key. */
  acquire(keys: ElectionKeys, name: string, ttlMs: number): Promise<AcquireAnswer>;
  /**
   * PEXPIRE key ttlMs if the key holds `token`; false if it does not. A key
   * found absent is announced on the channel as the release of `token` by
   * `name`, in the same step.
   */
  renew(keys: ElectionKeys, token: number, name: string, ttlMs: number): Promise<boolean>;
  /** DEL key and announce it on the channel, if the key holds `token`; false if it does not. */
  release(keys: ElectionKeys, token: number): Promise<boolean>;
  /** Who holds the key now; undefined if nobody does. */
  read(keys: ElectionKeys): Promise<RedisHolding | undefined>;
  /** Subscribes to `channels` on a connection of its own; resolves once the server confirmed every one. */
  subscribe(channels: readonly string[], listener: RedisMessageListener): Promise<RedisSubscription>;
  /**
   * The channel on which the server sends `key`'s keyspace notifications
   * (`__keyspace@<db>__:<key>`); undefined where a subscription could not
   * receive them (a Redis Cluster sends them only to clients of the node
   * that holds the key).
   */
  keyspaceChannel(key: string): string | undefined;
  /**
   * The server's notify-keyspace-events flags (CONFIG GET); undefined if the
   * server refuses to say (managed Redis often renames or forbids CONFIG).
   */
  keyspaceEvents(): Promise<string | undefined>;
  /**
   * WAIT: resolves with how many replicas acknowledged every write made on
   * this connection so far, once `replicas` have or `timeoutMs` has passed.
   * Optional: only for a member that asks for replicas (redisLeader's
   * `replicas` option).
   */
  waitForReplicas?(replicas: number, timeoutMs: number): Promise<number>;
}
