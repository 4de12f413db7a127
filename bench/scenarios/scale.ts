// 3, 4 and 7 at N members in one process: idle load once settled (what etcd
// receives per member per second), the cost of a leader change (what etcd
// receives in the following seconds, how many listings), and memory and
// sockets per member. Members start spread evenly over one renewal interval,
// so their renewals are too.
//
// v2: counted by the counting proxy every member talks through, by kind.
// v3: etcd's /metrics before and after (gRPC messages received and calls
// started per method, raft proposals committed), plus the member process's
// own count of KV range calls over a prefix (listings) and of single keys.
import { diffCounts, totalOf, type Counts } from "../../test/kit/counting-proxy";
import type { BenchContext } from "../context";
import { diffMetrics, readMetrics, type MetricsDelta, type MetricsSnapshot } from "../etcd-metrics";
import { Host } from "../host";
import type { SubjectInfo } from "../subjects/types";
import { Trial } from "../trial";
import { errorMessage, now, sleep, tag } from "../util";
import { leaderChange, type LeaderChange } from "./common";
import { addSafety, emptySafety, tally, type SafetySummary } from "../tallies";

/** gRPC methods that are streams: opening one is work for etcd that no message counts. */
const STREAMING = new Set(["Watch", "LeaseKeepAlive"]);

export interface Load {
  seconds: number;
  n: number;
  /** v2: requests by kind, through the counting proxy. */
  http?: Counts;
  /** v3: gRPC messages received, and calls or streams started, per method. */
  grpcReceived?: Record<string, number>;
  grpcStarted?: Record<string, number>;
  /** v3: KV range calls the members made, over the election prefix or of one key. */
  rangeCalls?: { prefix: number; point: number };
  /** What etcd received: v2 HTTP requests; v3 gRPC messages plus streams opened. */
  requests: number;
  /** Listings: v2 GETs of the directory; v3 range calls over the prefix. */
  listings: number;
  proposalsCommitted: number;
  /** Lease renewals seen (v2 refreshes or CAS writes; v3 LeaseKeepAlive messages). */
  renewals: number;
  /** CPU time of the member process over the window ÷ the window (100 = one core busy throughout). */
  hostCpuPercent?: number;
  /** Members still running (not given up after an error) at the end of the window. */
  running?: number;
}

export interface ChangeCost extends LeaderChange {
  load: Load;
  /** Requests beyond what the idle rate would have produced in the same time. */
  excessRequests: number;
  excessListings: number;
}

export interface ScaleRun {
  subject: string;
  n: number;
  clientNote: string;
  /** From start until one member led and every other one named some leader. */
  readyMs?: number;
  /** From start until every member named the leader; undefined if that did not happen within 2 s of readyMs. */
  settleMs?: number;
  /** When settleMs is undefined: how many followers named another member than the leader. */
  wrongLeaderNamed?: number;
  idle?: Load;
  changes: ChangeCost[];
  memory?: {
    rssBefore: number; rssAfter: number; heapBefore: number; heapAfter: number;
    socketsBefore: number; socketsAfter: number;
    rssPerMemberKiB: number; heapPerMemberKiB: number; socketsPerMember: number;
  };
  failures: string[];
  safety: SafetySummary;
  messages: Record<string, number>;
}

interface Snapshot {
  at: number;
  http?: Counts;
  metrics: MetricsSnapshot;
  rangeCalls?: { prefix: number; point: number };
}

async function snapshot(ctx: BenchContext, subject: SubjectInfo, host: Host): Promise<Snapshot> {
  const at = now();
  const http = subject.api === "v2" ? ctx.countingProxy.snapshot() : undefined;
  const [metrics, calls] = await Promise.all([
    readMetrics(ctx.etcdUrl),
    subject.api === "v3" ? host.request("calls") : Promise.resolve(undefined),
  ]);
  return {
    at, http, metrics,
    rangeCalls: calls ? { prefix: calls.prefix as number, point: calls.point as number } : undefined,
  };
}

function loadBetween(subject: SubjectInfo, n: number, a: Snapshot, b: Snapshot): Load {
  const seconds = (b.at - a.at) / 1000;
  const m: MetricsDelta = diffMetrics(b.metrics, a.metrics);
  if (subject.api === "v2") {
    const http = diffCounts(b.http!, a.http!);
    return {
      seconds, n, http,
      requests: totalOf(http),
      listings: http.list,
      proposalsCommitted: m.proposalsCommitted,
      renewals: http.refresh + http["cas-write"],
    };
  }
  const rangeCalls = { prefix: b.rangeCalls!.prefix - a.rangeCalls!.prefix, point: b.rangeCalls!.point - a.rangeCalls!.point };
  let streamsOpened = 0;
  for (const [method, count] of Object.entries(m.started)) if (STREAMING.has(method)) streamsOpened += count;
  return {
    seconds, n,
    grpcReceived: m.received,
    grpcStarted: m.started,
    rangeCalls,
    requests: m.receivedTotal + streamsOpened,
    listings: rangeCalls.prefix,
    proposalsCommitted: m.proposalsCommitted,
    renewals: m.received.LeaseKeepAlive ?? 0,
  };
}

export function perMemberPerSecond(load: Load, value: number): number {
  return value / load.n / load.seconds;
}

/** The member process for a scale run; every v2 request goes through the counting proxy. */
export function spawnScaleHost(ctx: BenchContext, subject: SubjectInfo, n: number): Promise<Host> {
  const endpoint = subject.api === "v2" ? ctx.countingProxy.url : ctx.etcdUrl;
  const host = Host.spawn(subject.id, [endpoint], n >= 1000 ? 20 : 5);
  host.catch(() => undefined);
  return host;
}

