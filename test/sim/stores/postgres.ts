// A PostgreSQL server in memory, as the PostgreSQL recipe's statements see
// it (src/stores/postgres/pg/statements.ts): one table of leases (a row per
// election: holder, token, expires_at on the server's clock), the bigserial's
// sequence (drawn by every acquire, taken or not, so it only grows), the
// AFTER DELETE trigger's notice on any delete of a row, and LISTEN sessions
// that receive a notice when its statement commits, in commit order, if they
// listened on its channel before then. A server that can be paused
// (SIGSTOP: nothing runs, and leases go on ageing on the wall clock) and
// restarted (every connection dropped with 57P01, connections refused while
// it is down; the table and the sequence kept, as a server with fsync keeps
// them).
//
// The simulation runs the real pg adapter (src/stores/postgres/pg/adapter.ts
// and its shared LISTEN connection, listener.ts) on a simulated pg.Pool:
// each query is one request over the member's link, answered with rows
// shaped as node-postgres 8 gives them (bigints as strings, float8 as
// numbers, rowCount); a LISTEN connection is a client checked out of the
// pool that emits `notification`, `error` and `end` as pg's Client does; and
// failures are shaped as pg rejects them (ECONNREFUSED, "Connection
// terminated unexpectedly", a DatabaseError with its SQLSTATE), so that the
// adapter's parsing and classification run here too. The server knows the
// statements by their exact text (the recipe's, and the variants the
// mutations below send): anything else fails with a syntax error.
//
// Concurrency: each statement runs at once when it reaches the server. The
// one window of PostgreSQL's READ COMMITTED that the recipe sees is kept: an
// acquire that loses to one committed in the same instant reads the holder
// from its snapshot, from before that commit: no row (the key was absent),
// or the previous, expired holder.
//
// The facts it keeps are checked against a real PostgreSQL by the same cases
// (test/stores/postgres/postgres-facts.ts).
import { createHash } from "node:crypto";
import type { ElectionBackend } from "../../../src/contract/backend";
import { PgAdapter } from "../../../src/stores/postgres/pg/adapter";
import type { PgNotification, PgPool, PgPoolClient, PgQueryResult } from "../../../src/stores/postgres/pg/client";
import { statementsFor, type Statements } from "../../../src/stores/postgres/pg/statements";
import { resolvePostgresOptions } from "../../../src/stores/postgres/options";
import { PostgresBackend } from "../../../src/stores/postgres/recipe";
import { parseTableName, type TableName } from "../../../src/stores/postgres/table-name";
import { patch } from "../mutations";
import type { Link } from "../network";
import type { FaultContext, Mutation, SimStore, StoreFactory, StoreFault } from "../store";
import type { Random, Scheduler, SimProcess } from "../world";
import { FrozenWork, serverPausedFault } from "./frozen-work";
import { MembershipLog } from "./membership-log";

/** A lease row as the server holds it. */
interface Row {
  readonly holder: string;
  readonly token: number;
  /** On the server's clock. */
  expiresAt: number;
  /** When the acquire that wrote it ran. */
  readonly takenAt: number;
  /** The version it replaced (an expired lease), as a statement that began before it was taken still sees it. */
  readonly previous: Row | undefined;
}

/** What the server tells the world of a row: taken, renewed, deleted (by its holder or not), or its lease cut short. */
export type RowChange =
  | { readonly kind: "taken"; readonly key: string; readonly row: Row }
  | { readonly kind: "renewed"; readonly key: string; readonly row: Row }
  | { readonly kind: "deleted"; readonly key: string; readonly row: Row; readonly byOperator: boolean }
  | { readonly kind: "cut short"; readonly key: string; readonly row: Row };

/**
 * How long a statement takes on the simulation's server: an acquire that
 * loses to one committed within this much before it ran began before that
 * commit, and reads its answer from the snapshot it began with.
 */
const STATEMENT_MS = 1;

/** A failure as the server reports it: pg rejects with a DatabaseError carrying the SQLSTATE. */
export function databaseError(code: string, message: string, severity = "ERROR"): Error {
  return Object.assign(new Error(message), { name: "error", severity, code });
}

/** The statements a server knows, by their text, for one table. */
type Execute = (values: readonly unknown[]) => PgQueryResult;

/** A LISTEN session at the server: the channels it listens on, and how a notice or its termination reaches its client. */
export class ServerSession {
  readonly channels = new Set<string>();
  closed = false;

