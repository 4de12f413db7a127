// The name of the table that holds the leases, as the user gives it (the
// `table` option) and as the statements use it. A name is one or two
// identifiers (`elections`, `ops.elections`) of lower-case letters, digits
// and underscores: what PostgreSQL folds an unquoted name to, so the table
// is the one `psql` finds under the same name. The statements quote each
// part, so nothing in a name can reach the SQL as anything but a name.

/** The table of leases when the `table` option is left out. */
export const DEFAULT_TABLE = "etcd_leader_elections";

/**
 * The longest part of a name, in bytes: PostgreSQL's longest identifier is
 * 63 (a longer one is cut short silently), and the trigger function's name
 * is the table's with "_released" after it.
 */
const MAX_IDENTIFIER_BYTES = 50;

/** A checked table name. */
export interface TableName {
  /** As the user gave it: `ops.elections`. */
  readonly text: string;
  /** As a statement names it: `"ops"."elections"`. */
  readonly quoted: string;
}

/** Checks the `table` option; throws a TypeError naming it and the value if PostgreSQL would not take it as given. */
export function parseTableName(value: unknown): TableName {
  if (value === undefined) value = DEFAULT_TABLE;
  if (typeof value !== "string") throw new TypeError(`table must be a string such as "${DEFAULT_TABLE}" or "ops.elections", got ${typeof value}`);
  const parts = value.split(".");
  const problem =
    parts.length > 2
      ? "more than one dot (a name is table or schema.table)"
      : parts.map(identifierProblem).find((found) => found !== undefined);
  if (problem) throw new TypeError(`table ${JSON.stringify(value)} is not a table name PostgreSQL takes as given: ${problem}`);
  return { text: value, quoted: parts.map((part) => `"${part}"`).join(".") };
}

function identifierProblem(part: string): string | undefined {
  if (part === "") return "an empty part";
  if (!/^[a-z_][a-z0-9_]*$/.test(part)) {
    return `${JSON.stringify(part)} is not lower-case letters, digits and _ starting with a letter or _ (PostgreSQL folds unquoted names to lower case)`;
  }
  if (Buffer.byteLength(part) > MAX_IDENTIFIER_BYTES) return `${JSON.stringify(part)} is longer than ${MAX_IDENTIFIER_BYTES} bytes`;
  return undefined;
}
