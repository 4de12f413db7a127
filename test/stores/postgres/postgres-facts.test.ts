// The facts of PostgreSQL that the PostgreSQL recipe relies on
// (postgres-facts.ts), held by a real PostgreSQL 15 through the pg adapter of
// the port, and by the simulated table the simulation runs on
// (test/sim/stores/postgres.ts): one set of cases, two targets.
//
// Then the facts only a real server can show, each saying why it cannot run
// on the simulated table: transactions (a notification goes out with a
// commit, never with a rollback), the server's error codes, and what pg
// gives for a bigint.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import pg from "pg";
import { PgAdapter } from "../../../src/stores/postgres/pg/adapter";
import { parseTableName } from "../../../src/stores/postgres/table-name";
import { ensureTable } from "../../../src/stores/postgres/pg/schema";
import { startPostgres, type PostgresServer } from "../../kit/postgres-server";
import { databaseError, directCarrier, PostgresServer as SimulatedServer, SimPgPool } from "../../sim/stores/postgres";
import { Scheduler } from "../../sim/world";
import { exitOrFail, sleep, waitFor } from "../../kit/waiting";
import { POSTGRES_FACTS, type TableMaker } from "./postgres-facts";

let server: PostgresServer;
let admin: pg.Pool;
const pools: pg.Pool[] = [];
let tables = 0;

before(async () => {
  server = await startPostgres();
  admin = new pg.Pool({ connectionString: server.url });
});

after(async () => {
  await Promise.all(pools.map((pool) => pool.end().catch(() => undefined)));
  await admin?.end().catch(() => undefined);
  await server?.close();
  exitOrFail();
});

/** A pool as a user makes one; a LISTEN connection that is terminated reports an error on it, which the adapter handles. */
function userPool(): pg.Pool {
  const pool = new pg.Pool({ connectionString: server.url, max: 4 });
  // An idle client whose connection is terminated reports it here.
  pool.on("error", () => undefined);
  pools.push(pool);
  return pool;
}

/** A fresh table on the shared server, made as postgresLeader makes it; each member's port on a pool of its own. */
const onRealServer: TableMaker = async () => {
  const table = parseTableName(`facts_${++tables}`);
  await ensureTable(admin, table, AbortSignal.timeout(5_000));
  const t = table.quoted;
  return {
    port: new PgAdapter(userPool(), table),
    other: new PgAdapter(userPool(), table),
    operator: {
      deleteRow: async (key) => void (await admin.query(`DELETE FROM ${t} WHERE key = $1`, [key])),
      expireRow: async (key) => void (await admin.query(`UPDATE ${t} SET expires_at = clock_timestamp() - interval '1 second' WHERE key = $1`, [key])),
      row: async (key) => {
        const { rows } = await admin.query<{ holder: string; token: string }>(`SELECT holder, token FROM ${t} WHERE key = $1`, [key]);
        return rows[0] && { holder: rows[0].holder, token: Number(rows[0].token) };
      },
      dropListeners: async () => {
        await admin.query(
          "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE pid <> pg_backend_pid() AND datname = current_database() AND query ILIKE 'LISTEN%'",
        );
      },
      elapse: sleep,
      now: () => performance.now(),
    },
  };
};

describe("PostgreSQL facts, on a real PostgreSQL 15, through the pg adapter", () => {
  for (const fact of POSTGRES_FACTS) test(fact.title, () => fact.run(onRealServer));
});

/**
 * A simulated server in a world of its own, in virtual time, and the same
 * adapter on a simulated pool of its own for each member: the pool, the
 * LISTEN connection and the answers' shapes are the simulation's, the rest
 * is the code a user runs.
 */
const onSimulatedServer: TableMaker = async () => {
  const scheduler = new Scheduler();
  const server = new SimulatedServer({ now: () => scheduler.now });
  const pool = () => new SimPgPool(server, directCarrier());
  return {
    port: new PgAdapter(pool(), server.table),
    other: new PgAdapter(pool(), server.table),
    operator: {
      deleteRow: async (key) => server.deleteRow(key),
      expireRow: async (key) => server.expireRow(key),
      row: async (key) => {
        const row = server.row(key);
        return row && { holder: row.holder, token: row.token };
      },
      dropListeners: async () => server.terminateSessions(databaseError("57P01", "terminating connection due to administrator command", "FATAL")),
      elapse: (ms) => scheduler.runUntil(scheduler.now + ms),
      now: () => scheduler.now,
    },
  };
};

describe("PostgreSQL facts, on the simulated server", () => {
  for (const fact of POSTGRES_FACTS) test(fact.title, () => fact.run(onSimulatedServer));
});

describe("PostgreSQL facts only a real server can show (transactions, its error codes, pg's bigints)", () => {
  test("a notification goes out when its transaction commits, and never when it rolls back (the simulated table has no transactions)", async () => {
    const table = parseTableName(`facts_${++tables}`);
    await ensureTable(admin, table, AbortSignal.timeout(5_000));
    const adapter = new PgAdapter(userPool(), table);
    const channel = adapter.channel("leader");
    const heard: string[] = [];
    const listening = await adapter.listen("leader", {
      onNotice: (notice) => heard.push(notice.kind === "acquired" ? notice.name : "released"),
      onEnd: () => undefined,
    });
    const client = await admin.connect();
    try {
      const notify = (name: string) =>
        client.query("SELECT pg_notify($1, json_build_object('key', 'leader', 'kind', 'acquired', 'name', $2::text, 'token', '1', 'ttlMs', 1000)::text)", [
          channel,
          name,
        ]);
      await client.query("BEGIN");
      await notify("rolled-back");
      await client.query("ROLLBACK");
      await client.query("BEGIN");
      await notify("committed");
      await sleep(100);
      assert.deepEqual(heard, [], "nothing before the commit");
      await client.query("COMMIT");
      await waitFor("the committed notice", 2_000, () => heard.length > 0);
      await sleep(50);
      assert.deepEqual(heard, ["committed"]);
    } finally {
      client.release();
      listening.stop();
    }
  });

  test("a table that does not exist fails acquire, renew and read with 42P01, which the adapter calls missing; a LISTEN needs no table", async () => {
    const adapter = new PgAdapter(userPool(), parseTableName("no_such_table"));
    for (const request of [() => adapter.acquire("leader", "a", 1_000), () => adapter.renew("leader", 1, 1_000), () => adapter.read("leader")]) {
      const err = await request().then(
        () => assert.fail("should have failed"),
        (error: unknown) => error,
      );
      assert.equal((err as { code?: string }).code, "42P01");
      assert.ok(adapter.isTableMissing(err));
    }
    const listening = await adapter.listen("leader", { onNotice: () => undefined, onEnd: () => undefined });
    listening.stop();
  });

  test("a token comes back from pg as a string (bigint), and one past 2^53 is refused rather than rounded", async () => {
    const table = parseTableName(`facts_${++tables}`);
    await ensureTable(admin, table, AbortSignal.timeout(5_000));
    const { rows } = await admin.query<{ token: unknown }>(`INSERT INTO ${table.quoted} (key, holder, expires_at) VALUES ('probe', 'x', now()) RETURNING token`);
    assert.equal(typeof rows[0]!.token, "string");
    await admin.query(`SELECT setval(pg_get_serial_sequence($1, 'token'), $2::bigint)`, [table.text, String(2 ** 53)]);
    const adapter = new PgAdapter(userPool(), table);
    await assert.rejects(adapter.acquire("leader", "a", 1_000), /not a positive whole number below 2\^53/);
  });
});
