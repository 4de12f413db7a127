// The port (../port.ts) on the user's pg.Pool (or pg.Client) of
// node-postgres 8. Each step of the port is one statement (statements.ts),
// sent through the pool as it is; notifications come on a LISTEN connection
// of the adapter's own (listener.ts).
//
// What pg needs worked around is here, and only here:
// - a bigint comes back as a string: a token is parsed, and refused unless
//   it is a safe integer;
// - an answer is checked for the shape the statement gives, so that a
//   wrapper of the user's own that answers something else fails loudly;
// - errors are classified by SQLSTATE: 42P01 (undefined_table) is the table
//   missing; anything else is transient, and the state machine retries it.
import { createHash } from "node:crypto";
import type { Acquired, LeaseHolder, LeaseListener, LeaseListening, PostgresPort } from "../port";
import type { TableName } from "../table-name";
import { isPool, type PostgresClient } from "./client";
import { SharedListener } from "./listener";
import { statementsFor, type Statements } from "./statements";

/** SQLSTATE undefined_table. */
const UNDEFINED_TABLE = "42P01";

export class PgAdapter implements PostgresPort {
  private readonly statements: Statements;
  private readonly listener: SharedListener;

  constructor(
    private readonly client: PostgresClient,
    private readonly tableName: TableName,
    /**
     * How long pg waits for a statement's answer before it gives up (its
     * query_timeout): the election's request timeout. A pool closes the
     * connection of a statement it gave up on, so that a connection gone
     * silent is not handed out again; a pg.Client stays stuck behind it
     * (docs/postgres.md: use a pool). Undefined: pg waits as long as TCP does.
     */
    private readonly queryTimeoutMs?: number,
  ) {
    this.statements = statementsFor(tableName);
    this.listener = new SharedListener(client, readPayload, queryTimeoutMs);
  }

  /** Sends one statement, bounded by queryTimeoutMs. */
  private query(text: string, values: unknown[]) {
    return this.queryTimeoutMs === undefined ? this.client.query(text, values) : this.client.query({ text, values, query_timeout: this.queryTimeoutMs });
  }

  get table(): string {
    return this.tableName.quoted;
  }

  /** Whether the user passed a pool (LISTEN then takes a connection of its own). */
  get onPool(): boolean {
    return isPool(this.client);
  }

  async acquire(key: string, name: string, ttlMs: number): Promise<Acquired> {
    const { rows } = await this.query(this.statements.acquire, [key, name, ttlMs, this.channel(key)]);
    const row = rows[0] as { won?: unknown; token?: unknown; holder?: unknown; remaining_ms?: unknown } | undefined;
    if (row === undefined) return { won: false, holder: undefined };
    if (row.won === true) return { won: true, token: parseToken(row.token, "acquire") };
    // An acquire that began before another took the row reads the version
    // before it from its snapshot: an expired lease, whose holder leads no more.
    if ((typeof row.remaining_ms === "number" || typeof row.remaining_ms === "string") && Number(row.remaining_ms) <= 0) return { won: false, holder: undefined };
    return { won: false, holder: holderOf(row, "acquire") };
  }

  async renew(key: string, token: number, ttlMs: number): Promise<boolean> {
    const { rowCount } = await this.query(this.statements.renew, [key, String(token), ttlMs]);
    return rowCount === 1;
  }

  async release(key: string, token: number): Promise<boolean> {
    const { rows } = await this.query(this.statements.release, [key, String(token)]);
    return rows.length === 1;
  }

  async read(key: string): Promise<LeaseHolder | undefined> {
    const { rows } = await this.query(this.statements.read, [key]);
    const row = rows[0] as { token?: unknown; holder?: unknown; remaining_ms?: unknown } | undefined;
    return row === undefined ? undefined : holderOf(row, "read");
  }

  listen(key: string, listener: LeaseListener, signal?: AbortSignal): Promise<LeaseListening> {
    return this.listener.listen(this.channel(key), key, listener, signal);
  }

  isTableMissing(error: unknown): boolean {
    return (error as { code?: unknown } | null)?.code === UNDEFINED_TABLE;
  }

  /**
   * The channel of an election: a hash of the table (as the members spell
   * it) and the key, so that any key fits a channel name (an identifier, 63
   * bytes at most); the table's trigger computes the same (statements.ts).
   * The payload names the key, so that two keys whose hashes met would
   * still be told apart.
   */
  channel(key: string): string {
    return `etcd_leader_${createHash("sha256").update(`${this.tableName.quoted}\n${key}`).digest("hex").slice(0, 40)}`;
  }
}

/** A notification's payload, told to a listener of `key` if it is about it. */
function readPayload(payload: string | undefined, key: string, listener: LeaseListener): void {
  let notice: { key?: unknown; kind?: unknown; name?: unknown; token?: unknown; ttlMs?: unknown };
  try {
    notice = JSON.parse(payload ?? "") as typeof notice;
  } catch {
    return;
  }
  if (notice.key !== key) return;
  const token = Number(notice.token);
  if (!Number.isSafeInteger(token) || token <= 0) return;
  if (notice.kind === "released") listener.onNotice({ kind: "released", token });
  else if (notice.kind === "acquired" && typeof notice.name === "string" && typeof notice.ttlMs === "number" && notice.ttlMs > 0) {
    listener.onNotice({ kind: "acquired", name: notice.name, token, ttlMs: notice.ttlMs });
  }
}

/** A token as pg gives a bigint (a string), checked. */
function parseToken(value: unknown, statement: string): number {
  const token = typeof value === "string" && /^\d+$/.test(value) ? Number(value) : typeof value === "number" ? value : NaN;
  if (!Number.isSafeInteger(token) || token <= 0) {
    throw new TypeError(`the ${statement} statement answered the token ${JSON.stringify(value)}, not a positive whole number below 2^53`);
  }
  return token;
}

function holderOf(row: { token?: unknown; holder?: unknown; remaining_ms?: unknown }, statement: string): LeaseHolder {
  if (typeof row.holder !== "string") throw new TypeError(`the ${statement} statement answered the holder ${JSON.stringify(row.holder)}, not a name`);
  const remainingMs = typeof row.remaining_ms === "string" ? Number(row.remaining_ms) : row.remaining_ms;
  if (typeof remainingMs !== "number" || !Number.isFinite(remainingMs)) {
    throw new TypeError(`the ${statement} statement answered ${JSON.stringify(row.remaining_ms)} as the lease's time left, not a number`);
  }
  // Measured in the statement that found the lease live: a little is left at least.
  return { name: row.holder, token: parseToken(row.token, statement), remainingMs: Math.max(remainingMs, 1) };
}
