// The printed report: one table per scenario, the ratio of this library to
// each peer, and the targets with PASS or MISS.
import type { Params } from "./context";
import type { ColdStartResult } from "./scenarios/cold-start";
import type { SafetySummary } from "./tallies";
import type { CrashResult } from "./scenarios/crash";
import type { GracefulResult } from "./scenarios/graceful";
import type { NatsIdleRun } from "./scenarios/nats-idle";
import type { PartitionResult } from "./scenarios/partition";
import { perMemberPerSecond, type Load, type ScaleRun } from "./scenarios/scale";
import { summarize, type Summary } from "./stats";
import { subjectInfo, SUBJECTS } from "./subjects/info";
import type { SubjectId } from "./subjects/types";
import { num, table, type Cell } from "./table";

export interface BenchResults {
  meta: {
    startedAt: string;
    quick: boolean;
    durationS?: number;
    machine: { nproc: number; cpu: string; memoryGiB: number; node: string; etcd: string; os: string };
    params: Params;
    /** Percent of the machine's CPUs used by processes other than the benchmark's, per scenario. */
    otherLoad: Record<string, number>;
    notes: string[];
  };
  graceful: GracefulResult[];
  coldStart: ColdStartResult[];
  scale: { baseline?: { seconds: number; proposals: number; grpcReceived: number }; runs: ScaleRun[] };
  /** NATS KV idle load (its own table: NATS messages, not etcd requests); results from before it was measured lack it. */
  natsIdle: NatsIdleRun[];
  crash: CrashResult[];
  partition: PartitionResult[];
  targets: TargetLine[];
}

export interface TargetLine {
  pass: boolean;
  text: string;
}

const label = (id: string) => subjectInfo(id as SubjectId).label;
/** This library on etcd: the subjects the ratios compare with the peers (none of which runs on NATS). */
const ours = SUBJECTS.filter((s) => s.ours && s.api !== "nats");
const peers = SUBJECTS.filter((s) => !s.ours);
const dist = (s: Summary, digits = 1): Cell[] => [s.n, num(s.min, digits), num(s.median, digits), num(s.p90, digits), num(s.max, digits)];
const ms = (v: number | undefined) => (v === undefined || !Number.isFinite(v) ? "—" : `${v.toFixed(0)} ms`);
const mean = (values: number[]) => (values.length ? values.reduce((a, b) => a + b, 0) / values.length : NaN);

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

export function scaleNs(results: BenchResults): number[] {
  return [...new Set(results.scale.runs.map((r) => r.n))].sort((a, b) => a - b);
}

function perMember(load: Load, value: number): string {
  return (value / load.n / load.seconds).toFixed(3);
}

function idleBreakdown(load: Load): string {
  if (load.http) {
    return Object.entries(load.http).filter(([, v]) => v > 0).map(([k, v]) => `${k} ${perMember(load, v)}`).join(", ") || "none";
  }
  const parts: string[] = [];
  for (const [method, v] of Object.entries(load.grpcReceived ?? {})) if (v > 0) parts.push(`${method} msg ${perMember(load, v)}`);
  for (const method of ["LeaseKeepAlive", "Watch"]) {
    const v = load.grpcStarted?.[method] ?? 0;
    if (v > 0) parts.push(`${method} stream opened ${perMember(load, v)}`);
  }
  return parts.join(", ") || "none";
}

function changeBreakdown(load: Load): string {
  if (load.http) return Object.entries(load.http).filter(([, v]) => v > 0).map(([k, v]) => `${k} ${v}`).join(", ") || "none";
  const parts: string[] = [];
  for (const [method, v] of Object.entries(load.grpcReceived ?? {})) if (v > 0) parts.push(`${method} msg ${v}`);
  for (const method of ["LeaseKeepAlive", "Watch"]) {
    const v = load.grpcStarted?.[method] ?? 0;
    if (v > 0) parts.push(`${method} streams ${v}`);
  }
  if (load.rangeCalls) parts.push(`(ranges: ${load.rangeCalls.prefix} over the prefix, ${load.rangeCalls.point} of one key)`);
  return parts.join(", ");
}

function ratio(a: number | undefined, b: number | undefined): string {
  if (a === undefined || b === undefined || !Number.isFinite(a) || !Number.isFinite(b) || b === 0) return "—";
  return `${(a / b).toFixed(2)}×`;
}