  constructor(
    readonly notify: (channel: string, payload: string) => void,
    /** The server ends the connection (a restart, pg_terminate_backend): the client hears of it if the connection still carries. */
    readonly terminate: (error: Error) => void,
  ) {}
}

export interface PostgresServerOptions {
  /** The table of leases; "etcd_leader_elections" by default. */
  table?: TableName;
  /** The server's clock (clock_timestamp()), in ms. */
  now: () => number;
  /** Told of every change of a row, for the membership log. */
  onChange?: (change: RowChange) => void;
  /**
   * How long a statement runs, in ms: an acquire that loses to one that
   * took the row less than this before began before its commit. 0 (the
   * default): statements one after another, as the facts cases send them.
   */
  statementMs?: number;
}

export class PostgresServer {
  /** The bigserial's sequence: the last token drawn. */
  sequence = 0;
  readonly table: TableName;
  private readonly rows = new Map<string, Row>();
  private readonly sessions = new Set<ServerSession>();
  private readonly known = new Map<string, Execute>();
  /** While the server is paused (SIGSTOP), what it is asked to do waits here. */
  private readonly frozen = new FrozenWork();

  constructor(private readonly options: PostgresServerOptions) {
    this.table = options.table ?? parseTableName(undefined);
    const statements = statementsFor(this.table);
    this.known.set(statements.acquire, (values) => this.acquire(values, { checkExpiry: true }));
    this.known.set(statements.renew, (values) => this.renew(values, { conditioned: true }));
    this.known.set(statements.release, (values) => this.release(values));
    this.known.set(statements.read, (values) => this.read(values));
    this.known.set(statements.checkColumns, () => ({ rows: [], rowCount: 0 }));
    this.known.set(acquireWithoutExpiryCheck(statements), (values) => this.acquire(values, { checkExpiry: false }));
    this.known.set(unconditionedRenew(this.table), (values) => this.renew(values, { conditioned: false }));
  }

  /** Runs one statement, as the server does: rows shaped as pg gives them, or a DatabaseError. */
  execute(text: string, values: readonly unknown[] = []): PgQueryResult {
    const run = this.known.get(text);
    if (!run) throw databaseError("42601", `syntax error: the simulated server does not know the statement ${JSON.stringify(text.slice(0, 60))}`);
    return run(values);
  }

  // A LISTEN session's side of the server.

  openSession(session: ServerSession): void {
    this.sessions.add(session);
  }

