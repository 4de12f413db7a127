// The figures of a run, each computed in one place from its results: the
// terminal report, the markdown report and the targets all read them here,
// so that a figure cannot say one thing in one and another in the next.
import { partialArgs, type BenchResults } from "./results";
import type { ColdStartResult } from "./scenarios/cold-start";
import type { NatsIdleRun } from "./scenarios/nats-idle";
import type { StoreIdleRun } from "./scenarios/store-idle";
import { perMemberPerSecond, type ScaleRun } from "./scenarios/scale";
import { summarize, type Summary } from "./stats";
import { SUBJECTS } from "./subjects/info";
import { storeOf, type SubjectId, type SubjectInfo } from "./subjects/types";
import type { SafetySummary } from "./tallies";

const bySubject = <T extends { subject: string }>(list: readonly T[], id: string): T | undefined => list.find((r) => r.subject === id);

export const mean = (values: number[]): number => (values.length ? values.reduce((a, b) => a + b, 0) / values.length : NaN);

// The run as a whole.

/** "full run", or the arguments that made it a partial one. */
export function runDescription(results: BenchResults): string {
  return partialArgs(results).join(" ") || "full run";
}

export function machineLine(results: BenchResults): string {
  const m = results.meta.machine;
  return `machine: ${m.nproc} × ${m.cpu}, ${m.memoryGiB} GiB, ${m.os}; Node ${m.node}; etcd ${m.etcd} (one throwaway server, v2 API on)`;
}

export function otherLoadLine(results: BenchResults): string {
  return (
    `CPU taken by other processes on this machine (% of its ${results.meta.machine.nproc} CPUs): ` +
    (Object.entries(results.meta.otherLoad).map(([k, v]) => `${k} ${v}%`).join(", ") || "not measured")
  );
}

export function targetCounts(results: BenchResults): { pass: number; miss: number } {
  const miss = results.targets.filter((t) => !t.pass).length;
  return { pass: results.targets.length - miss, miss };
}

/** Subjects with a figure anywhere in the run (those left out with --subjects have none). */
export function subjectsRun(results: BenchResults): Set<string> {
  return new Set(
    [
      ...results.graceful, ...results.crash, ...results.coldStart, ...results.partition, ...results.scale.runs, ...(results.natsIdle ?? []),
      ...(results.storeIdle ?? []), ...(results.overload ?? []), ...(results.drain ?? []),
    ]
      .map((r) => r.subject),
  );
}

// Failover.

/** Graceful failover: ms from stop() / resign() to the next `elected`. */
export function gracefulFailover(results: BenchResults, id: string): Summary {
  return summarize(bySubject(results.graceful, id)?.failoverMs ?? []);
}

/** Crash failover: ms from the SIGKILL to the next `elected`. */
export function crashFailover(results: BenchResults, id: string): Summary {
  return summarize(bySubject(results.crash, id)?.failoverMs ?? []);
}

/** The crash trials' store part: ms from the kill until the killed leader's key was gone. */
export function crashKeyGone(results: BenchResults, id: string): Summary {
  return summarize(bySubject(results.crash, id)?.keyGoneMs ?? []);
}

/** The crash trials' library part: ms from the key's removal to the next `elected`. */
export function crashReaction(results: BenchResults, id: string): Summary {
  return summarize(bySubject(results.crash, id)?.reactionMs ?? []);
}

// Cold start and the leader changes after it.

export function coldStartOf(results: BenchResults, id: string): ColdStartResult | undefined {
  return bySubject(results.coldStart, id);
}

/** Cold start: ms until one member leads and every other one names it, over the trials that got there. */
export function coldStartSettle(results: BenchResults, id: string): Summary {
  return summarize(coldStartOf(results, id)?.settleMs ?? []);
}

/** The leader changes after the cold starts: ms from the stop call to the next `elected`. */
export function changeFailover(results: BenchResults, id: string): Summary {
  return summarize((coldStartOf(results, id)?.changes ?? []).map((c) => c.failoverMs));
}

/** Follower learn delays (from the stop call) of every change after the cold starts. */
export function learnDelays(result: ColdStartResult | undefined): { fromStop: number[]; fromElected: number[]; unaware: number; changes: number } {
  const changes = result?.changes ?? [];
  return {
    fromStop: changes.flatMap((c) => c.learnFromStopMs),
    fromElected: changes.flatMap((c) => c.learnFromElectedMs),
    unaware: changes.reduce((a, c) => a + c.unaware, 0),
    changes: changes.length,
  };
}

// Scale runs: idle load, the cost of a change, memory.

export function scaleNs(results: BenchResults): number[] {
  return [...new Set(results.scale.runs.map((r) => r.n))].sort((a, b) => a - b);
}

/** The largest N of the scale runs (memory and listings are told there). */
export function largestN(results: BenchResults): number | undefined {
  const ns = scaleNs(results);
  return ns[ns.length - 1];
}

export function scaleRun(results: BenchResults, id: string, n: number): ScaleRun | undefined {
  return results.scale.runs.find((r) => r.subject === id && r.n === n);
}

