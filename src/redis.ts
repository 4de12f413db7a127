// The Redis entry, `etcd-leader/redis`: the same Election, observer and
// one-shot read on one Redis key. Nothing here loads ioredis: the caller's
// client brings it, and the main entry never loads this file.
//
//   const redis = new Redis(process.env.REDIS_URL);
//   const election = await redisLeader(redis, "billing", "worker-1", { ttl: 10 });
//   election.start();
//
// The election's keys are `{billing}` (the leader's token and name) and
// `{billing}:token` (the token counter), in one hash slot, so that a Redis
// Cluster client works too. docs/redis.md gives the recipe and what Redis
// replication does to its guarantee.
import type { Leader } from "./contract/backend";
import { RedisBackend } from "./stores/redis/recipe";
import { checkClient, checkKey, type RedisClient } from "./stores/redis/ioredis/client";
import { IoredisAdapter } from "./stores/redis/ioredis/adapter";
import { splitOptions, type RedisElectionOptions } from "./stores/redis/options";
import { Election } from "./election/election";
import { abortError } from "./leadership/lost";
import { LeaderObserver } from "./election/observer";
import { resolveOptions } from "./election/options";
import { readCandidates, type Candidates } from "./election/candidates";
import { checkSignal } from "./util/abort";
import type { KeyspaceNotifications } from "./stores/redis/recipe";

export type { RedisClient, RedisElectionOptions, KeyspaceNotifications, Candidates };

/** The one-object form: `redisLeader({ redis, key, name, ...options })`. */
export interface RedisElectionSettings extends RedisElectionOptions {
  redis: RedisClient;
  key: string;
  name: string;
}

/** What a one-shot read takes: how long to wait, and a signal to stop waiting. */
export interface RedisReadOptions {
  requestTimeout?: number;
  signal?: AbortSignal;
}

/**
 * A member of the election on `key`, named `name`, on the ioredis client
 * `redis` (a Redis or a Cluster). Rejects with a TypeError for a client that
 * is no ioredis client, a key with a brace, or an option it does not know,
 * and with a RangeError for timings that do not fit. Call `.start()` on the
 * result to campaign.
 */
export async function redisLeader(settings: RedisElectionSettings): Promise<Election>;
export async function redisLeader(redis: RedisClient, key: string, name: string, options?: RedisElectionOptions): Promise<Election>;
export async function redisLeader(
  redis: RedisClient | RedisElectionSettings,
  key?: string,
  name?: string,
  options: RedisElectionOptions = {},
): Promise<Election> {
  if (key === undefined && isSettings(redis)) {
    const { redis: client, key: k, name: n, ...rest } = redis;
    return redisLeader(client, k, n, rest);
  }
  if (typeof name !== "string" || name.trim() === "") throw new TypeError(`name must be a non-empty string, got ${JSON.stringify(name)}`);
  const { keyspaceNotifications, replicas, timing } = splitOptions(options);
  const resolved = resolveOptions(undefined, timing);
  const backend = backendFor(redis, key, name, resolved.ttlMs, keyspaceNotifications, resolved.requestTimeout);
  if (replicas > 0) {
    if ((redis as RedisClient).isCluster) {
      throw new TypeError("the replicas option needs a Redis client, not a Cluster: a Cluster client sends WAIT to any node, not to the one that holds the election");
    }
    backend.requireReplicas({ replicas, timeoutMs: resolved.requestTimeout / 2 });
  }
  return new Election(backend, name, resolved);
}

export namespace redisLeader {
  /** Follows who leads the election on `key` without joining it; `.start()` or iterate to begin. */
  export function observe(redis: RedisClient, key: string, options: RedisElectionOptions = {}): LeaderObserver {
    const { keyspaceNotifications, timing } = splitOptions(options);
    const resolved = resolveOptions(undefined, timing);
    return new LeaderObserver(backendFor(redis, key, "observer", resolved.ttlMs, keyspaceNotifications, resolved.requestTimeout), resolved);
  }

  /** One read of who leads the election on `key`: `{ name, token }`, or undefined while nobody does. */
  export async function whoLeads(redis: RedisClient, key: string, options: RedisReadOptions = {}): Promise<Leader | undefined> {
    const backend = backendFor(redis, key, "observer", 1_000, false, requestTimeout(options));
    const signal = checkSignal(options.signal, "whoLeads()");
    const timeout = AbortSignal.timeout(requestTimeout(options));
    if (signal?.aborted) throw abortError(signal.reason);
    try {
      return await backend.readLeader(signal ? AbortSignal.any([signal, timeout]) : timeout);
    } catch (err) {
      if (signal?.aborted) throw abortError(signal.reason);
      throw err;
    }
  }

  /** Who is in line: on Redis the leader alone (`scope: "leader"`), since a member that does not lead holds nothing in Redis. */
  export async function candidates(redis: RedisClient, key: string, options: RedisReadOptions = {}): Promise<Candidates> {
    const backend = backendFor(redis, key, "observer", 1_000, false, requestTimeout(options));
    return readCandidates(backend, requestTimeout(options), checkSignal(options.signal, "candidates()"));
  }
}

function isSettings(value: unknown): value is RedisElectionSettings {
  return typeof value === "object" && value !== null && "redis" in value && "key" in value;
}

function backendFor(redis: unknown, key: unknown, name: string, ttlMs: number, keyspace: KeyspaceNotifications, requestTimeoutMs: number): RedisBackend {
  checkClient(redis);
  checkKey(key);
  return new RedisBackend(new IoredisAdapter(redis, requestTimeoutMs), key, name, ttlMs, keyspace);
}

/** A one-shot read's timeout, checked: 5 s unless given. */
function requestTimeout(options: RedisReadOptions): number {
  if (typeof options !== "object" || options === null) throw new TypeError(`options must be an object, got ${options === null ? "null" : typeof options}`);
  const { requestTimeout = 5_000 } = options;
  if (typeof requestTimeout !== "number" || !Number.isFinite(requestTimeout) || requestTimeout <= 0) {
    throw new RangeError(`requestTimeout must be a positive number of milliseconds, got ${String(requestTimeout)}`);
  }
  return requestTimeout;
}