function header(results: BenchResults): string[] {
  const p = results.meta.params;
  const m = results.meta.machine;
  return [
    `etcd-leader benchmark (${p.quick ? "--quick" : "full run"}), ${results.meta.startedAt}`,
    `machine: ${m.nproc} × ${m.cpu}, ${m.memoryGiB} GiB, ${m.os}; Node ${m.node}; etcd ${m.etcd} (one throwaway server, v2 API on)`,
    `TTL ${p.ttl} s for failovers, cold start, follower learn delays and the partition; ${p.scale.ttl} s for idle load, leader change`,
    `cost and memory (at ${p.ttl} s a thousand members would renew 1000 times a second: more than one process here can send).`,
    "Times come from the member processes' clocks (performance.timeOrigin + performance.now()).",
    `CPU taken by other processes on this machine (% of its ${m.nproc} CPUs): ` +
      (Object.entries(results.meta.otherLoad).map(([k, v]) => `${k} ${v}%`).join(", ") || "not measured"),
    ...results.meta.notes.map((n) => `note: ${n}`),
    "",
  ];
}

function graceful(results: BenchResults): string[] {
  if (!results.graceful.length) return [];
  return [
    "1. Graceful failover: the leader calls stop() / resign(); ms until the next `elected` (3 members in one process)",
    table(
      ["subject", "n", "min", "median", "p90", "max", "followers naming a non-leader", "failed"],
      results.graceful.map((r) => [label(r.subject), ...dist(summarize(r.failoverMs)), r.wrongLeaderNamed, r.failures.length]),
    ),
    "   followers naming a non-leader: how many followers named another member than the leader just before the stops",
    "",
  ];
}

function crash(results: BenchResults): string[] {
  if (!results.crash.length) return [];
  const ttl = results.meta.params.ttl;
  return [
    `2. Crash failover: the leader's process gets SIGKILL; s until the next \`elected\` (TTL ${ttl} s; one process per member)`,
    table(
      ["subject", "n", "min", "median", "p90", "max", "median/TTL", "max/TTL", "failed"],
      results.crash.map((r) => {
        const s = summarize(r.failoverMs.map((v) => v / 1000));
        return [label(r.subject), ...dist(s, 2), num(s.median / ttl, 2), num(s.max / ttl, 2), r.failures.length];
      }),
    ),
    "",
    "   The same trials split at the removal of the killed leader's key, as an independent watch of etcd saw it:",
    "   the store's part (the key's remaining life at the kill, at most one TTL with a renewal every TTL/2, plus",
    "   etcd's expiry sweep of up to 0.5 s) and the library's part after it (ms, until the next `elected`)",
    table(
      ["subject", "n", "key gone, median s", "key gone, max s", "library part: min", "median", "p90", "max"],
      results.crash
        .filter((r) => r.reactionMs?.length)
        .map((r) => {
          const gone = summarize(r.keyGoneMs.map((v) => v / 1000));
          return [label(r.subject), r.reactionMs.length, num(gone.median, 2), num(gone.max, 2), ...dist(summarize(r.reactionMs), 1).slice(1)];
        }),
    ),
    "",
  ];
}

function idle(results: BenchResults): string[] {
  const runs = results.scale.runs;
  if (!runs.length) return [];
  const rows: Cell[][] = [];
  for (const n of scaleNs(results)) {
    for (const r of runs.filter((x) => x.n === n)) {
      const load = r.idle;
      rows.push([
        n, label(r.subject), num(idleRate(r), 3), num(requestsPerRenewal(r), 3),
        load ? num(perMemberPerSecond(load, load.listings), 3) : undefined,
        load && load.renewals > 0 ? num(load.proposalsCommitted / load.renewals, 3) : undefined,
        load?.hostCpuPercent !== undefined ? `${num(load.hostCpuPercent, 0)}%` : undefined,
        load?.running,
        load ? idleBreakdown(load) : `not measured: ${r.failures.join("; ")}`.slice(0, 110),
      ]);
    }
  }
  const out = [
    `3. Idle load once settled (TTL ${results.meta.params.scale.ttl} s), per member per second: what etcd receives (v2: HTTP requests, counted by`,
    "   a proxy; v3: gRPC messages received + streams opened, from etcd's /metrics), the same per renewal, listings,",
    "   raft proposals per renewal",
    table(["N", "subject", "requests", "per renewal", "listings", "raft writes/renewal", "process CPU", "running", "by kind, per member per second"], rows),
    "   process CPU: the member process's CPU time over the window ÷ the window (100% = one core); running: members that",
    "   had not given up after an error. A process near 100% sends what its CPU allows, not what its members would.",
  ];
  const b = results.scale.baseline;
  if (b) {
    out.push(`   etcd alone (no member, ${num(b.seconds, 1)} s): ${num(b.proposals / b.seconds, 2)} proposals/s, ` +
      `${num(b.grpcReceived / b.seconds, 2)} gRPC messages/s. v2 raft writes per renewal exceed 1 by etcd's own`);
    out.push("   TTL-expiry SYNC proposals (every 500 ms while v2 keys with a TTL exist).");
  }
  const wrong = runs.filter((r) => r.settleMs === undefined && r.wrongLeaderNamed);
  for (const r of wrong) out.push(`   ${label(r.subject)} N=${r.n}: ${r.wrongLeaderNamed} followers still named another member than the leader 2 s after all followed someone`);
  out.push("");
  return out;
}

