// `npm run bench [-- --quick]`: this library (etcd v2 and v3) side by side
// with etcd-leader 0.0.1 and etcd3's own Election, on one throwaway etcd;
// this library on NATS JetStream KV, on one throwaway nats-server
// (graceful and crash failover, follower learn delays after cold start, and
// its own idle table: messages sent and received per member per second);
// and this library on PostgreSQL beside advisory-lock, and on Redis beside
// redlock and redis-leader, on a throwaway PostgreSQL and redis-server, each
// started only when one of its subjects is selected (graceful and crash
// failover, the partition, and their own idle table: what the server counted).
//
// Scenarios (see bench/scenarios/): graceful failover, crash failover, idle
// load, the cost of a leader change, how fast followers learn the new leader,
// cold start, memory and sockets per member, step-down under a partition, and
// two-leader instants in all of them. Prints tables and PASS/MISS per target.
// A full run writes bench/results/latest.json, bench/results/failover.svg and
// its report in bench/README.md, below the README's hand-written part; a
// partial run (any option below) writes bench/results/quick.json, quick.svg
// and quick.md instead, and leaves the full run's files as they are.
//
// Options:
//   --quick                 fewer trials, N up to 100 in the scale scenario, shorter overload windows (under 6 minutes)
//   --only=a,b              scenarios: graceful, cold, scale, overload, sessions, drain, crash, partition
//   --subjects=a,b          ours-v2, ours-v3, ours-nats, ours-postgres, ours-redis, original, etcd3-election,
//                           advisory-lock, redlock, redis-leader
//
// Every wait has a deadline, and a watchdog ends the run if the whole takes
// far longer than planned. Member processes and the servers are gone
// afterwards however the run ends.
import { execFileSync } from "node:child_process";
import { mkdirSync, readFileSync } from "node:fs";
import { availableParallelism, release, totalmem, type } from "node:os";
import { dirname, relative } from "node:path";
import { Etcd3 } from "etcd3";
import { etcdBinary, startEtcd, type EtcdCluster } from "../test/kit/etcd-server";
import { startNats, type NatsServer } from "../test/kit/nats-server";
import { failoverChart } from "./chart";
import { paramsFor, type BenchContext } from "./context";
import { CountingProxy } from "../test/kit/counting-proxy";
import { compileMembers, removeCompiled } from "./compile";
import { killAllHosts, useCompiledMembers, type Host } from "./host";
import { MachineLoad } from "./machine-load";
import { targetCounts } from "./figures";
import { render } from "./report";
import { isFullRun, SCENARIOS, type BenchResults, type Scenario } from "./results";
import { runColdStart } from "./scenarios/cold-start";
import { prepareCrash, runCrash } from "./scenarios/crash";
import { runGraceful } from "./scenarios/graceful";
import { preparePartition, runPartition } from "./scenarios/partition";
import { runNatsIdle } from "./scenarios/nats-idle";
import { runStoreIdle, storeIdleNs } from "./scenarios/store-idle";
import { startStoreServers, storeVersions, type StoreServers } from "./store-servers";
import { runOverload } from "./scenarios/overload";
import { runSessions } from "./scenarios/sessions";
import { runDrain } from "./scenarios/drain";
import { measureBaseline, runScale, spawnScaleHost } from "./scenarios/scale";
import { SUBJECTS } from "./subjects/info";
import { V2_POOL_MAX_SOCKETS } from "./subjects/node-etcd";
import { POSTGRES_POOL_MAX } from "./subjects/ours-postgres";
import { storeOf } from "./subjects/types";
import { checkTargets } from "./targets";
import { errorMessage, now, sleep } from "./util";
import { outputsFor, writeAtomically, writeReport } from "./write-report";

