// The printed report: one table per scenario, the ratio of this library to
// each peer, and the targets with PASS or MISS.
import {
  changeListings, changeRequests, coldStartSettle, crashFailover, crashKeyGone, crashReaction, gracefulFailover,
  idleRate, largestN, learnDelays, machineLine, mean, otherLoadLine, partitionFigures, ratioTable, requestsPerRenewal,
  runDescription, safetyByScenario, safetyTotal, scaleNs, storeIdleShares, subjectsRun,
} from "./figures";
import type { BenchResults } from "./results";
import type { DrainTrial } from "./scenarios/drain";
import { perMemberPerSecond, type Load } from "./scenarios/scale";
import { summarize, type Summary } from "./stats";
import { subjectInfo, SUBJECTS } from "./subjects/info";
import type { SubjectId } from "./subjects/types";
import { num, table, type Cell } from "./table";

const label = (id: string) => subjectInfo(id as SubjectId).label;
const dist = (s: Summary, digits = 1): Cell[] => [s.n, num(s.min, digits), num(s.median, digits), num(s.p90, digits), num(s.max, digits)];
const inSeconds = (s: Summary): Summary => ({
  n: s.n, min: s.min / 1000, median: s.median / 1000, p90: s.p90 / 1000, max: s.max / 1000, mean: s.mean / 1000,
});
const ms = (v: number | undefined) => (v === undefined || !Number.isFinite(v) ? "—" : `${v.toFixed(0)} ms`);

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

function header(results: BenchResults): string[] {
  const p = results.meta.params;
  return [
    `etcd-leader benchmark (${runDescription(results)}), ${results.meta.startedAt}`,
    machineLine(results),
    `TTL ${p.ttl} s for failovers, cold start, follower learn delays and the partition; ${p.scale.ttl} s for idle load, leader change`,
    `cost and memory (at ${p.ttl} s a thousand members would renew 1000 times a second: more than one process here can send).`,
    "Times come from the member processes' clocks (performance.timeOrigin + performance.now()).",
    otherLoadLine(results),
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
      results.graceful.map((r) => [label(r.subject), ...dist(gracefulFailover(results, r.subject)), r.wrongLeaderNamed, r.failures.length]),
    ),
    "   followers naming a non-leader: how many followers named another member than the leader just before the stops",
    "",
  ];
}