/**
 * One subject at N members. `hostReady` is its member process (see
 * spawnScaleHost); `measuring` is called when the idle window starts, the
 * moment to start the next run's process without disturbing this run's
 * memory figures.
 */
export async function runScale(
  ctx: BenchContext,
  subject: SubjectInfo,
  n: number,
  hostReady: Promise<Host>,
  measuring: () => void = () => undefined,
): Promise<ScaleRun> {
  const p = ctx.params.scale;
  const { ttl } = p;
  const run: ScaleRun = {
    subject: subject.id, n, clientNote: "", changes: [], failures: [], safety: emptySafety(), messages: {},
  };
  let host: Host;
  try {
    host = await hostReady;
  } catch (err) {
    measuring();
    run.failures.push(errorMessage(err));
    return run;
  }
  const key = subject.electionKey(`scale/${n}-${tag()}`);
  const names = Array.from({ length: n }, (_, j) => `n${n}m${String(j).padStart(4, "0")}`);
  const trial = new Trial(`${subject.id} N=${n}`, n < 1000);
  trial.attach(host, names);
  try {
    run.clientNote = String((await host.request("init")).note);
    await waitQuiet(ctx);
    const before = await host.request("stats", { gc: true });
    await host.request("add", { members: names.map((name) => ({ key, name, ttl })) }, 60_000);
    const started = await host.request("start", { spreadMs: p.spreadMs });
    const tStart = started.at as number;
    const ready = await trial.waitFor("one leader, every other member following someone", () => trial.ready(), 20_000 + n * 40);
    run.readyMs = ready.t - tStart;
    const settled = await trial.waitFor("every member naming the leader", () => trial.settled(), 2000).catch(() => undefined);
    if (settled) run.settleMs = settled.t - tStart;
    else run.wrongLeaderNamed = trial.ready()?.wrong;
    await sleep(p.extraSettleS * 1000);
    const after = await host.request("stats", { gc: true }, 60_000);
    run.memory = {
      rssBefore: before.rss as number, rssAfter: after.rss as number,
      heapBefore: before.heapUsed as number, heapAfter: after.heapUsed as number,
      socketsBefore: before.sockets as number, socketsAfter: after.sockets as number,
      rssPerMemberKiB: ((after.rss as number) - (before.rss as number)) / n / 1024,
      heapPerMemberKiB: ((after.heapUsed as number) - (before.heapUsed as number)) / n / 1024,
      socketsPerMember: ((after.sockets as number) - (before.sockets as number)) / n,
    };
    if (!trial.ready()) await trial.waitFor("one leader again", () => trial.ready(), 10_000);

    const cpuBefore = (await host.request("cpu")).cpuMs as number;
    const a = await snapshot(ctx, subject, host);
    measuring();
    await sleep(p.windowS * 1000);
    const b = await snapshot(ctx, subject, host);
    const cpuAfter = (await host.request("cpu")).cpuMs as number;
    const idle = loadBetween(subject, n, a, b);
    idle.hostCpuPercent = (100 * (cpuAfter - cpuBefore)) / (b.at - a.at);
    const state = (await host.request("running", {}, 30_000)).state as Record<string, { running: boolean }>;
    idle.running = Object.values(state).filter((m) => m.running).length;
    run.idle = idle;

    // Leader changes are measured from N = 100 on.
    for (let c = 1; n >= 100 && c <= p.changes; c++) {
      await trial.waitFor("one leader before the change", () => trial.ready(), 10_000);
      const s0 = await snapshot(ctx, subject, host);
      // How fast followers learn is measured at TTL 2 s after the cold starts;
      // here only what etcd receives.
      const change = await leaderChange(trial, host, p.changeWindowS * 1000);
      const windowEnd = change.tStop + p.changeWindowS * 1000;
      if (now() < windowEnd) await sleep(windowEnd - now());
      const s1 = await snapshot(ctx, subject, host);
      const load = loadBetween(subject, n, s0, s1);
      run.changes.push({
        ...change,
        load,
        excessRequests: load.requests - (idle.requests / idle.seconds) * load.seconds,
        excessListings: load.listings - (idle.listings / idle.seconds) * load.seconds,
      });
    }
  } catch (err) {
    run.failures.push(errorMessage(err));
  } finally {
    measuring();
    addSafety(run.safety, trial.safety());
    tally(run.messages, trial);
    trial.dispose();
    await host.shutdown(30_000);
  }
  return run;
}

/** etcd's own background traffic with no member running, over the idle window. */
export async function measureBaseline(ctx: BenchContext): Promise<{ seconds: number; proposals: number; grpcReceived: number }> {
  const a = await readMetrics(ctx.etcdUrl);
  await sleep(2000);
  const b = await readMetrics(ctx.etcdUrl);
  const d = diffMetrics(b, a);
  return { seconds: d.seconds, proposals: d.proposalsCommitted, grpcReceived: d.receivedTotal };
}

/**
 * Waits (at most 4 s) until etcd commits no raft proposal for 600 ms: the
 * previous run's memberships are gone (expired, deleted or revoked), so they
 * do not count against this one.
 */
async function waitQuiet(ctx: BenchContext): Promise<void> {
  const deadline = now() + 4000;
  let before = await readMetrics(ctx.etcdUrl);
  while (now() < deadline) {
    await sleep(600);
    const after = await readMetrics(ctx.etcdUrl);
    if (after.proposalsCommitted === before.proposalsCommitted) return;
    before = after;
  }
}
