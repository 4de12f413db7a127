// The SQL of the PostgreSQL recipe, one statement per step of the port, on
// a table whose name was checked and quoted (../table-name.ts). Every time is
// the server's clock_timestamp(): the moment the statement runs, not the
// transaction's start, so a lease is judged when it is written.
//
// The lease row:
//   key         the election's key (primary key: one row per election)
//   holder      the leader's name
//   token       from the bigserial's sequence, drawn anew by every acquire,
//               so it grows with each term whatever happened to the row
//   expires_at  when the lease ends, on the server's clock
// and a trigger that notifies every deleted row (createStatements).
import type { TableName } from "../table-name";

/**
 * The statements that make the table, the sequence of its tokens (the
 * bigserial's), and the trigger that notifies a deleted row's listeners,
 * whoever deletes it: our release, or an operator. For a user with CREATE
 * rights, or to show one without.
 */
export function createStatements(table: TableName): string {
  const notify = functionName(table);
  return (
    `CREATE TABLE IF NOT EXISTS ${table.quoted} (\n` +
    "  key text PRIMARY KEY,\n" +
    "  holder text NOT NULL,\n" +
    "  token bigserial NOT NULL,\n" +
    "  expires_at timestamptz NOT NULL\n" +
    ");\n" +
    `CREATE OR REPLACE FUNCTION ${notify}() RETURNS trigger LANGUAGE plpgsql AS $$\n` +
    "BEGIN\n" +
    `  PERFORM pg_notify(${channelSql("TG_ARGV[0]", "OLD.key")},\n` +
    "    json_build_object('key', OLD.key, 'kind', 'released', 'token', OLD.token::text)::text);\n" +
    "  RETURN NULL;\n" +
    "END $$;\n" +
    `DROP TRIGGER IF EXISTS released ON ${table.quoted};\n` +
    `CREATE TRIGGER released AFTER DELETE ON ${table.quoted} FOR EACH ROW EXECUTE FUNCTION ${notify}(${sqlString(table.quoted)});`
  );
}

/**
 * The channel of an election, in SQL: a hash of the table's name (as the
 * members spell it) and the key, so that any key fits a channel name (an
 * identifier, 63 bytes at most). adapter.ts computes the same in JavaScript.
 */
function channelSql(tableName: string, key: string): string {
  return `'etcd_leader_' || left(encode(sha256(convert_to(${tableName} || E'\\n' || ${key}, 'UTF8')), 'hex'), 40)`;
}

/** The trigger function, beside the table: <table>_released. */
function functionName(table: TableName): string {
  const parts = table.text.split(".");
  const name = `${parts.pop()}_released`;
  return [...parts, name].map((part) => `"${part}"`).join(".");
}

export function sqlString(text: string): string {
  return `'${text.replace(/'/g, "''")}'`;
}

/** The interval of `$n` milliseconds. */
const millis = (n: number) => `make_interval(secs => $${n}::float8 / 1000)`;

/** What a live lease has left, in ms, at this moment. */
const REMAINING = "(extract(epoch FROM expires_at - clock_timestamp()) * 1000)::float8";

export interface Statements {
  /** $1 key, $2 name, $3 ttl ms, $4 channel: one row, `won` true with the new token, or false with the holder's name, token and ms left. */
  readonly acquire: string;
  /** $1 key, $2 token, $3 ttl ms: one row updated if it holds the token and has not expired. */
  readonly renew: string;
  /** $1 key, $2 token: one row answered if the row holding the token was deleted (and, by the table's trigger, the release notified). */
  readonly release: string;
  /** $1 key: the live lease's holder, token and ms left; no row if none. */
  readonly read: string;
  /** No parameter: fails unless the table has the lease columns. */
  readonly checkColumns: string;
}

export function statementsFor(table: TableName): Statements {
  const t = table.quoted;
  return {
    // One statement: the row is taken only if absent or expired, as the
    // server sees it while it holds the row's lock, and the notice goes out
    // with the commit. (The notice's CTE is read by the final SELECT, so it
    // runs; pg_notify is volatile, so it runs once per row taken.) When the
    // row is not taken, the second branch reads the holder from the
    // statement's snapshot; a holder that committed after it began is not in
    // it, and the statement answers no row at all.
    acquire:
      `WITH taken AS (\n` +
      `  INSERT INTO ${t} AS lease (key, holder, expires_at) VALUES ($1, $2, clock_timestamp() + ${millis(3)})\n` +
      "  ON CONFLICT (key) DO UPDATE SET holder = excluded.holder, token = excluded.token, expires_at = excluded.expires_at\n" +
      "  WHERE lease.expires_at <= clock_timestamp()\n" +
      "  RETURNING lease.token\n" +
      "), notified AS (\n" +
      "  SELECT token, pg_notify($4, json_build_object('key', $1::text, 'kind', 'acquired', 'name', $2::text, " +
      "'token', token::text, 'ttlMs', $3::float8)::text) FROM taken\n" +
      ")\n" +
      "SELECT true AS won, token::text AS token, NULL::text AS holder, NULL::float8 AS remaining_ms FROM notified\n" +
      "UNION ALL\n" +
      `SELECT false, token::text, holder, ${REMAINING} FROM ${t} WHERE key = $1 AND NOT EXISTS (SELECT 1 FROM taken)`,
    renew: `UPDATE ${t} SET expires_at = clock_timestamp() + ${millis(3)} WHERE key = $1 AND token = $2::bigint AND expires_at > clock_timestamp()`,
    // The table's trigger notifies the release, in the same statement.
    release: `DELETE FROM ${t} WHERE key = $1 AND token = $2::bigint RETURNING token::text AS token`,
    read: `SELECT holder, token::text AS token, ${REMAINING} AS remaining_ms FROM ${t} WHERE key = $1 AND expires_at > clock_timestamp()`,
    checkColumns: `SELECT key, holder, token, expires_at FROM ${t} LIMIT 0`,
  };
}
