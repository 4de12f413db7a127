// The conformance target for the PostgreSQL backend: a real PostgreSQL 15,
// one table of leases per election, each member on a pool of its own behind
// its own fault proxy, and an operator's view of the table through an admin
// pool straight to the server. The backend is race-style: the table holds
// the leader's row and nothing for a follower.
import pg from "pg";
import type { ElectionBackend } from "../../../src/contract/backend";
import { PostgresBackend } from "../../../src/stores/postgres/recipe";
import { PgAdapter } from "../../../src/stores/postgres/pg/adapter";
import { ensureTable } from "../../../src/stores/postgres/pg/schema";
import { parseTableName } from "../../../src/stores/postgres/table-name";
import { FaultProxy } from "../../kit/fault-proxy";
import { startPostgres, type PostgresServer } from "../../kit/postgres-server";
import type { ConformanceTarget, TargetElection } from "./target";

const KEY = "leader";

export function postgresTarget(): ConformanceTarget {
  let server: PostgresServer | undefined;
  let admin: pg.Pool | undefined;
  let elections = 0;
  /** The cleanups of elections not cleaned up yet (a case that skips itself gets no afterEach). */
  const open = new Set<() => Promise<void>>();
  const started = () => {
    if (!server || !admin) throw new Error("the PostgreSQL target was not started");
    return { server, admin };
  };

  return {
    name: "PostgreSQL",
    async start() {
      server = await startPostgres();
      admin = new pg.Pool({ connectionString: server.url });
    },
    async stop() {
      for (const cleanup of open) await cleanup();
      await admin?.end().catch(() => undefined);
      await server?.close();
      admin = undefined;
      server = undefined;
    },
    async election(label, ttlSeconds) {
      const { server: postgres, admin: operator } = started();
      const table = parseTableName(`conformance_${++elections}_${label.toLowerCase().replace(/[^a-z0-9_]/g, "_")}`.slice(0, 50));
      await ensureTable(operator, table, AbortSignal.timeout(5_000));
      const t = table.quoted;
      const proxies = new Map<string, FaultProxy>();
      const pools: pg.Pool[] = [];
      /** The channel the election's notices go on (the adapter names it). */
      const channel = new PgAdapter(operator, table).channel(KEY);

      const holder = async () => {
        const { rows } = await operator.query<{ holder: string }>(`SELECT holder FROM ${t} WHERE key = $1 AND expires_at > clock_timestamp()`, [KEY]);
        return rows[0]?.holder;
      };
      const proxyOf = (name: string) => {
        const proxy = proxies.get(name);
        if (!proxy) throw new Error(`no member ${name} in this election`);
        return proxy;
      };
      const holding = async (name: string) => {
        const now = await holder();
        if (now !== name) throw new Error(`${name} holds nothing in the table (the holder: ${now})`);
      };

      const election: TargetElection = {
        async backend(name): Promise<ElectionBackend> {
          const proxy = await FaultProxy.start({ upstream: `127.0.0.1:${postgres.port}` });
          proxies.set(name, proxy);
          const [host, port] = proxy.hostPort.split(":");
          const pool = new pg.Pool({ host, port: Number(port), user: "postgres", database: "postgres" });
          // A connection reset by the proxy is reported on an idle client here.
          pool.on("error", () => undefined);
          pools.push(pool);
          return new PostgresBackend(new PgAdapter(pool, table), KEY, name, ttlSeconds * 1_000);
        },
        async members() {
          const now = await holder();
          return now ? [now] : [];
        },
        readLeader: holder,
        async deleteMember(name) {
          await holding(name);
          await operator.query(`DELETE FROM ${t} WHERE key = $1`, [KEY]);
        },
        // A lease that nobody renews is one whose expiry has passed: set it in the past.
        async expireMember(name) {
          await holding(name);
          await operator.query(`UPDATE ${t} SET expires_at = clock_timestamp() - interval '1 millisecond' WHERE key = $1`, [KEY]);
        },
        async cutConnection(name) {
          proxyOf(name).setMode("blackhole");
        },
        async openWatches() {
          // A LISTEN connection's last statement is its LISTEN until it is handed back (after UNLISTEN *).
          const { rows } = await operator.query<{ count: string }>(
            "SELECT count(*) FROM pg_stat_activity WHERE pid <> pg_backend_pid() AND query LIKE $1",
            [`LISTEN %${channel}%`],
          );
          return Number(rows[0]!.count);
        },
        async cleanup() {
          open.delete(election.cleanup);
          await Promise.all([...proxies.values()].map((proxy) => proxy.close()));
          await Promise.all(pools.map((pool) => pool.end().catch(() => undefined)));
          await operator.query(`DROP TABLE IF EXISTS ${t}`);
        },
      };
      open.add(election.cleanup);
      return election;
    },
  };
}