function crash(results: BenchResults): string[] {
  if (!results.crash.length) return [];
  const ttl = results.meta.params.ttl;
  const overall = [
    `2. Crash failover: the leader's process gets SIGKILL; s until the next \`elected\` (TTL ${ttl} s; one process per member)`,
    table(
      ["subject", "n", "min", "median", "p90", "max", "median/TTL", "max/TTL", "failed"],
      results.crash.map((r) => {
        const s = inSeconds(crashFailover(results, r.subject));
        return [label(r.subject), ...dist(s, 2), num(s.median / ttl, 2), num(s.max / ttl, 2), r.failures.length];
      }),
    ),
    "",
  ];
  // Only etcd's keys are watched for their removal: without an etcd subject, no split.
  if (!results.crash.some((r) => r.reactionMs?.length || r.keyGoneMs?.length)) return overall;
  return [
    ...overall,
    "   The same trials split at the removal of the killed leader's key, as an independent watch of etcd saw it:",
    "   the store's part (the key's remaining life at the kill, at most one TTL with a renewal every TTL/2, plus",
    "   etcd's expiry sweep of up to 0.5 s) and the library's part after it (ms, until the next `elected`)",
    table(
      ["subject", "n", "key gone, median s", "key gone, max s", "library part: min", "median", "p90", "max"],
      results.crash
        .filter((r) => r.reactionMs?.length)
        .map((r) => {
          const gone = inSeconds(crashKeyGone(results, r.subject));
          const reaction = crashReaction(results, r.subject);
          return [label(r.subject), reaction.n, num(gone.median, 2), num(gone.max, 2), ...dist(reaction, 1).slice(1)];
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

function storeIdle(results: BenchResults): string[] {
  const runs = results.storeIdle ?? [];
  if (!runs.length) return [];
  const rows: Cell[][] = runs.map((r) => {
    const shares = storeIdleShares(results, r.subject, r.n);
    const byKind = Object.entries(r.byKind ?? {}).map(([k, v]) => `${k} ${v.toFixed(2)}`).join(", ");
    return [
      r.n, label(r.subject), num(r.requestsPerS, 3), r.n > 1 ? num(shares.follower, 3) : undefined, num(shares.leader, 3),
      r.failures.length ? r.failures.join("; ").slice(0, 100) : byKind.slice(0, 100) || "none",
    ];
  });
  return [
    `3f. PostgreSQL and Redis idle load once settled (TTL ${results.meta.params.scale.ttl} s), per second, as the server saw it: Redis`,
    "    commands clients sent (MONITOR; the commands a Lua script runs are not counted), PostgreSQL statements clients",
    "    sent (pg_stat_statements, the measurement's own left out). Both are for the",
    "    whole election: the leader's figure is the lone member's (N = 1), a follower's what N members sent beyond it, ÷ (N − 1)",
    table(["N", "subject", "whole election", "per follower", "leader", "by kind, per second (or problems)"], rows),
    "",
  ];
}

function overload(results: BenchResults): string[] {
  const runs = results.overload ?? [];
  if (!runs.length) return [];
  const rows: Cell[][] = runs.map((r) => [
    r.n, r.processes, r.ttl, label(r.subject),
    num(r.convergedMs === undefined ? undefined : r.convergedMs / 1000, 2),
    num(r.settledMs === undefined ? undefined : r.settledMs / 1000, 2),
    r.stayS ? `${num(r.unconvergedMs, 0)} ms / ${r.stayS} s` : "",
    r.stayS ? r.leaderChanges : "",
    r.errors, num(r.requestsPerMember, 1), num(r.grantsPerMember, 2),
    r.failures.length ? r.failures.join("; ").slice(0, 100) : "",
  ]);
  return [
    "3c. Overload: every member started at the same instant, each with its own client; converged = one leader and every",
    "    other member following some leader; settled = every member naming the leader; then, over a window, the time",
    "    not converged and the leader changes; error events and what etcd received (per member) from the start on",
    table(["N", "processes", "TTL s", "subject", "converged s", "settled s", "not converged", "leader changes", "errors",
      "requests/member", "grants/member", "problems"], rows),
    "",
  ];
}

function sessions(results: BenchResults): string[] {
  const runs = results.sessions ?? [];
  if (!runs.length) return [];
  const ms = (s: { n: number; median: number; max: number } | undefined) => (s && s.n ? `${num(s.median, 0)} / ${num(s.max, 0)} ms` : "");
  const rows: Cell[][] = runs.map((r) => [
    r.elections, r.processes, r.ttl,
    num(r.settledMs === undefined ? undefined : r.settledMs / 1000, 2),
    num(r.idle?.requestsPerProcessPerRefresh, 2),
    r.heapPerElectionKiB ? `${num(r.heapPerElectionKiB.leading, 2)} / ${num(r.heapPerElectionKiB.following, 2)}` : "",
    r.change ? `${num(r.change.failoverMs, 1)} ms, +${num(r.change.excessRequests, 1)}` : "",
    ms(r.cleanClose?.ms),
    r.watchDelivery ? `${num(r.watchDelivery.perKeyWatchesMs.median, 0)} / ${num(r.watchDelivery.rangeWatchMs.median, 0)} ms` : "",
    ms(r.crash?.ms), r.overlaps, r.errors,
    r.failures.length ? r.failures.join("; ").slice(0, 100) : "",
  ]);
  return [
    "3d. Many elections, one etcd v3 session per process: each election has one member in each process; settled = every",
    "    election led by the first process and named by the others; idle = etcd's requests per process per refresh",
    "    interval; a change in one election: stop → next elected, and requests beyond the idle rate; then the leading",
    "    process closes its session, then the one leading most is SIGKILLed: per election, the time to a new leader;",
    "    revoke floor: with the processes gone, from a revoke of as many keys to the last deletion's arrival in one",
    "    process, median, with one watch per key / one watch over them all",
    table(["elections", "processes", "TTL s", "settled s", "idle req/proc/refresh", "heap KiB/election lead / follow",
      "one change", "clean close median / max", "revoke floor", "SIGKILL median / max", "two leaders", "errors", "problems"], rows),
    "",
  ];
}

function drain(results: BenchResults): string[] {
  const runs = results.drain ?? [];
  if (!runs.length) return [];
  const median = (values: number[]) => summarize(values).median;
  const rows: Cell[][] = runs.map((r) => {
    const t = r.trials;
    const of = (pick: (x: DrainTrial) => number) => (t.length ? num(median(t.map(pick)), 1) : undefined);
    return [
      label(r.subject), t.length, of((x) => x.abortedMs), of((x) => x.cleanupMs), of((x) => x.settledMs), of((x) => x.goneMs),
      of((x) => x.electedMs), of((x) => x.successorRoutineMs), of((x) => x.successorRoutineMs - x.settledMs),
      t.filter((x) => x.overlapMs > 0).length, r.failures.length ? r.failures.join("; ").slice(0, 100) : "",
    ];
  });
  return [
    "3e. The drain before release: the leader's leave() while its whileLeading routine runs (the routine takes 50 to 500 ms",
    "    to finish once its signal aborts) and a member in another process waits with a routine of its own; medians in ms",
    "    from leave(): routine aborted, its cleanup, settled, membership gone (leave() resolved), successor elected,",
    "    successor's routine started; then the gap from ours settled to the successor's start, and trials where they overlapped",
    table(["subject", "n", "aborted", "cleanup", "settled", "gone", "successor elected", "successor routine", "gap after settled",
      "overlaps", "problems"], rows),
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
        num(changeRequests(r), 0),
        num(mean(r.changes.map((x) => x.excessRequests)), 0),
        num(changeListings(r), 0),
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
        label(r.subject), ...dist(coldStartSettle(results, r.subject), 0), num(summarize(r.firstElectedMs).median, 0), num(summarize(r.readyMs).median, 0),
        r.failures.length,
      ]),
    ),
    "",
  ];
}

function memory(results: BenchResults): string[] {
  const runs = results.scale.runs;
  if (!runs.length) return [];
  const n = largestN(results)!;
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
        const p = partitionFigures(results, r.subject);
        return [
          label(r.subject), p.trials,
          p.neverSteppedDown ? `${ms(p.stepDown.median)} (${p.neverSteppedDown}× never)` : ms(p.stepDown.median), ms(p.stepDown.max),
          ms(p.successor.median), ms(p.margin.min), ms(p.margin.median), `${p.rejoin.n}/${p.trials}`, r.failures.length,
        ];
      }),
    ),
  ];
  if (results.partition.some((r) => ["postgres", "redis"].includes(subjectInfo(r.subject as SubjectId).api))) {
    out.push("   PostgreSQL and Redis: the leader's link to that server; rejoined: it runs, is no leader and names the successor");
    out.push("   (where its library names leaders at all); a follower holds nothing on those servers");
  }
  for (const r of results.partition) {
    const problems = partitionFigures(results, r.subject).problems;
    if (problems.length) out.push(`   ${label(r.subject)} did not rejoin: ${problems.join("; ")}`);
  }
  out.push("");
  return out;
}