function natsIdle(results: BenchResults): string[] {
  const runs = results.natsIdle ?? [];
  if (!runs.length) return [];
  const rows: Cell[][] = runs.map((r) => [
    r.n, label(r.subject), num(r.followerSent, 3), num(r.followerReceived, 3), num(r.leaderSent, 3), num(r.leaderReceived, 3),
    r.failures.length ? r.failures.join("; ").slice(0, 100) : "",
  ]);
  return [
    `3b. NATS KV idle load once settled (TTL ${results.meta.params.scale.ttl} s), NATS messages per member per second, from nats-server's`,
    "    per-connection counters (/connz: published = sent, delivered = received)",
    table(["N", "subject", "follower sent", "follower received", "leader sent", "leader received", "problems"], rows),
    "",
  ];
}

function changeCost(results: BenchResults): string[] {
  const runs = results.scale.runs;
  if (!runs.length) return [];
  const p = results.meta.params.scale;
  const rows: Cell[][] = [];
  for (const n of scaleNs(results).filter((x) => x >= 100)) {
    for (const r of runs.filter((x) => x.n === n)) {
      const c = r.changes[0];
      if (!c) {
        rows.push([n, label(r.subject), undefined, undefined, undefined, undefined, undefined, `not measured: ${r.failures.join("; ")}`.slice(0, 110)]);
        continue;
      }
      rows.push([
        n, label(r.subject),
        num(mean(r.changes.map((x) => x.load.requests)), 0),
        num(mean(r.changes.map((x) => x.excessRequests)), 0),
        num(mean(r.changes.map((x) => x.load.listings)), 0),
        num(mean(r.changes.map((x) => x.excessListings)), 0),
        r.changes.reduce((a, x) => a + x.unaware, 0),
        changeBreakdown(c.load),
      ]);
    }
  }
  return [
    `4. Cost of one leader change (TTL ${p.ttl} s; the leader stops): what etcd receives in the ${p.changeWindowS} s from the stop call`,
    table(["N", "subject", "requests", "over idle", "listings", "listings over idle", "not learned in window", "first change, by kind"], rows),
    `   mean over ${p.changes} change(s) per run; over idle: minus the idle rate over the same time; v3 listings: range`,
    "   calls over the election prefix (etcd 3.4 reads every key under the prefix for a sorted range, even with limit 1)",
    "",
  ];
}

function propagation(results: BenchResults): string[] {
  if (!results.coldStart.length) return [];
  const n = results.meta.params.coldStart.n;
  return [
    `5. How long each follower takes to learn the new leader's name after a change, N = ${n} (ms from the stop call;`,
    "   every follower of every change; the members of the cold-start trials, no proxy in the way)",
    table(
      ["subject", "changes", "n", "min", "median", "p90", "max", "median from elected", "never learned", "member process CPU"],
      results.coldStart.map((r) => {
        const d = learnDelays(r);
        const busy = mean(r.changes.map((c) => (100 * c.hostCpuMs) / c.wallMs));
        return [label(r.subject), d.changes, ...dist(summarize(d.fromStop)), num(summarize(d.fromElected).median), d.unaware, `${num(busy, 0)}%`];
      }),
    ),
    "   member process CPU: CPU time of the process hosting the members ÷ wall time, from the stop call until the last",
    "   follower learned (100% = one core busy throughout)",
    "",
  ];
}

function coldStart(results: BenchResults): string[] {
  if (!results.coldStart.length) return [];
  return [
    `6. Cold start: N = ${results.meta.params.coldStart.n} members started at once; ms until one leads and all others name it`,
    table(
      ["subject", "n", "min", "median", "p90", "max", "first elected, median", "one leads + all follow someone, median", "failed"],
      results.coldStart.map((r) => [
        label(r.subject), ...dist(summarize(r.settleMs), 0), num(summarize(r.firstElectedMs).median, 0), num(summarize(r.readyMs).median, 0),
        r.failures.length,
      ]),
    ),
    "",
  ];
}