function parseArgs(argv: string[]): { quick: boolean; only: Set<Scenario>; subjects: Set<string> } {
  let quick = false;
  let only = new Set<Scenario>(SCENARIOS);
  let subjects = new Set(SUBJECTS.map((s) => s.id as string));
  for (const arg of argv) {
    if (arg === "--quick") quick = true;
    else if (arg.startsWith("--only=")) {
      const list = arg.slice(7).split(",").filter(Boolean);
      for (const s of list) if (!SCENARIOS.includes(s as Scenario)) usage(`unknown scenario ${s}`);
      only = new Set(list as Scenario[]);
    } else if (arg.startsWith("--subjects=")) {
      const list = arg.slice(11).split(",").filter(Boolean);
      for (const s of list) if (!SUBJECTS.some((x) => x.id === s)) usage(`unknown subject ${s}`);
      subjects = new Set(list);
    } else if (arg === "-h" || arg === "--help") {
      process.stdout.write(readFileSync(__filename, "utf8").split("\n").filter((l) => l.startsWith("//")).map((l) => l.slice(3)).join("\n") + "\n");
      process.exit(0);
    } else usage(`unknown argument ${arg}`);
  }
  return { quick, only, subjects };
}

function usage(problem: string): never {
  process.stderr.write(`bench: ${problem}\nusage: npm run bench [-- --quick] [--only=graceful,cold,scale,overload,sessions,drain,crash,partition] [--subjects=${SUBJECTS.map((s) => s.id).join(",")}]\n`);
  process.exit(2);
}

function machine(): BenchResults["meta"]["machine"] {
  let cpu = "unknown";
  try {
    cpu = /model name\s*:\s*(.*)/.exec(readFileSync("/proc/cpuinfo", "utf8"))?.[1]?.trim() ?? cpu;
  } catch {
    // not Linux
  }
  let etcd = "unknown";
  try {
    etcd = /etcd Version:\s*(\S+)/.exec(execFileSync(etcdBinary(), ["--version"], { encoding: "utf8", timeout: 5_000 }))?.[1] ?? etcd;
  } catch {
    // reported as unknown
  }
  return {
    nproc: availableParallelism(), cpu, memoryGiB: Math.round(totalmem() / 2 ** 30), node: process.versions.node, etcd,
    os: `${type()} ${release()}`,
  };
}

let etcd: EtcdCluster | undefined;
let nats: NatsServer | undefined;
let stores: StoreServers | undefined;
let proxy: CountingProxy | undefined;
let probe: Etcd3 | undefined;
let compiled: string | undefined;

async function cleanUp(): Promise<void> {
  killAllHosts();
  removeCompiled(compiled);
  compiled = undefined;
  probe?.close();
  probe = undefined;
  await proxy?.close().catch(() => undefined);
  proxy = undefined;
  await etcd?.close().catch(() => undefined);
  etcd = undefined;
  await nats?.close().catch(() => undefined);
  nats = undefined;
  await stores?.close();
  stores = undefined;
}

process.on("exit", () => {
  killAllHosts();
  removeCompiled(compiled);
});
for (const signal of ["SIGINT", "SIGTERM"] as const) {
  process.once(signal, () => {
    process.stderr.write(`\nbench: ${signal}, cleaning up\n`);
    void cleanUp().finally(() => process.exit(signal === "SIGINT" ? 130 : 143));
  });
}