function safety(results: BenchResults): string[] {
  const ran = subjectsRun(results);
  // The PostgreSQL and Redis subjects where they ran; the others always, as before those stores were measured.
  const shown = SUBJECTS.filter((s) => (s.api !== "postgres" && s.api !== "redis") || ran.has(s.id));
  const rows = shown.map((s) => {
    const total = safetyTotal(results, s.id);
    const parts = safetyByScenario(results, s.id).map((x) => (x.trials ? String(x.instants) : "—"));
    return [s.label, ...parts, total.instants, total.trials, num(total.longestMs, 0)];
  });
  return [
    "9. Safety: stretches of time during which two members believed they led (each member's isLeader() sampled every",
    "   5 ms, 20 ms at N = 1000, plus its elected/unelected events; a SIGKILLed member stops believing at the kill;",
    `   scale includes the NATS KV${results.storeIdle?.length ? ", PostgreSQL and Redis" : ""} idle runs)`,
    table(["subject", ...safetyByScenario(results, "ours-v2").map((x) => x.scenario), "total", "trials", "longest ms"], rows),
    "",
  ];
}

function messages(results: BenchResults): string[] {
  const lines: string[] = [];
  for (const s of SUBJECTS) {
    const counts: Record<string, number> = {};
    const all = [...results.graceful, ...results.crash, ...results.coldStart, ...results.partition, ...results.scale.runs, ...(results.storeIdle ?? [])]
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
  for (const r of results.storeIdle ?? []) for (const f of r.failures) lines.push(`   idle N=${r.n}, ${label(r.subject)}: ${f}`.slice(0, 300));
  return lines.length ? ["Trials that failed (a deadline passed, a process died, or the members never agreed on the leader):", ...lines, ""] : [];
}

function ratios(results: BenchResults): string[] {
  const { headers, rows } = ratioTable(results);
  if (!rows.length) return [];
  return [
    "Ratio of this library to each peer (ours ÷ peer; below 1 is better on every row; · different APIs, not compared;",
    "— no figure for one side)",
    table(headers, rows),
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
    ...storeIdle(results),
    ...overload(results),
    ...sessions(results),
    ...drain(results),
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
