// What the user hands the PostgreSQL entry: a pg.Pool (preferred) or a
// connected pg.Client of node-postgres 8, and the checks made on it before
// anything is sent. This package never loads pg itself: the user's pool
// brings it along. The recipe never sees the pool: adapter.ts turns it into
// the port.

/** A query's answer, as pg gives it. */
export interface PgQueryResult {
  readonly rows: unknown[];
  readonly rowCount: number | null;
}

/**
 * A query as pg takes it in one object: `query_timeout` makes pg give up on
 * it (and a pool then closes the connection it ran on, instead of handing
 * it out again).
 */
export interface PgQueryConfig {
  readonly text: string;
  readonly values?: unknown[];
  readonly query_timeout?: number;
}

/** A notification, as pg's `notification` event gives it. */
export interface PgNotification {
  readonly channel: string;
  readonly payload?: string | undefined;
}

/** One connection: a pg.Client, or a client checked out of a pool. */
export interface PgConnection {
  query(text: string | PgQueryConfig, values?: unknown[]): Promise<PgQueryResult>;
  on(event: "notification", listener: (message: PgNotification) => void): unknown;
  on(event: "error", listener: (err: Error) => void): unknown;
  on(event: "end", listener: () => void): unknown;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- pg's own type: listeners of any event
  removeListener(event: "notification" | "error" | "end", listener: (...args: any[]) => void): unknown;
}

/** A connection checked out of a pool: `release()` hands it back, `release(error)` closes it. */
export interface PgPoolClient extends PgConnection {
  release(destroy?: Error | boolean): void;
}

/** The part of a pg.Pool this package uses. */
export interface PgPool {
  query(text: string | PgQueryConfig, values?: unknown[]): Promise<PgQueryResult>;
  connect(): Promise<PgPoolClient>;
  readonly totalCount: number;
  readonly idleCount: number;
}

/** What `etcd-leader/postgres` takes: a pg.Pool, or a connected pg.Client. */
export type PostgresClient = PgPool | PgConnection;

/** A pool, told apart from a client by the counts a pg.Pool keeps of its clients. */
export function isPool(client: PostgresClient): client is PgPool {
  const pool = client as Partial<PgPool>;
  return typeof pool.connect === "function" && typeof pool.totalCount === "number" && typeof pool.idleCount === "number";
}

/**
 * Throws a TypeError unless `client` looks like a pg.Pool or a pg.Client. A
 * connection string, a config object or the pg module itself is a common
 * mistake: say what to pass.
 */
export function checkClient(client: unknown): asserts client is PostgresClient {
  const candidate = client as Record<string, unknown> | null;
  const has = (method: string) => typeof candidate?.[method] === "function";
  if (has("query") && (isPool(client as PostgresClient) || (has("on") && has("removeListener")))) return;
  const got =
    typeof client === "string"
      ? "a string (a connection string?)"
      : client === null
        ? "null"
        : typeof client === "object" && has("Pool")
          ? "the pg module itself"
          : typeof client === "object"
            ? `an object without ${["query", "on", "removeListener"].filter((method) => !has(method)).join(", ")}`
            : typeof client;
  throw new TypeError(
    `not a pg.Pool or pg.Client (got ${got}): pass a pool, \`new pg.Pool({ connectionString })\` from node-postgres, ` +
      "or a connected pg.Client",
  );
}
