// PostgreSQL and Redis idle load: N members of one election in one process,
// each on its own client, settled; over a window, what the server itself
// saw, per second, for the whole election:
//   Redis       the commands clients sent, as MONITOR reports them to a
//               connection of the measurement's own (which sends nothing
//               while it monitors). Not INFO commandstats nor
//               total_commands_processed: both count every command a Lua
//               script runs too, so one script call would count as several;
//   PostgreSQL  the statements clients sent, as pg_stat_statements counts
//               them (loaded by bench/store-servers.ts), the measurement's
//               own left out. Not pg_stat_database's transactions: each
//               backend flushes those to the shared counters at most once a
//               second (and an idle one after ten), so a window of a few
//               seconds saw a leader's two renewals a TTL as three or four.
// The server counts for all members at once, not per connection: the lone
// leader is measured apart (N = 1), and a follower's share at N is what the
// N members sent beyond that lone leader, ÷ (N − 1) (bench/figures.ts).
// Autovacuum is off on the benchmark's PostgreSQL (bench/store-servers.ts),
// so that none of its transactions lands in a window.
import pg from "pg";
import { Redis } from "ioredis";
import { storeHosts, type BenchContext, type Params } from "../context";
import { Host } from "../host";
import { storeOf, type SubjectInfo } from "../subjects/types";
import { Trial } from "../trial";
import { errorMessage, sleep, tag } from "../util";
import { addSafety, emptySafety, tally, type SafetySummary } from "../tallies";

export interface StoreIdleRun {
  subject: string;
  n: number;
  seconds: number;
  /** What the server counted for the whole election, per second (Redis: commands; PostgreSQL: statements). */
  requestsPerS?: number;
  /** The same by kind, per second: Redis commands by name; PostgreSQL statements by their first word. */
  byKind?: Record<string, number>;
  failures: string[];
  safety: SafetySummary;
  messages: Record<string, number>;
}

/**
 * PostgreSQL's connections are capped (max_connections 200 in the test kit's
 * server, 3 of them reserved), and a member of this library holds up to two:
 * a hundred members would not fit.
 */
const POSTGRES_MAX_N = 50;

/** The N of a store's idle runs: the lone leader, then the scale scenario's N up to 100 (10 in a quick run). */
export function storeIdleNs(params: Params, subject: SubjectInfo): number[] {
  const cap = params.quick ? 10 : 100;
  const ns = params.scale.ns.filter((n) => n <= cap).map((n) => (storeOf(subject) === "postgres" ? Math.min(n, POSTGRES_MAX_N) : n));
  return [...new Set([1, ...ns])];
}

/** Reads a server's running count of what its clients sent: a total and its parts. */
interface RequestCounter {
  read(): Promise<{ total: number; byKind: Record<string, number> }>;
  close(): Promise<void>;
}

async function redisCounter(url: string): Promise<RequestCounter> {
  const probe = new Redis(url, { connectionName: "bench-probe", lazyConnect: true });
  probe.on("error", () => undefined);
  await probe.connect();
  const monitor = await probe.monitor();
  monitor.on("error", () => undefined);
  const byKind: Record<string, number> = {};
  let total = 0;
  // MONITOR names a script's own commands' source "lua": they are not requests.
  monitor.on("monitor", (_time: string, args: unknown[], source: string) => {
    if (source === "lua") return;
    const name = String(args[0]).toLowerCase();
    byKind[name] = (byKind[name] ?? 0) + 1;
    total++;
  });
  return {
    async read() {
      return { total, byKind: { ...byKind } };
    },
    async close() {
      monitor.disconnect();
      probe.disconnect();
    },
  };
}

async function postgresCounter(url: string): Promise<RequestCounter> {
  const probe = new pg.Client({ connectionString: url, application_name: "bench-probe" });
  probe.on("error", () => undefined);
  await probe.connect();
  return {
    async read() {
      // Every statement but the probe's own (its application_name is not
      // kept there, so its queries are told apart by what they read).
      const result = await probe.query<{ kind: string; calls: string }>(
        "SELECT upper(split_part(ltrim(query), ' ', 1)) AS kind, sum(calls)::text AS calls FROM pg_stat_statements " +
          "WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database()) AND query NOT LIKE '%pg_stat_statements%' GROUP BY 1",
      );
      const byKind: Record<string, number> = {};
      let total = 0;
      for (const row of result.rows) {
        byKind[row.kind] = Number(row.calls);
        total += Number(row.calls);
      }
      return { total, byKind };
    },
    async close() {
      await probe.end().catch(() => undefined);
    },
  };
}

export async function runStoreIdle(ctx: BenchContext, subject: SubjectInfo, n: number): Promise<StoreIdleRun> {
  const p = ctx.params.scale;
  // At least a TTL: the leader renews every TTL/2, and a follower of this library checks once a TTL.
  const seconds = Math.max(p.windowS, p.ttl);
  const run: StoreIdleRun = { subject: subject.id, n, seconds, failures: [], safety: emptySafety(), messages: {} };
  const url = storeHosts(ctx, subject)[0]!;
  const host = await Host.spawn(subject.id, [url], 20);
  const key = subject.electionKey(`idle/${n}-${tag()}`);
  const names = Array.from({ length: n }, (_, j) => `i${n}m${String(j).padStart(4, "0")}`);
  const trial = new Trial(`${subject.id} idle N=${n}`);
  trial.attach(host, names);
  let counter: RequestCounter | undefined;
  try {
    counter = storeOf(subject) === "redis" ? await redisCounter(url) : await postgresCounter(url);
    await host.request("init");
    await host.request("add", { members: names.map((name) => ({ key, name, ttl: p.ttl })) }, 60_000);
    const spreadMs = n > 1 ? p.spreadMs : 0;
    await host.request("start", { spreadMs });
    await trial.waitFor("one leader, every other member following", () => trial.settled(), spreadMs + 30_000);
    // A whole renewal interval and more, so that every member is in its steady state.
    await sleep((p.ttl * 1000) / 2 + p.extraSettleS * 1000);
    const before = await counter.read();
    await sleep(seconds * 1000);
    const after = await counter.read();
    run.requestsPerS = (after.total - before.total) / seconds;
    run.byKind = {};
    for (const [kind, count] of Object.entries(after.byKind)) {
      const delta = count - (before.byKind[kind] ?? 0);
      if (delta > 0) run.byKind[kind] = delta / seconds;
    }
    if (trial.leaders().length !== 1) run.failures.push(`the election did not stay settled: ${trial.describe()}`);
  } catch (err) {
    run.failures.push(errorMessage(err));
  } finally {
    addSafety(run.safety, trial.safety());
    tally(run.messages, trial);
    trial.dispose();
    await host.request("close", { names }, 60_000).catch(() => undefined);
    await host.shutdown();
    await counter?.close();
  }
  return run;
}
