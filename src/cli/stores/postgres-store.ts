// `--backend postgres`: the election on a row of a PostgreSQL table, through
// `etcd-leader/postgres`. The server is named by --url, else DATABASE_URL (a
// libpq connection URI); --table names the table of leases.
//
// pg (node-postgres) is an optional peer, loaded here only when --backend
// postgres is given. The pool's first connection is made before any command
// starts, so that a server that cannot be reached, or credentials it
// refuses, fail at once, with a message, instead of being retried in silence.
// The TTL is the member's --ttl (10 s by default), as on etcd.
import { setTimeout as delay } from "node:timers/promises";
import { postgresLeader, type PgPool } from "../../postgres";
import { parseTableName } from "../../stores/postgres/table-name";
import { loadClient } from "./load-client";
import { CliError, EXIT } from "../exit";
import type { Store } from "./store";

export interface PostgresFlags {
  /** A connection URI, postgres://user:password@host:port/database. */
  url?: string | undefined;
  /** The table of leases: name or schema.name. */
  table?: string | undefined;
}

/** How long the first connection may take. */
const CONNECT_TIMEOUT_MS = 5_000;
/** How long closing the pool may take on the way out. */
const CLOSE_TIMEOUT_MS = 2_000;

interface PgModule {
  Pool: new (config: object) => PgPool & { end(): Promise<void>; on(event: "error", listener: (err: Error) => void): unknown };
}

export async function connectPostgres(flags: PostgresFlags): Promise<Store> {
  const url = flags.url ?? process.env.DATABASE_URL;
  if (url === undefined || url.trim() === "") {
    throw new CliError(EXIT.usage, "--backend postgres needs --url postgres://user@host:5432/database (or DATABASE_URL in the environment)");
  }
  let table: string | undefined;
  try {
    table = parseTableName(flags.table).text;
  } catch (err) {
    throw new CliError(EXIT.usage, `--table: ${(err as Error).message}`);
  }
  const where = redacted(url);
  const description = `PostgreSQL table ${table} at ${where}`;
  const flagsToCheck = "check --url (or DATABASE_URL): host, port, user, password and database, and --table";

  const { Pool } = loadClient("pg", "--backend postgres") as PgModule;
  let pool: InstanceType<PgModule["Pool"]>;
  try {
    pool = new Pool({ connectionString: url, keepAlive: true, connectionTimeoutMillis: CONNECT_TIMEOUT_MS });
  } catch (err) {
    throw new CliError(EXIT.usage, `--url ${where}: ${(err as Error).message}`);
  }
  // An idle connection that fails is reported here; the election finds out from its own requests.
  pool.on("error", () => undefined);
  // pool.end() waits for every connection to close, and one gone silent
  // never does: the CLI exits once the others are done, or after a while.
  const closePool = () => Promise.race([pool.end().catch(() => undefined), delay(CLOSE_TIMEOUT_MS, undefined, { ref: false })]);
  try {
    await pool.query("SELECT 1");
  } catch (err) {
    await closePool();
    throw new CliError(EXIT.unavailable, `cannot connect to PostgreSQL at ${where}: ${(err as Error).message}\n${flagsToCheck}`);
  }

  return {
    description,
    flagsToCheck,
    election: async (key, name, ttlSeconds, options = {}) => {
      const { goMembers, ...timing } = options;
      if (goMembers !== undefined) throw new CliError(EXIT.usage, "--go-members is for NATS KV, not PostgreSQL: leave it out");
      try {
        return await postgresLeader(pool, key, name, { ...timing, ...(ttlSeconds !== undefined ? { ttl: ttlSeconds } : {}), table });
      } catch (err) {
        // The table is read (or made) before the member exists: a failure there is the store's, not ours.
        const refusal = refused(err);
        if (refusal === err && !(err instanceof TypeError) && !(err instanceof RangeError)) {
          throw new CliError(EXIT.unavailable, `cannot set up the table ${table} at ${where}: ${(err as Error).message}\n${flagsToCheck}`);
        }
        throw refusal;
      }
    },
    observe: (key) => {
      try {
        return postgresLeader.observe(pool, key, { table });
      } catch (err) {
        throw refused(err);
      }
    },
    whoLeads: (key, requestTimeout) =>
      postgresLeader.whoLeads(pool, key, { table, requestTimeout }).catch((err: unknown) => {
        throw refused(err);
      }),
    candidates: (key, requestTimeout) =>
      Promise.resolve()
        .then(() => postgresLeader.candidates(pool, key, { table, requestTimeout }))
        .catch((err: unknown) => {
          throw refused(err);
        }),
    close: closePool,
  };
}

/** A key or name the library refuses (a TypeError naming it) is a usage error; the table's statements, unavailable. */
function refused(err: unknown): unknown {
  if (err instanceof TypeError && /^(key|name) /.test(err.message)) return new CliError(EXIT.usage, err.message);
  if (err instanceof Error && err.message.includes("may not create it")) return new CliError(EXIT.unavailable, err.message);
  return err;
}

/** The URL without its password, for messages. */
function redacted(url: string): string {
  try {
    const parsed = new URL(url);
    if (parsed.password) parsed.password = "***";
    return parsed.toString();
  } catch {
    return url.replace(/:[^:@/]*@/, ":***@");
  }
}