  /** LISTEN, UNLISTEN "channel" and UNLISTEN *, on the session's connection. */
  executeOn(session: ServerSession, text: string): PgQueryResult {
    if (session.closed) throw databaseError("57P01", "terminating connection due to administrator command", "FATAL");
    const listen = /^(LISTEN|UNLISTEN) "((?:[^"]|"")+)"$/.exec(text);
    if (listen) {
      const channel = listen[2]!.replace(/""/g, '"');
      if (listen[1] === "LISTEN") session.channels.add(channel);
      else session.channels.delete(channel);
    } else if (text === "UNLISTEN *") {
      session.channels.clear();
    } else {
      return this.execute(text);
    }
    return { rows: [], rowCount: null };
  }

  /** The session's connection is gone: it listens no more. */
  closeSession(session: ServerSession): void {
    session.closed = true;
    session.channels.clear();
    this.sessions.delete(session);
  }

  /** Every LISTEN session ends (pg_terminate_backend, or a restart): each client is told, if its connection still carries. */
  terminateSessions(error: Error): void {
    for (const session of [...this.sessions]) {
      this.closeSession(session);
      session.terminate(error);
    }
  }

  /** How many sessions listen on any channel (for tests). */
  get listening(): number {
    return [...this.sessions].filter((session) => session.channels.size > 0).length;
  }

  // What an operator does from outside, in SQL.

  /** DELETE FROM <table> WHERE key = $1: the trigger notifies it as a release. */
  deleteRow(key: string): void {
    const row = this.rows.get(key);
    if (row) this.remove(key, row, true);
  }

  /** UPDATE <table> SET expires_at = clock_timestamp() - 1 s WHERE key = $1: the lease cut short, notifying nobody. */
  expireRow(key: string): void {
    const row = this.rows.get(key);
    if (!row) return;
    row.expiresAt = this.now() - 1_000;
    this.options.onChange?.({ kind: "cut short", key, row });
  }

  /** The row as it is, expired or not. */
  row(key: string): { holder: string; token: number; expiresAt: number } | undefined {
    const row = this.rows.get(key);
    return row && { holder: row.holder, token: row.token, expiresAt: row.expiresAt };
  }

  // Pauses.

  /** The server freezes (SIGSTOP): no statement runs until resume(); the wall clock goes on. */
  pause(): void {
    this.frozen.freeze();
  }

  resume(): void {
    this.frozen.thaw();
  }

  get paused(): boolean {
    return this.frozen.frozen;
  }

  /** Runs `operation` now, or once the server resumes if it is paused (the answer is then a promise settled with it). */
  serve<T>(operation: () => T): T | Promise<T> {
    return this.frozen.serve(operation);
  }

  /** The channel an election's notices go on, as the trigger computes it (and the adapter, in JavaScript). */
  channelOf(key: string): string {
    return `etcd_leader_${createHash("sha256").update(`${this.table.quoted}\n${key}`).digest("hex").slice(0, 40)}`;
  }

  // The statements.

  private now(): number {
    return this.options.now();
  }

  /** $1 key, $2 name, $3 ttl ms, $4 channel. */
  private acquire(values: readonly unknown[], { checkExpiry }: { checkExpiry: boolean }): PgQueryResult {
    const key = text(values[0]);
    const name = text(values[1]);
    const ttlMs = number(values[2]);
    const channel = text(values[3]);
    const now = this.now();
    // The bigserial's default is drawn for the row proposed, before the conflict is seen: a lost acquire draws one too.
    const token = ++this.sequence;
    const held = this.rows.get(key);
    if (!held || !checkExpiry || held.expiresAt <= now) {
      const row: Row = { holder: name, token, expiresAt: now + ttlMs, takenAt: now, previous: held };
      this.rows.set(key, row);
      this.options.onChange?.({ kind: "taken", key, row });
      this.notify(channel, { key, kind: "acquired", name, token: String(token), ttlMs });
      return { rows: [{ won: true, token: String(token), holder: null, remaining_ms: null }], rowCount: 1 };
    }
    // Taken by a statement that committed after this one began: its snapshot holds the version before.
    const seen = now - held.takenAt < (this.options.statementMs ?? 0) ? held.previous : held;
    if (!seen) return { rows: [], rowCount: 0 };
    return { rows: [{ won: false, token: String(seen.token), holder: seen.holder, remaining_ms: seen.expiresAt - now }], rowCount: 1 };
  }

  /** $1 key, $2 token (text, cast to bigint), $3 ttl ms. */
  private renew(values: readonly unknown[], { conditioned }: { conditioned: boolean }): PgQueryResult {
    const key = text(values[0]);
    const token = bigint(values[1]);
    const ttlMs = number(values[2]);
    const now = this.now();
    const row = this.rows.get(key);
    if (!row || (conditioned && (row.token !== token || row.expiresAt <= now))) return { rows: [], rowCount: 0 };
    row.expiresAt = now + ttlMs;
    this.options.onChange?.({ kind: "renewed", key, row });
    return { rows: [], rowCount: 1 };
  }

  /** $1 key, $2 token: the row deleted (and, by the trigger, its release notified) if it holds the token. */
  private release(values: readonly unknown[]): PgQueryResult {
    const key = text(values[0]);
    const token = bigint(values[1]);
    const row = this.rows.get(key);
    if (!row || row.token !== token) return { rows: [], rowCount: 0 };
    this.remove(key, row, false);
    return { rows: [{ token: String(token) }], rowCount: 1 };
  }

  /** $1 key: the live lease. */
  private read(values: readonly unknown[]): PgQueryResult {
    const key = text(values[0]);
    const now = this.now();
    const row = this.rows.get(key);
    if (!row || row.expiresAt <= now) return { rows: [], rowCount: 0 };
    return { rows: [{ holder: row.holder, token: String(row.token), remaining_ms: row.expiresAt - now }], rowCount: 1 };
  }

  /** A delete, and the trigger's notice in the same transaction. */
  private remove(key: string, row: Row, byOperator: boolean): void {
    this.rows.delete(key);
    this.options.onChange?.({ kind: "deleted", key, row, byOperator });
    this.notify(this.channelOf(key), { key, kind: "released", token: String(row.token) });
  }

  /** pg_notify at commit: to every session that listens on the channel now, in commit order. */
  private notify(channel: string, payload: object): void {
    const message = JSON.stringify(payload);
    for (const session of this.sessions) if (session.channels.has(channel)) session.notify(channel, message);
  }
}

