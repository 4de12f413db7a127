// The `etcd-leader/postgres` entry end to end, on a real PostgreSQL 15: the
// table made on first use, once, by members made together (or the statements
// shown to a user who may not),
// members that hand over with growing tokens, the fenced write of
// docs/postgres.md refused once a successor took over, a member without
// LISTEN, and the checks of what a caller passes.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import pg from "pg";
import { postgresLeader } from "../../../src/postgres";
import type { Election } from "../../../src/election/election";
import { startPostgres, type PostgresServer } from "../../kit/postgres-server";
import { exitOrFail, waitFor } from "../../kit/waiting";

let server: PostgresServer;
let admin: pg.Pool;
const pools: pg.Pool[] = [];
const elections: Election[] = [];

before(async () => {
  server = await startPostgres();
  admin = pool();
});

after(async () => {
  for (const election of elections) await election.leave().catch(() => undefined);
  await Promise.all(pools.map((p) => p.end().catch(() => undefined)));
  await server?.close();
  exitOrFail();
});

function pool(config: pg.PoolConfig = {}): pg.Pool {
  const made = new pg.Pool({ connectionString: server.url, ...config });
  made.on("error", () => undefined);
  pools.push(made);
  return made;
}

async function member(key: string, name: string, options: Parameters<typeof postgresLeader>[3] = {}): Promise<Election> {
  const election = await postgresLeader(pool(), key, name, { ttl: 1, ...options });
  elections.push(election);
  election.on("error", () => undefined);
  return election.start();
}