/** The headline idle figure: what etcd receives per member per second. */
export function idleRate(run: ScaleRun | undefined): number | undefined {
  return run?.idle ? perMemberPerSecond(run.idle, run.idle.requests) : undefined;
}

/**
 * What etcd receives per renewal (every request in the window ÷ the
 * renewals in it): a figure that does not depend on whether the member
 * process could keep its renewal schedule, as the per-second rate does.
 */
export function requestsPerRenewal(run: ScaleRun | undefined): number | undefined {
  return run?.idle && run.idle.renewals > 0 ? run.idle.requests / run.idle.renewals : undefined;
}

/** What etcd receives in the window after a change of leader, mean over the run's changes. */
export function changeRequests(run: ScaleRun | undefined): number | undefined {
  return run?.changes.length ? mean(run.changes.map((c) => c.load.requests)) : undefined;
}

/** Listings (v2 GETs of the directory, v3 ranges over the prefix) after a change of leader, mean over the run's changes. */
export function changeListings(run: ScaleRun | undefined): number | undefined {
  return run?.changes.length ? mean(run.changes.map((c) => c.load.listings)) : undefined;
}

/** Requests per follower for each change beyond the idle background. */
export function changeRequestsPerFollower(run: ScaleRun | undefined): number[] {
  return run ? run.changes.map((c) => c.excessRequests / (run.n - 1)) : [];
}

/** Followers that had not named the successor when a change's window ended, over the run's changes, and of how many. */
export function changeUnaware(run: ScaleRun | undefined): { unaware: number; of: number } {
  if (!run) return { unaware: 0, of: 0 };
  return { unaware: run.changes.reduce((a, c) => a + c.unaware, 0), of: run.changes.length * (run.n - 1) };
}

/** The NATS KV idle run at N: NATS messages per member per second, sent and received, the leader apart from the followers. */
export function natsIdleRun(results: BenchResults, id: string, n: number): NatsIdleRun | undefined {
  return (results.natsIdle ?? []).find((r) => r.subject === id && r.n === n);
}

/** The PostgreSQL or Redis idle run at N: what the server counted for the whole election, per second. */
export function storeIdleRun(results: BenchResults, id: string, n: number): StoreIdleRun | undefined {
  return (results.storeIdle ?? []).find((r) => r.subject === id && r.n === n);
}

/** The N of a subject's PostgreSQL or Redis idle runs, lone leader (N = 1) included, ascending. */
export function storeIdleNsOf(results: BenchResults, id: string): number[] {
  return (results.storeIdle ?? []).filter((r) => r.subject === id).map((r) => r.n).sort((a, b) => a - b);
}

/**
 * PostgreSQL and Redis idle load per member per second, from the server's
 * counts for a whole election: the leader is the lone member's (N = 1); a
 * follower's share at N is what the N members sent beyond that, ÷ (N − 1).
 */
export function storeIdleShares(results: BenchResults, id: string, n: number): { leader?: number; follower?: number } {
  const lone = storeIdleRun(results, id, 1)?.requestsPerS;
  const all = storeIdleRun(results, id, n)?.requestsPerS;
  if (lone === undefined) return {};
  return { leader: lone, follower: all === undefined || n < 2 ? undefined : (all - lone) / (n - 1) };
}

// Partition.

export interface PartitionFigures {
  trials: number;
  stepDown: Summary;
  successor: Summary;
  /** Successor − step-down per trial: negative means two leaders at once. */
  margin: Summary;
  /** Trials in which the old leader never stopped believing it led. */
  neverSteppedDown: number;
  /** How long after the heal the old leader followed again, in the trials where it did. */
  rejoin: Summary;
  problems: string[];
}

export function partitionFigures(results: BenchResults, id: string): PartitionFigures {
  const trials = bySubject(results.partition, id)?.trials ?? [];
  return {
    trials: trials.length,
    stepDown: summarize(trials.map((t) => t.stepDownMs ?? NaN)),
    successor: summarize(trials.map((t) => t.successorMs ?? NaN)),
    margin: summarize(trials.map((t) => t.marginMs ?? NaN)),
    neverSteppedDown: trials.filter((t) => t.stepDownMs === undefined).length,
    rejoin: summarize(trials.flatMap((t) => (t.rejoinMs === undefined ? [] : [t.rejoinMs]))),
    problems: [...new Set(trials.map((t) => t.rejoinProblem).filter((p): p is string => Boolean(p)))],
  };
}

// Safety.

export interface SafetyPart {
  scenario: "graceful" | "crash" | "cold start" | "scale" | "overload" | "partition";
  trials: number;
  instants: number;
  longestMs: number;
}

