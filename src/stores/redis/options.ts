// The options of a member on Redis: the election's timing, checked as
// etcd's is (src/election/options.ts refuses any option it does not know),
// and what only Redis needs.
import type { ElectionOptions } from "../../election/options";
import type { KeyspaceNotifications } from "./recipe";

/** Timing for a member on Redis, as for etcd (`ttl` in seconds, default 10), and how it hears expiries. */
export interface RedisElectionOptions extends ElectionOptions {
  /**
   * Whether followers, observers and the leader hear the election key's
   * expiry and outside deletion through Redis keyspace notifications, at
   * once, instead of by one check when the key's PTTL runs out (followers)
   * and at the next renewal (a leader whose key was deleted).
   * "auto" (the default): if the server's notify-keyspace-events, asked once
   * with CONFIG GET, has K with x (or A); off where CONFIG is refused, and
   * on a Cluster client. true: subscribe to them without asking (a managed
   * server that forbids CONFIG but has them on). false: never.
   */
  keyspaceNotifications?: KeyspaceNotifications;
  /**
   * How many replicas must acknowledge a win or a renewal (Redis's WAIT,
   * sent after it on the same connection, waiting at most half the request
   * timeout) before it counts: a fail-over to one of them keeps the key. A
   * renewal that fewer replicas acknowledged extends no term; a win is
   * given back. Default 0 (WAIT is not sent). Not on a Cluster client, whose
   * WAIT would go to any node. docs/redis.md says what it does not promise.
   */
  replicas?: number;
}

/** The Redis-only options apart from the timing. */
export function splitOptions(options: RedisElectionOptions): { keyspaceNotifications: KeyspaceNotifications; replicas: number; timing: ElectionOptions } {
  if (typeof options !== "object" || options === null) {
    throw new TypeError(`options must be an object, got ${options === null ? "null" : typeof options}`);
  }
  const { keyspaceNotifications = "auto", replicas = 0, ...timing } = options;
  if (typeof replicas !== "number" || !Number.isInteger(replicas) || replicas < 0 || replicas > 1_000) {
    throw new RangeError(`replicas must be a whole number from 0 to 1000, got ${typeof replicas === "number" ? replicas : typeof replicas}`);
  }
  if ((timing as ElectionOptions).v2 !== undefined) {
    throw new TypeError("the v2 option is for the etcd v2 store (a node-etcd client), not for Redis: leave it out");
  }
  if (keyspaceNotifications !== "auto" && typeof keyspaceNotifications !== "boolean") {
    const got = typeof keyspaceNotifications === "string" ? JSON.stringify(keyspaceNotifications) : typeof keyspaceNotifications;
    throw new TypeError(`keyspaceNotifications must be "auto", true or false, got ${got}`);
  }
  return { keyspaceNotifications, replicas, timing };
}