function memory(results: BenchResults): string[] {
  const runs = results.scale.runs;
  if (!runs.length) return [];
  const ns = scaleNs(results);
  const n = ns[ns.length - 1]!;
  return [
    `7. Memory and sockets per member, N = ${n} in one process, TTL ${results.meta.params.scale.ttl} s (after GC, settled; minus the`,
    "   same process before any member)",
    table(
      ["subject", "RSS KiB/member", "heap KiB/member", "sockets/member", "RSS MiB before → after", "clients"],
      runs.filter((r) => r.n === n).map((r) => [
        label(r.subject),
        num(r.memory?.rssPerMemberKiB), num(r.memory?.heapPerMemberKiB), num(r.memory?.socketsPerMember, 2),
        r.memory ? `${(r.memory.rssBefore / 2 ** 20).toFixed(0)} → ${(r.memory.rssAfter / 2 ** 20).toFixed(0)}` : undefined,
        r.clientNote,
      ]),
    ),
    "",
  ];
}

function partition(results: BenchResults): string[] {
  if (!results.partition.length) return [];
  const out = [
    "8. Partition: the leader's link to etcd goes silent (black hole, no reset). Step-down: cut → the old leader stops",
    "   believing it leads; successor: cut → another member's `elected`; margin = successor − step-down (must be positive);",
    "   then heal; rejoined: the old leader runs, follows the successor and holds a membership in etcd again",
    table(
      ["subject", "trials", "step-down, median", "max", "successor, median", "margin, min", "median", "rejoined", "failed"],
      results.partition.map((r) => {
        const down = summarize(r.trials.map((t) => t.stepDownMs ?? NaN));
        const succ = summarize(r.trials.map((t) => t.successorMs ?? NaN));
        const margin = summarize(r.trials.map((t) => t.marginMs ?? NaN));
        const never = r.trials.filter((t) => t.stepDownMs === undefined).length;
        const rejoined = r.trials.filter((t) => t.rejoinMs !== undefined).length;
        return [
          label(r.subject), r.trials.length,
          never ? `${ms(down.median)} (${never}× never)` : ms(down.median), ms(down.max), ms(succ.median),
          ms(margin.min), ms(margin.median), `${rejoined}/${r.trials.length}`, r.failures.length,
        ];
      }),
    ),
  ];
  for (const r of results.partition) {
    const problems = [...new Set(r.trials.map((t) => t.rejoinProblem).filter(Boolean))];
    if (problems.length) out.push(`   ${label(r.subject)} did not rejoin: ${problems.join("; ")}`);
  }
  out.push("");
  return out;
}

function safetyOf(results: BenchResults, id: string): Array<{ trials: number; instants: number; longestMs: number }> {
  const lists: Array<Array<{ subject: string; safety: SafetySummary }>> = [
    results.graceful, results.crash, results.coldStart, results.scale.runs, results.partition,
  ];
  return lists.map((list) => {
    const found = list.filter((r) => r.subject === id);
    return {
      trials: found.reduce((a, r) => a + r.safety.trials, 0),
      instants: found.reduce((a, r) => a + r.safety.instants, 0),
      longestMs: Math.max(0, ...found.map((r) => r.safety.longestMs)),
    };
  });
}

function safety(results: BenchResults): string[] {
  const rows = SUBJECTS.map((s) => {
    const parts = safetyOf(results, s.id);
    const total = parts.reduce((a, x) => a + x.instants, 0);
    const trials = parts.reduce((a, x) => a + x.trials, 0);
    return [s.label, ...parts.map((x) => (x.trials ? String(x.instants) : "—")), total, trials, num(Math.max(0, ...parts.map((x) => x.longestMs)), 0)];
  });
  return [
    "9. Safety: stretches of time during which two members believed they led (each member's isLeader() sampled every",
    "   5 ms, 20 ms at N = 1000, plus its elected/unelected events; a SIGKILLed member stops believing at the kill)",
    table(["subject", "graceful", "crash", "cold start", "scale", "partition", "total", "trials", "longest ms"], rows),
    "",
  ];
}

function messages(results: BenchResults): string[] {
  const lines: string[] = [];
  for (const s of SUBJECTS) {
    const counts: Record<string, number> = {};
    const all = [...results.graceful, ...results.crash, ...results.coldStart, ...results.partition, ...results.scale.runs]
      .filter((r) => r.subject === s.id);
    for (const r of all) for (const [k, v] of Object.entries(r.messages)) counts[k] = (counts[k] ?? 0) + v;
    const top = Object.entries(counts).sort((a, b) => b[1] - a[1]).slice(0, 4);
    if (top.length) lines.push(`   ${s.label}: ${top.map(([k, v]) => `${v}× ${k}`).join(" | ")}`.slice(0, 400));
  }
  return lines.length ? ["Errors and notes the members reported (all scenarios, most frequent first):", ...lines, ""] : [];
}