describe("etcd-leader/postgres", () => {
  test("members made together on a database without the table all come up, and the table is made once", async () => {
    // Each on a pool of its own, as in processes of their own: the table's
    // making races (concurrent CREATE OR REPLACE FUNCTION fails one of two
    // with "tuple concurrently updated" unless the makers take turns).
    const made = await Promise.all(
      Array.from({ length: 8 }, (_, i) => postgresLeader(pool(), "made-together", `m${i}`, { ttl: 1, table: "made_together" })),
    );
    assert.equal(made.length, 8);
    const { rows } = await admin.query("SELECT count(*)::int AS triggers FROM pg_trigger WHERE tgrelid = 'made_together'::regclass AND NOT tgisinternal");
    assert.deepEqual(rows, [{ triggers: 1 }]);
  });

  test("makes its table on first use; members hand over with growing tokens, and a fenced write under the old token is refused after the successor took over", async () => {
    const a = await member("fenced", "a");
    await waitFor("a to lead", 5_000, () => a.isLeader());
    const { rows } = await admin.query("SELECT holder, token FROM etcd_leader_elections WHERE key = 'fenced'");
    assert.deepEqual(rows, [{ holder: "a", token: String(a.fencingToken()) }]);
    const b = await member("fenced", "b");
    await waitFor("b to follow a", 5_000, () => b.currentLeader() === "a");

    await admin.query("CREATE TABLE ledger (id int PRIMARY KEY, written_by text)");
    await admin.query("INSERT INTO ledger VALUES (1, 'nobody')");
    // The fenced write of docs/postgres.md: applied only while the row holds the token.
    const fencedWrite = async (name: string, token: number) => {
      const client = await admin.connect();
      try {
        await client.query("BEGIN");
        const { rowCount } = await client.query(
          `UPDATE ledger SET written_by = $3 WHERE id = 1 AND EXISTS (
             SELECT 1 FROM etcd_leader_elections WHERE key = $1 AND token = $2 AND expires_at > clock_timestamp() FOR SHARE)`,
          ["fenced", token, name],
        );
        await client.query("COMMIT");
        return rowCount === 1;
      } finally {
        client.release();
      }
    };
    const aToken = a.fencingToken()!;
    assert.equal(await fencedWrite("a", aToken), true);
    const started = performance.now();
    await a.leave();
    await waitFor("b to lead", 2_000, () => b.isLeader());
    assert.ok(performance.now() - started < 500, "a clean leave hands over at once (LISTEN)");
    assert.ok(b.fencingToken()! > aToken);
    assert.equal(await fencedWrite("a", aToken), false, "the old token writes nothing");
    assert.equal(await fencedWrite("b", b.fencingToken()!), true);
    assert.deepEqual((await admin.query("SELECT written_by FROM ledger")).rows, [{ written_by: "b" }]);
    assert.deepEqual(await postgresLeader.whoLeads(admin, "fenced"), { name: "b", token: b.fencingToken() });
    assert.deepEqual(await postgresLeader.candidates(admin, "fenced"), { scope: "leader", members: [{ name: "b", token: b.fencingToken() }] });
    await b.leave();
  });

  test("without LISTEN a clean stop hands over at the lease's expiry, within a TTL", async () => {
    const a = await member("quiet", "a", { listen: false, table: "quiet_leases" });
    await waitFor("a to lead", 5_000, () => a.isLeader());
    const b = await member("quiet", "b", { listen: false, table: "quiet_leases" });
    await waitFor("b to follow a", 5_000, () => b.currentLeader() === "a");
    const started = performance.now();
    await a.leave();
    await waitFor("b to lead", 3_000, () => b.isLeader());
    const took = performance.now() - started;
    assert.ok(took <= 1_000 + 300, `handed over in ${Math.round(took)} ms, at most a TTL (1 s) and a little`);
    await b.leave();
  });

  test("a user who may not create the table is told the statements to run, and may run once they have been", async () => {
    await admin.query("CREATE ROLE limited LOGIN");
    await admin.query("REVOKE CREATE ON SCHEMA public FROM PUBLIC");
    const limited = pool({ user: "limited", connectionString: server.url.replace("postgres@", "limited@") });
    await assert.rejects(postgresLeader(limited, "k", "a", { table: "locked_leases" }), (err: Error) => {
      assert.match(err.message, /may not create it/);
      assert.match(err.message, /CREATE TABLE IF NOT EXISTS "locked_leases"/);
      assert.match(err.message, /GRANT USAGE ON SEQUENCE "locked_leases_token_seq"/);
      return true;
    });
    const shown = (await postgresLeader(limited, "k", "a", { table: "locked_leases" }).catch((err: Error) => err)) as Error;
    const statements = shown.message.split("\n\n")[1]!.replace(/<this user>/g, "limited");
    await admin.query(statements);
    const election = await postgresLeader(limited, "k", "a", { table: "locked_leases", ttl: 1 });
    elections.push(election);
    election.start();
    await waitFor("the limited user to lead", 5_000, () => election.isLeader());
    await election.leave();
  });

  test("refuses what is no pool, a bad key, name, table or option, naming it", async () => {
    const p = admin;
    // A pg.Client is taken as it is, as a pg.Pool is (checked by the compiler).
    void ((client: pg.Client) => postgresLeader(client, "k", "a"));
    await assert.rejects(postgresLeader("postgres://x" as never, "k", "a"), /not a pg.Pool or pg.Client \(got a string/);
    await assert.rejects(postgresLeader(p, "", "a"), /key must be a non-empty string/);
    await assert.rejects(postgresLeader(p, "k", "  "), /name must be a non-empty string/);
    await assert.rejects(postgresLeader(p, "k\0", "a"), /NUL character/);
    await assert.rejects(postgresLeader(p, "k", "a", { table: "Elections" }), /table "Elections" is not a table name/);
    await assert.rejects(postgresLeader(p, "k", "a", { table: 'x"; DROP TABLE y; --' }), /is not a table name/);
    await assert.rejects(postgresLeader(p, "k", "a", { table: "a.b.c" }), /more than one dot/);
    await assert.rejects(postgresLeader(p, "k", "a", { listen: "no" as never }), /listen must be true or false, got "no"/);
    await assert.rejects(postgresLeader(p, "k", "a", { ttl: 0 }), /ttl must be a positive whole number/);
    await assert.rejects(postgresLeader(p, "k", "a", { refreshIntervall: 1 } as never), /unknown option "refreshIntervall"/);
    await assert.rejects(postgresLeader.whoLeads(p, "k", { requestTimeout: -1 }), /requestTimeout must be a positive number/);
    assert.throws(() => postgresLeader.observe({} as never, "k"), /not a pg.Pool or pg.Client/);
    assert.equal(await postgresLeader.whoLeads(p, "k", { table: "never_made" }), undefined, "no table yet: nobody leads");
  });
});
