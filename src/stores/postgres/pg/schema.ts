// The table of leases, made once, up front, when the first member of a
// process is made (postgresLeader is async for this): if it exists, nothing
// is created and no CREATE right is needed; if not, it is created with the
// sequence of its tokens. A user without the right gets an error that shows
// the statements to run.
//
// Members that start together on a new database would otherwise make it
// together, and PostgreSQL fails one of two concurrent CREATE OR REPLACE
// FUNCTIONs ("tuple concurrently updated") or CREATE TABLEs (a unique
// violation in its catalog). So the statements run as one transaction that
// first takes a transaction-scoped advisory lock named after the table: the
// makers take turns, and the lock goes with the transaction (a pooler in
// transaction mode keeps it right). It guards the making only; the election
// itself never relies on a lock held by a session (docs/postgres.md).
import { untilAborted } from "../../../util/abort";
import type { TableName } from "../table-name";
import type { PostgresClient } from "./client";
import { createStatements, sqlString, statementsFor } from "./statements";

/** SQLSTATE insufficient_privilege. */
const INSUFFICIENT_PRIVILEGE = "42501";
/** SQLSTATE invalid_schema_name: the table's schema does not exist. */
const INVALID_SCHEMA_NAME = "3F000";
/** SQLSTATE undefined_column. */
const UNDEFINED_COLUMN = "42703";
/** SQLSTATE undefined_table. */
const UNDEFINED_TABLE = "42P01";
/** SQLSTATE unique_violation, duplicate_table: another process made the table in the same instant. */
const MADE_MEANWHILE = new Set(["23505", "42P07"]);

/** Makes sure the table of leases exists with its columns; creates it (and its sequence) if it does not. */
export async function ensureTable(client: PostgresClient, table: TableName, signal: AbortSignal): Promise<void> {
  const run = (text: string) => untilAborted(`make the table ${table.text}`, client.query(text), signal);
  const { checkColumns } = statementsFor(table);
  try {
    await run(checkColumns);
    return;
  } catch (err) {
    if (codeOf(err) === UNDEFINED_COLUMN) throw wrongColumns(table, err);
    if (codeOf(err) !== UNDEFINED_TABLE) throw err;
  }
  try {
    // One simple query, so one transaction: the lock is held until the last statement has run.
    await run(`SELECT pg_advisory_xact_lock(hashtext(${sqlString(`etcd-leader ${table.quoted}`)}));\n${createStatements(table)}`);
  } catch (err) {
    const code = codeOf(err);
    if (code === INSUFFICIENT_PRIVILEGE) throw noRight(table, err);
    if (code === INVALID_SCHEMA_NAME) {
      throw new Error(`the schema of the table ${table.text} does not exist: create it, or give another table option (${(err as Error).message})`, {
        cause: err,
      });
    }
    if (!code || !MADE_MEANWHILE.has(code)) throw err;
  }
  await run(checkColumns);
}

function noRight(table: TableName, cause: unknown): Error {
  return new Error(
    `the table ${table.text} does not exist, and this user may not create it (${(cause as Error).message}). ` +
      `Run as a user who may, then grant this one its use:\n\n${createStatements(table)}\n` +
      `GRANT SELECT, INSERT, UPDATE, DELETE ON ${table.quoted} TO <this user>;\n` +
      `GRANT USAGE ON SEQUENCE ${sequenceOf(table)} TO <this user>;\n`,
    { cause },
  );
}

function wrongColumns(table: TableName, cause: unknown): Error {
  return new Error(
    `the table ${table.text} exists but is not a table of leases (${(cause as Error).message}): ` +
      `give the table option another name, or make it as\n\n${createStatements(table)}\n`,
    { cause },
  );
}

/** The sequence bigserial makes for the token column: <table>_token_seq, beside the table. */
function sequenceOf(table: TableName): string {
  const parts = table.text.split(".");
  const name = `${parts.pop()}_token_seq`;
  return [...parts, name].map((part) => `"${part}"`).join(".");
}

function codeOf(err: unknown): string | undefined {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === "string" ? code : undefined;
}