function failures(results: BenchResults): string[] {
  const lines: string[] = [];
  const lists: Array<[string, Array<{ subject: string; failures: Array<{ trial: number; reason: string }> }>]> = [
    ["graceful", results.graceful], ["crash", results.crash], ["cold start", results.coldStart], ["partition", results.partition],
  ];
  for (const [name, list] of lists) {
    for (const r of list) {
      for (const f of r.failures.slice(0, 3)) lines.push(`   ${name}, ${label(r.subject)}, trial ${f.trial}: ${f.reason}`.slice(0, 300));
      if (r.failures.length > 3) lines.push(`   ${name}, ${label(r.subject)}: ${r.failures.length - 3} more`);
    }
  }
  for (const r of results.scale.runs) for (const f of r.failures) lines.push(`   scale N=${r.n}, ${label(r.subject)}: ${f}`.slice(0, 300));
  return lines.length ? ["Trials that failed (a deadline passed, a process died, or the members never agreed on the leader):", ...lines, ""] : [];
}

function ratios(results: BenchResults): string[] {
  const rows: Cell[][] = [];
  const metric = (name: string, value: (id: SubjectId) => number | undefined, sameApiOnly = false) => {
    const cells: Cell[] = [name];
    for (const o of ours) for (const q of peers) cells.push(sameApiOnly && o.api !== q.api ? "·" : ratio(value(o.id), value(q.id)));
    if (cells.slice(1).some((c) => c !== "—" && c !== "·")) rows.push(cells);
  };
  const byId = <T extends { subject: string }>(list: T[], id: string) => list.find((r) => r.subject === id);
  const ns = scaleNs(results);
  const run = (id: string, n: number) => results.scale.runs.find((r) => r.subject === id && r.n === n);
  metric("graceful failover, median", (id) => summarize(byId(results.graceful, id)?.failoverMs ?? []).median);
  metric("crash failover, median", (id) => summarize(byId(results.crash, id)?.failoverMs ?? []).median);
  metric("crash failover, max", (id) => summarize(byId(results.crash, id)?.failoverMs ?? []).max);
  for (const n of ns) metric(`idle requests per member, N=${n}`, (id) => idleRate(run(id, n)), true);
  for (const n of ns.filter((x) => x >= 100)) {
    metric(`leader change requests, N=${n}`, (id) => {
      const r = run(id, n);
      return r?.changes.length ? mean(r.changes.map((c) => c.load.requests)) : undefined;
    }, true);
  }
  metric(`follower learns leader, median, N=${results.meta.params.coldStart.n}`, (id) => summarize(learnDelays(byId(results.coldStart, id)).fromStop).median);
  metric(`follower learns leader, max, N=${results.meta.params.coldStart.n}`, (id) => summarize(learnDelays(byId(results.coldStart, id)).fromStop).max);
  metric(`cold start, median, N=${results.meta.params.coldStart.n}`, (id) => summarize(byId(results.coldStart, id)?.settleMs ?? []).median);
  if (ns.length) {
    const n = ns[ns.length - 1]!;
    metric(`RSS per member, N=${n}`, (id) => run(id, n)?.memory?.rssPerMemberKiB);
    metric(`heap per member, N=${n}`, (id) => run(id, n)?.memory?.heapPerMemberKiB);
  }
  metric("partition step-down, median", (id) => summarize((byId(results.partition, id)?.trials ?? []).map((t) => t.stepDownMs ?? NaN)).median);
  if (!rows.length) return [];
  const short = (id: string) => (id === "ours-v2" ? "v2" : "v3");
  return [
    "Ratio of this library to each peer (ours ÷ peer; below 1 is better on every row; · different APIs, not compared;",
    "— no figure for one side)",
    table(["metric", ...ours.flatMap((o) => peers.map((q) => `${short(o.id)} ÷ ${q.label}`))], rows),
    "",
  ];
}

export function render(results: BenchResults): string {
  const out = [
    ...header(results),
    ...graceful(results),
    ...crash(results),
    ...idle(results),
    ...natsIdle(results),
    ...changeCost(results),
    ...propagation(results),
    ...coldStart(results),
    ...memory(results),
    ...partition(results),
    ...safety(results),
    ...messages(results),
    ...failures(results),
    ...ratios(results),
    "Targets",
    ...results.targets.map((t) => `  ${t.pass ? "PASS" : "MISS"}  ${t.text}`),
  ];
  return out.join("\n");
}