function text(value: unknown): string {
  if (typeof value !== "string") throw databaseError("22P02", `invalid input syntax for type text: ${JSON.stringify(value)}`);
  return value;
}

function number(value: unknown): number {
  const n = typeof value === "string" ? Number(value) : value;
  if (typeof n !== "number" || !Number.isFinite(n)) throw databaseError("22P02", `invalid input syntax for type double precision: ${JSON.stringify(value)}`);
  return n;
}

/** A parameter cast with ::bigint: pg sends the token as text. */
function bigint(value: unknown): number {
  if (typeof value !== "string" || !/^-?\d+$/.test(value)) throw databaseError("22P02", `invalid input syntax for type bigint: ${JSON.stringify(value)}`);
  return Number(value);
}

// The client side: a pg.Pool over a connection to the server.

/**
 * What a member's connections to the server ride on: requests (applied at the
 * server, answered back), what the server pushes (notifications, a
 * termination), and the connection breaking. The simulation's link, or,
 * for the facts cases, nothing at all.
 */
export interface Carrier {
  request<T>(apply: () => T | Promise<T>): Promise<T>;
  push(deliver: () => void): void;
  onBroken(listener: (error: Error) => void): () => void;
}

/** The server itself, with no network between: a request is applied at once and answered a microtask later, as on a connection. */
export function directCarrier(): Carrier {
  return {
    request: async (apply) => apply(),
    push: (deliver) => queueMicrotask(deliver),
    onBroken: () => () => undefined,
  };
}

/** A connection failure as pg reports it. */
function pgFailure(err: unknown, serverDown: () => boolean): unknown {
  if ((err as { name?: unknown } | null)?.name !== "ConnectionError") return err;
  const message = (err as Error).message;
  if (message === "connection refused") {
    return Object.assign(new Error("connect ECONNREFUSED 127.0.0.1:5432"), { code: "ECONNREFUSED", errno: -111, syscall: "connect" });
  }
  if (message === "connection reset" && serverDown()) return databaseError("57P01", "terminating connection due to administrator command", "FATAL");
  if (message === "keepalive timed out") return Object.assign(new Error("read ETIMEDOUT"), { code: "ETIMEDOUT", errno: -110, syscall: "read" });
  return new Error("Connection terminated unexpectedly");
}

type Listener = (...args: never[]) => void;

/**
 * A connection checked out of the pool (pool.connect()), as the adapter's
 * LISTEN connection uses it: its queries, and `notification`, `error` and
 * `end` as pg's Client emits them. When its connection breaks, its pending
 * queries fail and it emits `error`, then `end`.
 */
class SimPoolClient implements PgPoolClient {
  private readonly listeners = { notification: new Set<Listener>(), error: new Set<Listener>(), end: new Set<Listener>() };
  private readonly pending = new Set<(error: Error) => void>();
  private ended = false;
  private readonly stopWatching: () => void;

  constructor(
    private readonly server: PostgresServer,
    readonly session: ServerSession,
    private readonly carrier: Carrier,
    private readonly failure: (err: unknown) => unknown,
  ) {
    this.stopWatching = carrier.onBroken((error) => this.end(this.failure(error) as Error));
  }

  query(text: string): Promise<PgQueryResult> {
    if (this.ended) return Promise.reject(new Error("Client was closed and is not queryable"));
    return new Promise((resolve, reject) => {
      const fail = (error: Error) => reject(error);
      this.pending.add(fail);
      this.carrier
        .request(() => this.server.serve(() => this.server.executeOn(this.session, text)))
        .then(
          (result) => {
            if (this.pending.delete(fail)) resolve(result);
          },
          (err: unknown) => {
            if (this.pending.delete(fail)) reject(this.failure(err));
          },
        );
    });
  }

  on(event: "notification" | "error" | "end", listener: Listener): this {
    this.listeners[event].add(listener);
    return this;
  }

  removeListener(event: "notification" | "error" | "end", listener: Listener): this {
    this.listeners[event].delete(listener);
    return this;
  }

  /** Handed back to the pool: with an error it is closed; without, it is closed too (the pool here keeps no idle LISTEN connection). */
  release(): void {
    this.close();
  }