async function main(): Promise<void> {
  const args = parseArgs(process.argv.slice(2));
  const params = paramsFor(args.quick);
  const startedAt = now();
  const subjects = SUBJECTS.filter((s) => args.subjects.has(s.id));
  // PostgreSQL and Redis subjects add their failovers and idle runs.
  const storeExtraS = subjects.some((s) => s.api === "postgres" || s.api === "redis") ? (args.quick ? 360 : 900) : 0;
  const watchdogS = (args.quick ? 480 : 1800) + storeExtraS;
  const watchdog = setTimeout(() => {
    process.stderr.write(`bench: still running after ${watchdogS} s; giving up\n`);
    void cleanUp().finally(() => process.exit(1));
  }, watchdogS * 1000);
  watchdog.unref();

  const log = (message: string) => process.stderr.write(`[${((now() - startedAt) / 1000).toFixed(1).padStart(6)} s] ${message}\n`);
  const load = new MachineLoad();
  /** Notes how much of the machine other processes took during the scenario that just ended. */
  const loadSince = (scenario: string) => {
    const percent = load.othersSinceLast();
    if (percent !== undefined) results.meta.otherLoad[scenario] = Math.round(percent);
  };
  log(`starting etcd (${args.quick ? "quick" : "full"} run)`);
  compiled = compileMembers();
  useCompiledMembers(compiled);
  etcd = await startEtcd();
  const etcdUrl = etcd.clientUrls[0]!;
  proxy = await CountingProxy.start(etcdUrl, { record: false, keepAlive: true });
  probe = new Etcd3({ hosts: etcdUrl });
  const ctx: BenchContext = { params, subjects, etcdUrl, countingProxy: proxy, probe, log };
  if (subjects.some((s) => s.api === "nats")) {
    nats = await startNats();
    ctx.natsUrl = nats.url;
    ctx.natsMonitorUrl = `http://127.0.0.1:${nats.monitorPort}`;
  }
  stores = await startStoreServers(ctx, subjects);
  /** The etcd-only scenarios (their figures come from etcd's own counters, or a proxy in front of etcd). */
  const etcdSubjects = subjects.filter((s) => storeOf(s) === "etcd");
  const natsSubjects = subjects.filter((s) => s.api === "nats");
  /** PostgreSQL and Redis: graceful, crash, partition, and their own idle table. */
  const sqlAndRedisSubjects = subjects.filter((s) => s.api === "postgres" || s.api === "redis");
  /** Cold start, follower learn delays and the drain ask followers to name the leader, and members of this library on etcd or NATS. */
  const etcdAndNatsSubjects = subjects.filter((s) => storeOf(s) === "etcd" || storeOf(s) === "nats");

  const results: BenchResults = {
    meta: {
      startedAt: new Date().toISOString(),
      quick: args.quick,
      scenarios: SCENARIOS.filter((s) => args.only.has(s)),
      subjects: subjects.map((s) => s.id),
      machine: machine(),
      params,
      otherLoad: {},
      notes: [
        `every member has its own client, as it would in its own process. v2 (this library, 0.0.1): node-etcd, the clients of ` +
          `a process sharing one request pool of ${V2_POOL_MAX_SOCKETS} sockets for both (node-etcd 7's shared default pool of 100 ` +
          `would starve 100+ members that each hold long-poll watches). v3 (this library, etcd3 Election): one etcd3 client, so one ` +
          `HTTP/2 connection, per member; its services share one gRPC channel with the options the README recommends (this ` +
          `library) and have one each with etcd3's defaults (Election) (sharing one etcd3 client among 100 Election members ` +
          `trips etcd3's circuit breaker: it counts streams it cancels itself as failures of the host)`,
        "etcd3 Election members each campaign and also observe() (Campaign alone never names the leader); on an error they " +
          "campaign / observe again after 5 s as etcd3's documentation shows. 0.0.1 stops itself on an error; nothing restarts it",
        "graceful, cold start and scale runs measure one subject at a time; the crash and partition trials of all four subjects " +
          "run at the same time (own keys, processes and proxies, every process started beforehand; their figures are seconds, " +
          "set by the TTL)",
        "etcd runs with heartbeat 50 ms and election timeout 500 ms (test/kit/etcd-server.ts)",
        "NATS KV (this library only; no peer runs on NATS here): nats-server 2.9 with JetStream, one bucket per TTL whose " +
          "max_age is the TTL, one connection per member. Its idle load has its own table (NATS messages, not etcd requests); " +
          "the partition scenario and the etcd idle and change-cost tables are etcd's, and skip it",
        "etcd3 Election's clients keep etcd3's default fault handling (a host is shut for 5 s after three failed calls), " +
          "as its documentation has them: its rejoin after a partition includes those 5 s. Ours use the client the README " +
          "recommends (gRPC keepalive, a breaker that counts a burst of failures once and half-opens after 250 ms, no channelz)",
      ],
    },
    graceful: [],
    coldStart: [],
    scale: { runs: [] },
    natsIdle: [],
    storeIdle: [],
    overload: [],
    sessions: [],
    drain: [],
    crash: [],
    partition: [],
    targets: [],
  };

  if (sqlAndRedisSubjects.length) {
    const versions = await storeVersions(stores);
    results.meta.notes.push(
      `PostgreSQL and Redis (cold start, follower learn delays, scale, overload and drain are etcd's and NATS's, and skip them): ` +
        `${versions.postgres ? `PostgreSQL ${versions.postgres}` : ""}${versions.postgres && versions.redis ? " and " : ""}` +
        `${versions.redis ? `redis-server ${versions.redis}` : ""} from the test kit (PostgreSQL without fsync and autovacuum, ` +
        `Redis without persistence or keyspace notifications), one client per member: this library's a pg.Pool of at most ` +
        `${POSTGRES_POOL_MAX} connections (keepAlive) or an ioredis client with its defaults; redlock and redis-leader on an ` +
        `ioredis client each, advisory-lock on connections it opens itself. Their idle load has its own table (what the server ` +
        `saw: the Redis commands clients sent, PostgreSQL transactions)`,
      "advisory-lock, redlock and redis-leader are locks used as elections: a follower cannot name the leader, so they " +
        "report no `leader` events, and their trials wait for none. advisory-lock: tryLock() every TTL/2, the lock held by " +
        "its session until unlock(); redlock: using() with one attempt per try, a try every 200–400 ms (its default retry " +
        "delay and jitter); redis-leader: elect() with its default wait of 1 s",
    );
  }
  try {
    loadSince("before");
    if (args.only.has("graceful")) {
      for (const subject of subjects) {
        log(`graceful failover: ${subject.label}`);
        results.graceful.push(await runGraceful(ctx, subject));
      }
      loadSince("graceful");
    }
    if (args.only.has("cold")) {
      for (const subject of etcdAndNatsSubjects) {
        log(`cold start, N=${params.coldStart.n}: ${subject.label}`);
        results.coldStart.push(await runColdStart(ctx, subject));
        await sleep(500);
      }
      loadSince("cold start");
    }
    if (args.only.has("scale")) {
      results.scale.baseline = await measureBaseline(ctx);
      const plan = params.scale.ns.flatMap((n) => etcdSubjects.map((subject) => ({ n, subject })));
      let next: Promise<Host> | undefined;
      for (let i = 0; i < plan.length; i++) {
        const { n, subject } = plan[i]!;
        const host = next ?? spawnScaleHost(ctx, subject, n);
        next = undefined;
        const following = plan[i + 1];
        log(`scale, N=${n}: ${subject.label}`);
        results.scale.runs.push(
          await runScale(ctx, subject, n, host, () => {
            // The next run's process starts while this one measures.
            if (following && !next) next = spawnScaleHost(ctx, following.subject, following.n);
          }),
        );
        // Let deletions and revocations settle before the next subject's windows.
        await sleep(300);
      }
      if (next) await (await next.catch(() => undefined))?.shutdown();
      // NATS followers send nothing while idle, so the per-member figure does not grow with N: up to 100 tells it.
      for (const n of params.scale.ns.filter((x) => x <= 100)) {
        for (const subject of natsSubjects) {
          log(`NATS idle, N=${n}: ${subject.label}`);
          results.natsIdle.push(await runNatsIdle(ctx, subject, n));
        }
      }
      for (const subject of sqlAndRedisSubjects) {
        for (const n of storeIdleNs(params, subject)) {
          log(`${subject.api === "redis" ? "Redis" : "PostgreSQL"} idle, N=${n}: ${subject.label}`);
          results.storeIdle!.push(await runStoreIdle(ctx, subject, n));
        }
      }
      loadSince("scale");
    }
    if (args.only.has("overload")) {
      for (const c of params.overload) {
        // Peers only where the case asks for them, and not in a quick run: one that never converges waits out the case's timeout.
        const who = etcdSubjects.filter((s) => s.ours || (c.peers && !params.quick));
        for (const subject of who) {
          log(`overload, ${c.n} members in ${c.processes} process${c.processes > 1 ? "es" : ""}, TTL ${c.ttl} s: ${subject.label}`);
          results.overload!.push(await runOverload(ctx, subject, c));
          // Let the members' deletions and revocations settle before the next subject starts.
          await sleep(2000);
        }
      }
      loadSince("overload");
    }
    if (args.only.has("sessions") && subjects.some((s) => s.id === "ours-v3")) {
      const c = params.sessions;
      log(`sessions: ${c.elections} elections, one member each in ${c.processes} processes, one session per process, TTL ${c.ttl} s`);
      results.sessions!.push(await runSessions(ctx, c));
      loadSince("sessions");
    }
    if (args.only.has("drain")) {
      for (const subject of etcdAndNatsSubjects.filter((s) => s.ours && s.id !== "ours-v3-session")) {
        log(`drain before release: ${subject.label}`);
        results.drain!.push(await runDrain(ctx, subject));
      }
      loadSince("drain");
    }
    // Crash and partition trials of every subject run at the same time: each
    // is timed in seconds by the TTL, and every process they need is started
    // first, so that nothing but the members themselves runs meanwhile.
    const crashing = args.only.has("crash");
    const partitioning = args.only.has("partition");
    if (crashing || partitioning) {
      log(`starting member processes for ${[crashing && "crash", partitioning && "partition"].filter(Boolean).join(" and ")} trials`);
      const crashPools = crashing ? await Promise.all(subjects.map((s) => prepareCrash(ctx, s))) : [];
      // NATS has no partition trials: its client's reconnects are not what the scenario measures.
      const partitioned = [...etcdSubjects, ...sqlAndRedisSubjects];
      const partitionHosts = partitioning ? await Promise.all(partitioned.map((s) => preparePartition(ctx, s))) : [];
      log(`${[crashing && "crash failover", partitioning && "partition"].filter(Boolean).join(" and ")}: all subjects concurrently`);
      [results.crash, results.partition] = await Promise.all([
        Promise.all(crashPools.map((pool, i) => runCrash(ctx, subjects[i]!, pool))),
        Promise.all(partitionHosts.map((host, i) => runPartition(ctx, partitioned[i]!, host))),
      ]);
      loadSince("crash + partition");
    }
  } finally {
    await cleanUp();
    clearTimeout(watchdog);
  }

  results.meta.durationS = Math.round((now() - startedAt) / 100) / 10;
  results.targets = checkTargets(results);
  const json = JSON.stringify(results, roundFigures, 1) + "\n";
  // Everything shown from here on is read from the figures as saved, so that
  // bench/write-report.ts on the saved file writes the same report again.
  const saved = JSON.parse(json) as BenchResults;
  const outputs = outputsFor(saved);
  mkdirSync(dirname(outputs.results), { recursive: true });
  writeAtomically(outputs.results, json);
  writeAtomically(outputs.chart, failoverChart(saved));
  process.stdout.write(render(saved) + "\n");
  const { pass, miss } = targetCounts(saved);
  const shown = (path: string) => relative(process.cwd(), path);
  process.stdout.write(
    `\n${pass} PASS, ${miss} MISS; run took ${saved.meta.durationS} s; ` +
      `raw figures in ${shown(outputs.results)}, chart in ${shown(outputs.chart)}\n`,
  );
  let report: string;
  try {
    report = shown(writeReport(saved));
  } catch (err) {
    throw new Error(`the results are saved, but the report was not written: ${errorMessage(err)}`);
  }
  process.stdout.write(
    isFullRun(saved)
      ? `report in ${report}\n`
      : `a partial run: its report is in ${report}; bench/README.md keeps the last full run's\n`,
  );
}

/** Hundredths of a millisecond (or of whatever unit) are noise: keep the JSON readable. */
function roundFigures(_key: string, value: unknown): unknown {
  return typeof value === "number" && !Number.isInteger(value) ? Math.round(value * 100) / 100 : value;
}

main().then(
  () => process.exit(0),
  async (err: unknown) => {
    process.stderr.write(`bench failed: ${err instanceof Error ? err.stack ?? err.message : errorMessage(err)}\n`);
    await cleanUp();
    process.exit(1);
  },
);