/** Instants with two leaders per scenario (the NATS idle runs are part of the scale scenario). */
export function safetyByScenario(results: BenchResults, id: string): SafetyPart[] {
  const lists: Array<[SafetyPart["scenario"], Array<{ subject: string; safety: SafetySummary }>]> = [
    ["graceful", results.graceful],
    ["crash", results.crash],
    ["cold start", results.coldStart],
    ["scale", [...results.scale.runs, ...(results.natsIdle ?? []), ...(results.storeIdle ?? [])]],
    ["overload", results.overload ?? []],
    ["partition", results.partition],
  ];
  return lists.map(([scenario, list]) => {
    const found = list.filter((r) => r.subject === id);
    return {
      scenario,
      trials: found.reduce((a, r) => a + r.safety.trials, 0),
      instants: found.reduce((a, r) => a + r.safety.instants, 0),
      longestMs: Math.max(0, ...found.map((r) => r.safety.longestMs)),
    };
  });
}

export function safetyTotal(results: BenchResults, id: string): { trials: number; instants: number; longestMs: number } {
  const parts = safetyByScenario(results, id);
  return {
    trials: parts.reduce((a, x) => a + x.trials, 0),
    instants: parts.reduce((a, x) => a + x.instants, 0),
    longestMs: Math.max(0, ...parts.map((x) => x.longestMs)),
  };
}

// Ratios of this library to each peer.

/** This library on etcd: the subjects the ratios compare with the etcd peers (none of which runs on NATS). */
const oursOnEtcd = SUBJECTS.filter((s) => s.ours && storeOf(s) === "etcd");
const peers = SUBJECTS.filter((s) => !s.ours);
const etcdPeers = peers.filter((s) => storeOf(s) === "etcd");

/**
 * The pairs the ratios compare: this library on etcd with each etcd peer
 * (always, as before there were other stores), and this library on
 * PostgreSQL or Redis with each peer on the same store, where it ran.
 */
function ratioPairs(results: BenchResults): Array<{ o: SubjectInfo; q: SubjectInfo }> {
  const ran = subjectsRun(results);
  const pairs = oursOnEtcd.flatMap((o) => etcdPeers.map((q) => ({ o, q })));
  for (const o of SUBJECTS.filter((s) => s.ours && (s.api === "postgres" || s.api === "redis") && ran.has(s.id))) {
    for (const q of peers.filter((p) => p.api === o.api)) pairs.push({ o, q });
  }
  return pairs;
}

function ratio(a: number | undefined, b: number | undefined): string {
  if (a === undefined || b === undefined || !Number.isFinite(a) || !Number.isFinite(b) || b === 0) return "—";
  return `${(a / b).toFixed(2)}×`;
}

/**
 * Ours ÷ peer for each headline figure, as text: "·" where the two run on
 * different APIs and are not compared, "—" where one side has no figure.
 * Rows where no pair has a figure are left out; no rows, no table.
 */
export function ratioTable(results: BenchResults): { headers: string[]; rows: string[][] } {
  const rows: string[][] = [];
  const pairs = ratioPairs(results);
  const metric = (name: string, value: (id: SubjectId) => number | undefined, sameApiOnly = false) => {
    const cells = [name];
    for (const { o, q } of pairs) cells.push(sameApiOnly && o.api !== q.api ? "·" : ratio(value(o.id), value(q.id)));
    if (cells.slice(1).some((c) => c !== "—" && c !== "·")) rows.push(cells);
  };
  const ns = scaleNs(results);
  const coldN = results.meta.params.coldStart.n;
  metric("graceful failover, median", (id) => gracefulFailover(results, id).median);
  metric("crash failover, median", (id) => crashFailover(results, id).median);
  metric("crash failover, max", (id) => crashFailover(results, id).max);
  for (const n of ns) metric(`idle requests per member, N=${n}`, (id) => idleRate(scaleRun(results, id, n)), true);
  for (const n of ns.filter((x) => x >= 100)) metric(`leader change requests, N=${n}`, (id) => changeRequests(scaleRun(results, id, n)), true);
  metric(`follower learns leader, median, N=${coldN}`, (id) => summarize(learnDelays(coldStartOf(results, id)).fromStop).median);
  metric(`follower learns leader, max, N=${coldN}`, (id) => summarize(learnDelays(coldStartOf(results, id)).fromStop).max);
  metric(`cold start, median, N=${coldN}`, (id) => coldStartSettle(results, id).median);
  const n = largestN(results);
  if (n !== undefined) {
    metric(`RSS per member, N=${n}`, (id) => scaleRun(results, id, n)?.memory?.rssPerMemberKiB);
    metric(`heap per member, N=${n}`, (id) => scaleRun(results, id, n)?.memory?.heapPerMemberKiB);
  }
  // PostgreSQL and Redis: what the server counted, per member per second, at each one's largest N.
  metric("idle requests per follower (server's count)", (id) => {
    const n = storeIdleNsOf(results, id).at(-1);
    return n === undefined ? undefined : storeIdleShares(results, id, n).follower;
  });
  metric("idle requests of the leader (server's count)", (id) => storeIdleShares(results, id, 1).leader);
  metric("partition step-down, median", (id) => partitionFigures(results, id).stepDown.median);
  const short: Record<string, string> = { "ours-v2": "v2", "ours-v3": "v3", "ours-postgres": "PostgreSQL", "ours-redis": "Redis" };
  return { headers: ["metric", ...pairs.map(({ o, q }) => `${short[o.id] ?? o.label} ÷ ${q.label}`)], rows };
}