  /** A notification pushed by the server over the connection. */
  notified(message: PgNotification): void {
    if (this.ended) return;
    for (const listener of [...this.listeners.notification]) (listener as (m: PgNotification) => void)(message);
  }

  /** The connection is lost: pending queries fail, `error` then `end` are emitted. */
  end(error: Error): void {
    if (this.ended) return;
    this.close();
    for (const fail of [...this.pending]) fail(error);
    this.pending.clear();
    for (const listener of [...this.listeners.error]) (listener as (e: Error) => void)(error);
    for (const listener of [...this.listeners.end]) (listener as () => void)();
  }

  private close(): void {
    this.ended = true;
    this.stopWatching();
    this.server.closeSession(this.session);
  }
}

/** A pg.Pool of one member: each query a request over its carrier, each connect() a LISTEN connection of its own. */
export class SimPgPool implements PgPool {
  totalCount = 0;
  idleCount = 0;

  constructor(
    private readonly server: PostgresServer,
    private readonly carrier: Carrier,
    /** Whether the server is down (a restart): a broken connection then reports 57P01. */
    private readonly serverDown: () => boolean = () => false,
  ) {}

  query(text: string, values?: unknown[]): Promise<PgQueryResult> {
    return this.carrier.request(() => this.server.serve(() => this.server.execute(text, values))).catch((err: unknown) => {
      throw this.failure(err);
    });
  }

  async connect(): Promise<PgPoolClient> {
    let client: SimPoolClient | undefined;
    const session = new ServerSession(
      (channel, payload) => this.carrier.push(() => client?.notified({ channel, payload })),
      (error) => this.carrier.push(() => client?.end(error)),
    );
    try {
      // The connection's start-up: a round trip; the server has the session from then on.
      await this.carrier.request(() => this.server.serve(() => this.server.openSession(session)));
    } catch (err) {
      // Opened at the server, but the client never heard: the server finds the connection gone.
      this.server.closeSession(session);
      throw this.failure(err);
    }
    client = new SimPoolClient(this.server, session, this.carrier, (err) => this.failure(err));
    return client;
  }

  private failure(err: unknown): unknown {
    return pgFailure(err, this.serverDown);
  }
}

/** A member's link as the carrier of its connections, its answers run by its process. */
function linkCarrier(link: Link, process: SimProcess): Carrier {
  return {
    request: <T>(apply: () => T | Promise<T>) =>
      link.request(() => {
        const answer = apply();
        // By the time a paused server answers, the request may have been given up.
        if (answer instanceof Promise) answer.catch(() => undefined);
        return answer;
      }) as Promise<T>,
    push: (deliver) => link.push(deliver),
    onBroken: (listener) => link.onBroken((error) => process.run(() => listener(error))),
  };
}

// The mutations' statements: variants of the recipe's, which the server knows too.

/** The acquire without its condition that the lease has expired: it takes a live lease too. */
function acquireWithoutExpiryCheck(statements: Statements): string {
  return statements.acquire.replace("  WHERE lease.expires_at <= clock_timestamp()\n", "");
}

/** A renewal conditioned on nothing but the key: not on the token, nor on the lease being live. */
function unconditionedRenew(table: TableName): string {
  return `UPDATE ${table.quoted} SET expires_at = clock_timestamp() + make_interval(secs => $3::float8 / 1000) WHERE key = $1 AND $2::bigint IS NOT NULL`;
}

/** The adapter's insides a mutation sends its statement through. */
interface AdapterInside {
  readonly client: PgPool;
  readonly tableName: TableName;
  readonly statements: Statements;
}

const postgresMutations: readonly Mutation[] = [
  {
    name: "renew-any-holder",
    description: "a renewal extends the row's lease whoever holds it and whether or not it has expired (not conditioned on the token, nor on the lease being live)",
    patch: () =>
      patch(PgAdapter.prototype, "renew", () =>
        async function (this: PgAdapter, key: string, token: number, ttlMs: number) {
          const inside = this as unknown as AdapterInside;
          const { rowCount } = await inside.client.query(unconditionedRenew(inside.tableName), [key, String(token), ttlMs]);
          return rowCount === 1;
        },
      ),
  },
  {
    name: "take-over-live-lease",
    description: "an acquire takes the row without checking that its lease has expired",
    patch: () =>
      patch(PgAdapter.prototype, "acquire", (original) =>
        async function (this: PgAdapter, key: string, name: string, ttlMs: number) {
          const inside = this as unknown as { statements: Statements };
          const own = inside.statements;
          inside.statements = { ...own, acquire: acquireWithoutExpiryCheck(own) };
          try {
            return await original.call(this, key, name, ttlMs);
          } finally {
            inside.statements = own;
          }
        },
      ),
  },
];

