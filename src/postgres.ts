// The PostgreSQL entry, `etcd-leader/postgres`: the same Election, observer
// and one-shot reads on one row of a table of leases. Nothing here loads pg:
// the caller's pool brings its client, and the main entry never loads this
// file.
//
//   const pool = new pg.Pool({ connectionString: process.env.DATABASE_URL, keepAlive: true });
//   const election = await postgresLeader(pool, "billing", "worker-1", { ttl: 10 });
//   election.start();
//
// The table (etcd_leader_elections unless the `table` option names another)
// is made if it does not exist, once, before the member is made: so
// `postgresLeader` is async, and fails there, at once, for a user who may not
// create it, with the statements to run. See docs/postgres.md.
import type { Leader } from "./contract/backend";
import { Election } from "./election/election";
import { readCandidates, type Candidates } from "./election/candidates";
import { LeaderObserver } from "./election/observer";
import { abortError } from "./leadership/lost";
import { PostgresBackend } from "./stores/postgres/recipe";
import { PgAdapter } from "./stores/postgres/pg/adapter";
import { checkClient, type PgConnection, type PgPool, type PostgresClient } from "./stores/postgres/pg/client";
import { ensureTable } from "./stores/postgres/pg/schema";
import { resolvePostgresOptions, type PostgresElectionOptions, type PostgresReadOptions } from "./stores/postgres/options";
import { parseTableName } from "./stores/postgres/table-name";
import { checkOptions, checkSignal } from "./util/abort";

export type { PostgresElectionOptions, PostgresReadOptions, PostgresClient, PgPool, PgConnection, Candidates };

/** The one-object form: `postgresLeader({ pool, key, name, ...options })`. */
export interface PostgresElectionSettings extends PostgresElectionOptions {
  pool: PostgresClient;
  key: string;
  name: string;
}

/**
 * The longest key or name, in bytes: both travel in a notification, whose
 * payload PostgreSQL limits to 8000 bytes.
 */
const MAX_TEXT_BYTES = 1000;

/** How long a one-shot read may take when its options say nothing. */
const DEFAULT_READ_TIMEOUT_MS = 5_000;

/**
 * A member of the election on `key`, named `name`, on the user's pg.Pool
 * (or a connected pg.Client). Makes the table of leases first if it does not
 * exist; rejects with an Error showing the statements to run if the user may
 * not, with a TypeError for a pool that is no pool, a bad key, name or table,
 * and with a RangeError for a timing that does not fit. Call `.start()` on
 * the result to campaign.
 */
export async function postgresLeader(settings: PostgresElectionSettings): Promise<Election>;
export async function postgresLeader(pool: PostgresClient, key: string, name: string, options?: PostgresElectionOptions): Promise<Election>;
export async function postgresLeader(
  pool: PostgresClient | PostgresElectionSettings,
  key?: string,
  name?: string,
  options: PostgresElectionOptions = {},
): Promise<Election> {
  if (key === undefined && isSettings(pool)) {
    const { pool: p, key: k, name: n, ...rest } = pool;
    return postgresLeader(p, k, n, rest);
  }
  checkClient(pool);
  checkText("key", key);
  checkText("name", name);
  const resolved = resolvePostgresOptions(options);
  const adapter = new PgAdapter(pool, resolved.table, resolved.timing.requestTimeout);
  await ensureTable(pool, resolved.table, AbortSignal.timeout(resolved.timing.requestTimeout));
  const backend = new PostgresBackend(adapter, key, name, resolved.timing.ttlMs, { listen: resolved.listen, requestTimeout: resolved.timing.requestTimeout });
  return new Election(backend, name, resolved.timing);
}

export namespace postgresLeader {
  /** Follows who leads the election on `key` without joining it; `.start()` or iterate to begin. */
  export function observe(pool: PostgresClient, key: string, options: PostgresElectionOptions = {}): LeaderObserver {
    checkClient(pool);
    checkText("key", key);
    const resolved = resolvePostgresOptions(options);
    const backend = new PostgresBackend(new PgAdapter(pool, resolved.table, resolved.timing.requestTimeout), key, "observer", resolved.timing.ttlMs, {
      listen: resolved.listen,
      requestTimeout: resolved.timing.requestTimeout,
    });
    return new LeaderObserver(backend, resolved.timing);
  }

  /** One read of who leads the election on `key`: `{ name, token }`, or undefined while nobody does. */
  export async function whoLeads(pool: PostgresClient, key: string, options: PostgresReadOptions = {}): Promise<Leader | undefined> {
    const { backend, timeoutMs, signal } = reader(pool, key, options, "whoLeads()");
    if (signal?.aborted) throw abortError(signal.reason);
    const timeout = AbortSignal.timeout(timeoutMs);
    try {
      return await backend.readLeader(signal ? AbortSignal.any([signal, timeout]) : timeout);
    } catch (err) {
      if (signal?.aborted) throw abortError(signal.reason);
      throw err;
    }
  }

  /**
   * Who is in line: on PostgreSQL the leader alone (`scope: "leader"`), since
   * a member that does not lead holds nothing in the table.
   */
  export async function candidates(pool: PostgresClient, key: string, options: PostgresReadOptions = {}): Promise<Candidates> {
    const { backend, timeoutMs, signal } = reader(pool, key, options, "candidates()");
    return readCandidates(backend, timeoutMs, signal);
  }
}

function isSettings(value: unknown): value is PostgresElectionSettings {
  return typeof value === "object" && value !== null && "pool" in value && "key" in value;
}

/** The backend of a one-shot read, with its checked timeout and signal. */
function reader(
  pool: unknown,
  key: unknown,
  options: PostgresReadOptions,
  where: string,
): { backend: PostgresBackend; timeoutMs: number; signal: AbortSignal | undefined } {
  checkClient(pool);
  checkText("key", key);
  const { table, requestTimeout = DEFAULT_READ_TIMEOUT_MS, signal, ...unknown } = checkOptions(options, where);
  const extra = Object.keys(unknown);
  if (extra.length > 0) throw new TypeError(`${where}: unknown option ${JSON.stringify(extra[0])}; the options are table, requestTimeout, signal`);
  if (typeof requestTimeout !== "number" || !(requestTimeout > 0) || requestTimeout > 2 ** 31 - 1) {
    throw new RangeError(`${where}: requestTimeout must be a positive number of ms, got ${JSON.stringify(requestTimeout)}`);
  }
  // The TTL only paces an observer; a read makes no use of it.
  const backend = new PostgresBackend(new PgAdapter(pool, parseTableName(table), requestTimeout), key, "observer", DEFAULT_READ_TIMEOUT_MS, {
    listen: true,
    requestTimeout,
  });
  return { backend, timeoutMs: requestTimeout, signal: checkSignal(signal, where) };
}

/** A key or name PostgreSQL can hold and a notification can carry. */
function checkText(what: "key" | "name", value: unknown): asserts value is string {
  if (typeof value !== "string" || value.trim() === "") {
    throw new TypeError(`${what} must be a non-empty string, got ${typeof value === "string" ? JSON.stringify(value) : typeof value}`);
  }
  if (value.includes("\0")) throw new TypeError(`${what} ${JSON.stringify(value)} holds a NUL character, which PostgreSQL's text cannot`);
  if (Buffer.byteLength(value) > MAX_TEXT_BYTES) {
    throw new TypeError(`${what} is ${Buffer.byteLength(value)} bytes long; at most ${MAX_TEXT_BYTES} (it travels in a notification, of 8000 bytes at most)`);
  }
}
