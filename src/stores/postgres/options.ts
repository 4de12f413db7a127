// The options of a member on PostgreSQL: the election's timing, as etcd's
// (src/election/options.ts: ttl in seconds, 10 by default), and where and how
// the leases are kept.
import { resolveOptions, type ElectionOptions, type ResolvedOptions } from "../../election/options";
import { parseTableName, type TableName } from "./table-name";

/** A member's options on PostgreSQL: the election's timing, the table, and whether to LISTEN. */
export interface PostgresElectionOptions extends ElectionOptions {
  /**
   * The table that holds the leases, one row per election: `name` or
   * `schema.name`, lower case. Made (with the sequence of its tokens) if it
   * does not exist. Default "etcd_leader_elections".
   */
  table?: string;
  /**
   * LISTEN for the election's notifications on a connection of its own
   * (default true): followers learn of a release at once, and observers and
   * followers of a new leader without a read. Set it to false behind a
   * transaction pooler (PgBouncer in transaction mode), which cannot keep a
   * LISTEN: a member that stops cleanly then hands over only when its lease
   * expires, up to a TTL later, and a leader learns that its row was taken
   * from outside at its next renewal.
   */
  listen?: boolean;
}

/** What `etcd-leader/postgres` takes for a one-shot read: the table, and how long the read may take. */
export interface PostgresReadOptions {
  table?: string;
  /** How long the read may take, in ms. Default 5000. */
  requestTimeout?: number;
  /** Gives up: the promise rejects with an AbortError whose `cause` is the signal's reason. */
  signal?: AbortSignal;
}

/** The options, checked: the table, LISTEN, and the timing with its defaults. */
export interface ResolvedPostgresOptions {
  readonly table: TableName;
  readonly listen: boolean;
  readonly timing: ResolvedOptions;
}

export function resolvePostgresOptions(options: PostgresElectionOptions): ResolvedPostgresOptions {
  if (typeof options !== "object" || options === null) {
    throw new TypeError(`options must be an object, got ${options === null ? "null" : typeof options}`);
  }
  const { table, listen, ...timing } = options;
  if (timing.v2 !== undefined) {
    throw new TypeError("the v2 option is for the etcd v2 store (a node-etcd client), not for PostgreSQL: leave it out");
  }
  if (timing.watchRearmInterval !== undefined) {
    throw new TypeError("watchRearmInterval is for the etcd v2 store (a node-etcd client), not for PostgreSQL: leave it out");
  }
  if (listen !== undefined && typeof listen !== "boolean") {
    throw new TypeError(`listen must be true or false, got ${typeof listen === "string" ? JSON.stringify(listen) : typeof listen}`);
  }
  return { table: parseTableName(table), listen: listen !== false, timing: resolveOptions(undefined, timing) };
}