/** The election every simulated run holds. */
const KEY = "sim-leader";
const TTL_MS = 2_000;

/** A simulated PostgreSQL with one table and one election, for the simulation's runs. */
export const simPostgres: StoreFactory = (scheduler: Scheduler, _random: Random): SimStore => {
  const log = new MembershipLog(scheduler);
  let down = false;
  /** The row the membership log holds as live, and the event that ends it at its expiry. */
  let live: { row: Row; expiry: ReturnType<Scheduler["at"]> } | undefined;
  const forget = () => {
    if (!live) return;
    scheduler.cancel(live.expiry);
    live = undefined;
    log.released(KEY);
  };
  /** The row counts as held until its expires_at: the next statement would find it expired. */
  const holdUntilExpiry = (row: Row) => {
    if (live) scheduler.cancel(live.expiry);
    live = { row, expiry: scheduler.at(row.expiresAt, () => live?.row === row && row.expiresAt <= scheduler.now && forget()) };
  };
  const server = new PostgresServer({
    now: () => scheduler.now,
    statementMs: STATEMENT_MS,
    onChange: (change) => {
      if (change.key !== KEY) return;
      if (change.kind === "taken") {
        forget();
        log.held(KEY, change.row.holder);
        holdUntilExpiry(change.row);
      } else if (change.kind === "renewed") {
        // Only a renewal not conditioned on the lease being live (a mutation's) brings an expired row back.
        if (live?.row !== change.row) {
          forget();
          log.held(KEY, change.row.holder);
        }
        holdUntilExpiry(change.row);
      } else if (live?.row === change.row) {
        if (change.kind === "cut short" || change.byOperator) log.deletedFromOutside(KEY);
        forget();
      }
    },
  });
  const links = new Set<Link>();
  const options = resolvePostgresOptions({ ttl: TTL_MS / 1000 }).timing;
  const fromOutside = (context: FaultContext, what: string, act: () => void) => {
    const row = server.row(KEY);
    context.note(`${what}${row ? `, held by ${row.holder} (token ${row.token}${row.expiresAt <= scheduler.now ? ", expired" : ""})` : " (no row)"}`);
    act();
  };
  const faults: StoreFault[] = [
    {
      kind: "row deleted",
      weight: 1,
      apply: (context) => fromOutside(context, "DELETE of the election's row", () => server.deleteRow(KEY)),
    },
    {
      kind: "lease cut short",
      weight: 0.5,
      apply: (context) => fromOutside(context, "UPDATE of the row's expires_at to a second ago", () => server.expireRow(KEY)),
    },
    serverPausedFault(server, "postgres", TTL_MS),
  ];
  return {
    kind: "postgres",
    // A pool: a connection per query, each of which can go silent on its own.
    transport: "requests",
    options,
    faults,
    mutations: postgresMutations,
    holdsAtMostMs: TTL_MS,
    followersHold: false,
    backend(name: string, process: SimProcess, link: Link, memberRandom: Random): ElectionBackend {
      links.add(link);
      const pool = new SimPgPool(server, linkCarrier(link, process), () => down);
      return new PostgresBackend(new PgAdapter(pool, server.table), KEY, name, TTL_MS, { listen: true }, process.turns, process, memberRandom.source);
    },
    restart(downMs: number) {
      // A fast shutdown: every session is terminated (57P01), then the connections close; the table and sequence are on disk.
      down = true;
      server.terminateSessions(databaseError("57P01", "terminating connection due to administrator command", "FATAL"));
      for (const link of links) link.reset();
      scheduler.at(scheduler.now + downMs, () => {
        down = false;
        for (const link of links) link.restore();
      });
    },
    deleteMembershipOf(name: string) {
      if (server.row(KEY)?.holder === name) server.deleteRow(KEY);
    },
    holders: () => log.holders(),
    heldDuring: (name, from, to) => log.heldDuring(name, from, to),
    deletedFromOutsideAt: (name) => log.deletedFromOutsideAt(name),
  };
};

export const POSTGRES_ELECTION = { key: KEY, ttlMs: TTL_MS };
