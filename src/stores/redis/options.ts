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
}

/** The Redis-only options apart from the timing. */
export function splitOptions(options: RedisElectionOptions): { keyspaceNotifications: KeyspaceNotifications; timing: ElectionOptions } {
  if (typeof options !== "object" || options === null) {
    throw new TypeError(`options must be an object, got ${options === null ? "null" : typeof options}`);
  }
  const { keyspaceNotifications = "auto", ...timing } = options;
  if ((timing as ElectionOptions).v2 !== undefined) {
    throw new TypeError("the v2 option is for the etcd v2 store (a node-etcd client), not for Redis: leave it out");
  }
  if (keyspaceNotifications !== "auto" && typeof keyspaceNotifications !== "boolean") {
    const got = typeof keyspaceNotifications === "string" ? JSON.stringify(keyspaceNotifications) : typeof keyspaceNotifications;
    throw new TypeError(`keyspaceNotifications must be "auto", true or false, got ${got}`);
  }
  return { keyspaceNotifications, timing };
}
