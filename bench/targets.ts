// The targets, checked against the figures as measured. A subject whose
// trials failed, or that has no figure, misses.
import {
  changeFailover, changeRequestsPerFollower, coldStartOf, coldStartSettle, crashFailover, crashReaction, gracefulFailover, idleRate,
  learnDelays, requestsPerRenewal, safetyTotal, scaleNs, scaleRun, storeIdleNsOf, storeIdleShares, subjectsRun,
} from "./figures";
import type { BenchResults, TargetLine } from "./results";
import { summarize, type Summary } from "./stats";
import { SUBJECTS, subjectInfo } from "./subjects/info";
import { storeOf, type SubjectId, type SubjectInfo } from "./subjects/types";

/** A leader cut off by a partition is a follower again within this long of the heal. */
const REJOIN_TARGET_MS = 1_000;

const f = (v: number, digits = 1) => (Number.isFinite(v) ? v.toFixed(digits) : "n/a");

export function checkTargets(results: BenchResults): TargetLine[] {
  const lines: TargetLine[] = [];
  const ttl = results.meta.params.ttl;
  const ttlMs = ttl * 1000;
  // Subjects left out with --subjects get no target lines.
  const ran = subjectsRun(results);
  const ours = SUBJECTS.filter((s) => s.ours && ran.has(s.id));
  const peers = SUBJECTS.filter((s) => !s.ours);
  const etcdPeers = peers.filter((s) => storeOf(s) === "etcd");
  /**
   * Whom a subject of ours is held to: the peers on its store; on NATS,
   * where no peer runs, etcd's.
   */
  const peersOf = (o: SubjectInfo) => (storeOf(o) === "nats" ? etcdPeers : peers.filter((q) => storeOf(q) === storeOf(o)));
  /** The leader-change listings are measured on etcd only. */
  const oursOnEtcd = ours.filter((s) => storeOf(s) === "etcd");
  /** Cold start and the follower learn delays after it run on etcd and NATS. */
  const oursWithColdStart = ours.filter((s) => storeOf(s) === "etcd" || storeOf(s) === "nats");
  /** The partition: etcd, PostgreSQL and Redis. */
  const oursPartitioned = ours.filter((s) => storeOf(s) !== "nats");
  const add = (pass: boolean, text: string) => lines.push({ pass, text });
  /** The peer with the lowest median of `figures`, among those that have any. */
  const bestPeerBy = (figures: (id: SubjectId) => Summary) =>
    etcdPeers
      .map((q) => ({ q, s: figures(q.id) }))
      .filter(({ s }) => s.n > 0)
      .sort((a, b) => a.s.median - b.s.median)[0];
  const failed = (list: Array<{ subject: string; failures: unknown[] }>, id: string) =>
    list.find((r) => r.subject === id)?.failures.length ?? 0;

  // 1. Graceful failover.
  if (results.graceful.length) {
    for (const o of ours) {
      const mine = gracefulFailover(results, o.id);
      const others = peersOf(o).map((q) => ({ q, s: gracefulFailover(results, q.id) }));
      const slower = others.filter(({ s }) => Number.isFinite(s.median) && !(mine.median <= s.median));
      const bad = failed(results.graceful, o.id);
      add(
        mine.median < 50 && slower.length === 0 && bad === 0,
        `graceful failover, ${o.label}: median ${f(mine.median)} ms (target < 50 ms and not slower than any peer: ` +
          `${others.map(({ q, s }) => `${q.label} ${f(s.median)} ms`).join(", ")})${bad ? `; ${bad} failed trials` : ""}`,
      );
    }
  }

  // 2. Crash failover.
  if (results.crash.length) {
    for (const o of ours) {
      const s = crashFailover(results, o.id);
      const bad = failed(results.crash, o.id);
      if (o.api === "v2") {
        const medianLimit = 0.75 * ttlMs + 500;
        const maxLimit = ttlMs + 1000;
        add(s.median <= medianLimit && s.max <= maxLimit && bad === 0 && s.n > 0,
          `crash failover, ${o.label}: median ${f(s.median / 1000, 2)} s (≤ ${f(medianLimit / 1000, 2)} s), max ${f(s.max / 1000, 2)} s (≤ ${f(maxLimit / 1000, 2)} s), n ${s.n}${bad ? `; ${bad} failed trials` : ""}`);
      } else {
        const limit = ttlMs + 1000;
        add(s.max <= limit && bad === 0 && s.n > 0,
          `crash failover, ${o.label}: every trial ≤ ${f(limit / 1000, 2)} s: max ${f(s.max / 1000, 2)} s, median ${f(s.median / 1000, 2)} s, n ${s.n}${bad ? `; ${bad} failed trials` : ""}`);
      }
    }
  }

  // 2b. Crash failover against the store's physics: what the library adds
  // after etcd removed the crashed leader's key, over at least 40 trials, no
  // more than the best peer adds (etcd subjects; NATS 2.9 announces no expiry).
  if (results.crash.length) {
    const bestPeer = bestPeerBy((id) => crashReaction(results, id));
    for (const o of oursOnEtcd) {
      const mine = crashReaction(results, o.id);
      const needN = results.meta.quick ? 1 : 40;
      add(bestPeer !== undefined && mine.n >= needN && mine.median <= bestPeer.s.median,
        `crash failover, ${o.label}: after etcd removed the crashed leader's key, elected within a median ${f(mine.median)} ms, ` +
          `max ${f(mine.max)} ms, n ${mine.n} (target n ≥ ${needN} and ≤ the best peer's median: ` +
          `${bestPeer ? `${bestPeer.q.label} ${f(bestPeer.s.median)} ms, n ${bestPeer.s.n}` : "n/a"})`);
    }
  }

  // 3. Idle load: what etcd receives per member per second as measured, and
  // the same at each subject's own renewal schedule (requests per renewal ×
  // renewals per second), which holds even when a peer's process cannot keep
  // its schedule.
  const ns = scaleNs(results);
  const scaleTtl = results.meta.params.scale.ttl;
  const runOf = (id: SubjectId, n: number) => scaleRun(results, id, n);
  const rate = (id: SubjectId, n: number) => idleRate(runOf(id, n)) ?? NaN;
  const perRenewal = (id: SubjectId, n: number) => requestsPerRenewal(runOf(id, n)) ?? NaN;
  const atSchedule = (id: SubjectId, n: number) => (perRenewal(id, n) * subjectInfo(id).renewalsPerTtl) / scaleTtl;
  const idleTargets = (mineId: SubjectId, theirsId: SubjectId, limit: number, what: string) => {
    const theirLabel = subjectInfo(theirsId).label;
    for (const n of ns) {
      if (!runOf(mineId, n)) continue;
      const mine = rate(mineId, n);
      const theirs = rate(theirsId, n);
      add(mine <= limit * theirs,
        `idle load ${subjectInfo(mineId).api}, N=${n}: ${f(mine, 3)} ${what}/member/s vs ${theirLabel}'s ${f(theirs, 3)} = ${f(mine / theirs, 2)}× (target ≤ ${limit}×)`);
      const mineScheduled = atSchedule(mineId, n);
      const theirsScheduled = atSchedule(theirsId, n);
      add(mineScheduled <= limit * theirsScheduled,
        `idle load ${subjectInfo(mineId).api} at each one's schedule, N=${n}: ${f(perRenewal(mineId, n), 3)} requests/renewal × ` +
          `${subjectInfo(mineId).renewalsPerTtl} per TTL = ${f(mineScheduled, 3)}/member/s vs ${theirLabel}'s ${f(perRenewal(theirsId, n), 3)} × ` +
          `${subjectInfo(theirsId).renewalsPerTtl} = ${f(theirsScheduled, 3)} = ${f(mineScheduled / theirsScheduled, 2)}× (target ≤ ${limit}×)`);
    }
  };
  idleTargets("ours-v2", "original", 0.4, "requests");
  idleTargets("ours-v3", "etcd3-election", 0.67, "(gRPC messages + streams opened)");
  for (const n of ns) {
    const idle = runOf("ours-v3", n)?.idle;
    if (!idle) continue;
    // Renewals are LeaseKeepAlive messages, which etcd's leader answers without
    // a raft round; nothing else writes while the members idle.
    add(idle.renewals > 0 && idle.proposalsCommitted === 0,
      `no raft write for renewals, v3, N=${n}: ${idle.proposalsCommitted} proposals committed in the idle window for ${idle.renewals} keep-alives (target 0)`);
  }

  // 3b. PostgreSQL and Redis idle load, from the server's own counts (bench/scenarios/store-idle.ts):
  // the leader sends at most two requests per TTL (its renewals every TTL/2),
  // a follower at most one (the check when the leader's lease must have run
  // out, which finds it renewed; none where Redis sends keyspace
  // notifications), each with a tenth to spare; and a follower sends no more
  // than a follower of any peer on the same store.
  for (const o of ours.filter((s) => s.api === "postgres" || s.api === "redis")) {
    const idleNs = storeIdleNsOf(results, o.id);
    if (!idleNs.length) continue;
    const unit = o.api === "redis" ? "commands" : "statements";
    const idleFailures = (results.storeIdle ?? []).filter((r) => r.subject === o.id).flatMap((r) => r.failures);
    const problems = idleFailures.length ? `; ${idleFailures.join("; ").slice(0, 200)}` : "";
    const leader = storeIdleShares(results, o.id, 1).leader ?? NaN;
    add(leader * scaleTtl <= 2.2 && idleFailures.length === 0,
      `idle load, ${o.label}, the leader alone (TTL ${scaleTtl} s): ${f(leader, 3)} ${unit}/s = ${f(leader * scaleTtl, 2)} per TTL ` +
        `(target ≤ 2 per TTL, + 10 %)${problems}`);
    for (const n of idleNs.filter((x) => x > 1)) {
      const follower = storeIdleShares(results, o.id, n).follower ?? NaN;
      const theirs = peersOf(o).map((q) => ({ q, v: storeIdleShares(results, q.id, n).follower }));
      const busier = theirs.filter(({ v }) => v !== undefined && !(follower <= v));
      add(follower * scaleTtl <= 1.1 && busier.length === 0 && idleFailures.length === 0,
        `idle load, ${o.label}, N=${n}: a follower ${f(follower, 3)} ${unit}/s = ${f(follower * scaleTtl, 2)} per TTL (target ≤ 1 per TTL, ` +
          `+ 10 %, and ≤ every peer's: ${theirs.map(({ q, v }) => `${q.label} ${f(v ?? NaN, 3)}`).join(", ") || "none ran"})`);
    }
  }

  // 4. A leader change at the largest N costs at most a handful of listings.
  const bigN = ns[ns.length - 1];
  if (bigN !== undefined) {
    const quickNote = bigN < 1000 ? ` (N=1000 not run${results.meta.quick ? " in --quick" : ""}; checked at N=${bigN})` : "";
    for (const o of oursOnEtcd) {
      const run = runOf(o.id, bigN);
      const listings = run && run.changes.length ? Math.max(...run.changes.map((c) => c.load.listings)) : NaN;
      add(listings <= 5,
        `leader change, ${o.label}, N=${bigN}: at most ${f(listings, 0)} listings in the ${results.meta.params.scale.changeWindowS} s after a change (target ≤ 5, a handful)${quickNote}`);
    }
  }

  // 5. Every follower knows the new leader within 250 ms at N = 100 (the changes after the cold starts).
  if (results.coldStart.length) {
    const n = results.meta.params.coldStart.n;
    for (const o of oursWithColdStart) {
      const d = learnDelays(coldStartOf(results, o.id));
      const s = summarize(d.fromStop);
      add(s.n > 0 && s.max <= 250 && d.unaware === 0,
        `leader known by every follower, ${o.label}, N=${n}: max ${f(s.max, 0)} ms after the stop call over ${s.n} follower-changes ` +
          `(${d.changes} changes), ${d.unaware} never learned (target ≤ 250 ms)`);
    }
  }

  // 5b. A change of leader at N = 100 (the changes after the cold starts, and
  // the scale run's changes for the requests): stop → next elected no slower
  // than the best peer's median, every follower told within 100 ms, and at
  // most one request per follower per change beyond the idle background.
  if (results.coldStart.length) {
    const n = results.meta.params.coldStart.n;
    const bestPeer = bestPeerBy((id) => changeFailover(results, id));
    for (const o of oursWithColdStart) {
      const mine = changeFailover(results, o.id);
      add(bestPeer !== undefined && mine.n > 0 && mine.median <= bestPeer.s.median,
        `leader change, ${o.label}, N=${n}: stop → next elected median ${f(mine.median)} ms, max ${f(mine.max)} ms, n ${mine.n} ` +
          `(target ≤ the best peer's median: ${bestPeer ? `${bestPeer.q.label} ${f(bestPeer.s.median)} ms` : "n/a"})`);
      const d = learnDelays(coldStartOf(results, o.id));
      const s = summarize(d.fromStop);
      add(s.n > 0 && s.max <= 100 && d.unaware === 0,
        `every follower told, ${o.label}, N=${n}: median ${f(s.median, 0)} ms, max ${f(s.max, 0)} ms after the stop call (target ≤ 100 ms)`);
    }
  }
  for (const o of oursOnEtcd) {
    const run = runOf(o.id, 100);
    if (!run?.changes.length) continue;
    const perFollower = changeRequestsPerFollower(run);
    const worst = Math.max(...perFollower);
    add(worst <= 1,
      `leader change requests, ${o.label}, N=100: at most ${f(worst, 2)} requests per follower per change beyond the idle background ` +
        `(${perFollower.map((v) => f(v, 2)).join(", ")}; target ≤ 1)`);
  }

  // 5c. Cold start at N = 100, until every member follows: at or below the fastest peer.
  if (results.coldStart.length) {
    const n = results.meta.params.coldStart.n;
    const fastest = bestPeerBy((id) => coldStartSettle(results, id));
    for (const o of oursOnEtcd) {
      const mine = coldStartSettle(results, o.id);
      add(fastest !== undefined && mine.n > 0 && mine.median <= fastest.s.median,
        `cold start, ${o.label}, N=${n}: every member following after a median ${f(mine.median, 0)} ms (n ${mine.n}; ` +
          `target ≤ the fastest peer: ${fastest ? `${fastest.q.label} ${f(fastest.s.median, 0)} ms` : "n/a"})`);
    }
  }

  // 5d. Memory per member at the largest N, against the peer on the same API.
  if (bigN !== undefined) {
    for (const [mineId, theirsId] of [["ours-v2", "original"], ["ours-v3", "etcd3-election"]] as const) {
      const mine = runOf(mineId, bigN)?.memory?.heapPerMemberKiB;
      const theirs = runOf(theirsId, bigN)?.memory?.heapPerMemberKiB;
      if (mine === undefined && theirs === undefined) continue;
      add(mine !== undefined && theirs !== undefined && mine <= theirs,
        `heap per member, ${subjectInfo(mineId).label}, N=${bigN}: ${f(mine ?? NaN)} KiB vs ${subjectInfo(theirsId).label}'s ${f(theirs ?? NaN)} KiB (target ≤ the peer on the same API)`);
    }
  }

  // 5e. A thousand members in one process (TTL 10 s), started evenly over
  // spreadMs: settled within 5 s of the last start, and a change of leader within 100 ms.
  if (ns.includes(1000)) {
    const spreadMs = results.meta.params.scale.spreadMs;
    for (const o of oursOnEtcd) {
      const run = runOf(o.id, 1000);
      if (!run) continue;
      const settle = run.settleMs ?? run.readyMs;
      const afterLast = settle === undefined ? NaN : settle - spreadMs;
      add(afterLast <= 5000 && run.failures.length === 0,
        `1000 members, ${o.label}: every member following ${f(afterLast / 1000, 2)} s after the last of them started ` +
          `(starts spread over ${f(spreadMs / 1000, 0)} s; target ≤ 5 s)`);
      const changes = summarize(run.changes.map((c) => c.failoverMs));
      add(changes.n > 0 && changes.max <= 100,
        `1000 members, ${o.label}: stop → next elected max ${f(changes.max)} ms over ${changes.n} changes (target ≤ 100 ms)`);
    }
  }

  // 5f. Overload: every member started at the same instant.
  for (const run of (results.overload ?? []).filter((r) => subjectInfo(r.subject as SubjectId).ours)) {
    const label = subjectInfo(run.subject as SubjectId).label;
    const where = `${run.n} members${run.processes > 1 ? ` in ${run.processes} processes` : ""}, TTL ${run.ttl} s, started at once, ${label}`;
    const problems = run.failures.length ? `; ${run.failures.join("; ").slice(0, 200)}` : "";
    const converged = run.convergedMs !== undefined && run.failures.length === 0;
    if (run.ttl * 1000 <= 2000) {
      const stayed = converged && run.unconvergedMs === 0 && run.leaderChanges === 0;
      add(stayed && run.errors < run.n,
        `overload, ${where}: converged after ${f((run.convergedMs ?? NaN) / 1000, 2)} s, then not converged for ` +
          `${f(run.unconvergedMs ?? NaN, 0)} ms of ${run.stayS} s with ${run.leaderChanges ?? "n/a"} leader changes; ` +
          `${run.errors} error events (target: converged, and stays so for the whole window, with fewer error events than members)${problems}`);
    } else if (run.processes === 1) {
      const settle = run.settledMs ?? run.convergedMs;
      add(converged && settle !== undefined && settle <= 5000,
        `overload, ${where}: every member following ${f((settle ?? NaN) / 1000, 2)} s after the start; ${run.errors} error events ` +
          `(target ≤ 5 s)${problems}`);
    } else {
      add(converged && (run.unconvergedMs ?? 0) === 0,
        `overload, ${where}: converged after ${f((run.convergedMs ?? NaN) / 1000, 2)} s` +
          (run.stayS ? `, not converged for ${f(run.unconvergedMs ?? NaN, 0)} ms of the ${run.stayS} s after` : "") +
          `; ${run.errors} error events (target: converges, however slowly)${problems}`);
    }
  }

  // 5g. Many elections on one session per process (etcd v3).
  for (const run of results.sessions ?? []) {
    const where = `${run.elections} elections × ${run.processes} processes, one session each, TTL ${run.ttl} s`;
    const problems = run.failures.length ? `; ${run.failures.join("; ").slice(0, 200)}` : "";
    const ok = run.failures.length === 0;
    const idle = run.idle?.requestsPerProcessPerRefresh ?? NaN;
    // What a change costs is counted beyond the idle rate: only once the sessions are idle does it mean anything.
    const idled = idle <= 1.1;
    add(ok && idled,
      `sessions, ${where}: idle, etcd received ${f(idle, 2)} requests per process per refresh interval ` +
        `(${f(run.idle?.keepAlivesPerProcessPerRefresh ?? NaN, 2)} of them keep-alives; target ≤ 1.1)${problems}`);
    const heap = run.heapPerElectionKiB;
    add(ok && heap !== undefined && Math.max(heap.leading, heap.following) <= 5,
      `sessions, ${where}: heap per election ${f(heap?.leading ?? NaN, 2)} KiB in the leading process, ` +
        `${f(heap?.following ?? NaN, 2)} KiB in a following one (target ≤ 5 KiB)`);
    const change = run.change;
    // The election's own: the stop's deletion, the new leader's watch of its key, the other follower's new
    // watch and reads; none of the other elections' members sends anything (nor does the session).
    const byMethod = Object.entries(change?.excessByMethod ?? {}).map(([m, v]) => `${m} ${v}`).join(", ");
    add(ok && idled && change !== undefined && change.excessRequests <= 10,
      `sessions, ${where}: a change of leader in one election (stop → next elected ${f(change?.failoverMs ?? NaN)} ms) cost ` +
        `${f(change?.excessRequests ?? NaN, 1)} requests beyond the idle rate in the ${run.changeWindowS} s after (${byMethod || "none"}), ` +
        `whatever the number of elections (target ≤ 10: that election's own; measured against the idle rate, so only once idle)`);
    const clean = run.cleanClose;
    add(ok && clean !== undefined && clean.leaderless === 0 && clean.ms.n > 0 && clean.ms.max <= 250,
      `sessions, ${where}: the leading process closed its session: ${clean?.elections ?? 0} elections each had a new leader ` +
        `within a median ${f(clean?.ms.median ?? NaN)} ms, max ${f(clean?.ms.max ?? NaN)} ms` +
        `${clean?.leaderless ? `, ${clean.leaderless} without one` : ""} (target every election, ≤ 250 ms)` +
        (run.watchDelivery
          ? `; with nothing else running, etcd's last deletion of such a revoke reached one process ` +
            `${f(run.watchDelivery.perKeyWatchesMs.median)} ms after it was sent with one watch per election, ` +
            `${f(run.watchDelivery.rangeWatchMs.median)} ms with one watch over them all`
          : ""));
    const crash = run.crash;
    const crashLimit = run.ttl * 1000 + 1000;
    add(ok && crash !== undefined && crash.leaderless === 0 && crash.ms.n > 0 && crash.ms.max <= crashLimit,
      `sessions, ${where}: SIGKILL of the process leading ${crash?.elections ?? 0} elections: each had a new leader within ` +
        `a median ${f((crash?.ms.median ?? NaN) / 1000, 2)} s, max ${f((crash?.ms.max ?? NaN) / 1000, 2)} s` +
        `${crash?.leaderless ? `, ${crash.leaderless} without one` : ""} (target every election, ≤ TTL + 1 s = ${f(crashLimit / 1000, 1)} s)`);
    add(ok && run.overlaps === 0,
      `sessions, ${where}: ${run.overlaps} instants with two leaders of one election; every election settled ` +
        `${f((run.settledMs ?? NaN) / 1000, 2)} s after the first process started; ${run.errors} error events (target 0 instants)`);
  }

  // 5h. The drain before release: the successor's routine never starts before ours settled.
  for (const run of results.drain ?? []) {
    const info = subjectInfo(run.subject as SubjectId);
    if (!info.ours) continue;
    const t = run.trials;
    const overlaps = t.filter((x) => x.overlapMs > 0).length;
    const after = t.length ? summarize(t.map((x) => x.successorRoutineMs - x.settledMs)) : undefined;
    const gone = t.length ? summarize(t.map((x) => x.goneMs - x.settledMs)) : undefined;
    const problems = run.failures.length ? `; ${run.failures.join("; ").slice(0, 200)}` : "";
    add(t.length > 0 && run.failures.length === 0 && overlaps === 0,
      `drain, ${info.label}: the successor's routine started after ours settled in ${t.length - overlaps} of ${t.length} trials ` +
        `(0 overlaps is the target); ours settled → membership gone median ${f(gone?.median ?? NaN)} ms, → successor's routine ` +
        `median ${f(after?.median ?? NaN)} ms, max ${f(after?.max ?? NaN)} ms${problems}`);
  }

  // 6. Safety: zero instants with two leaders, every scenario.
  for (const o of ours) {
    const { instants, trials, longestMs } = safetyTotal(results, o.id);
    add(instants === 0 && trials > 0, `safety, ${o.label}: ${instants} instants with two leaders over ${trials} trials (longest ${f(longestMs, 0)} ms; target 0)`);
  }

  // 7. Partition. On etcd with 200 ms to spare; on PostgreSQL and Redis, before the successor at all.
  if (results.partition.length) {
    for (const o of oursPartitioned) {
      const r = results.partition.find((x) => x.subject === o.id);
      const trials = r?.trials ?? [];
      const margins = trials.map((t) => t.marginMs ?? NaN);
      const minMargin = storeOf(o) === "etcd" ? 200 : 0;
      const allMargins = trials.length > 0 && margins.every((v) => (minMargin ? v >= minMargin : v > 0));
      const rejoined = trials.filter((t) => t.rejoinMs !== undefined).length;
      const bad = r?.failures.length ?? 0;
      add(allMargins && bad === 0,
        `partition, ${o.label}: old leader stepped down ${minMargin ? `≥ ${minMargin} ms ` : ""}before a successor in every trial: ` +
          `margins ${margins.map((v) => f(v, 0)).join(", ")} ms${minMargin ? "" : " (target > 0)"}${bad ? `; ${bad} failed trials` : ""}`);
      // With the client the README recommends (the one every subject of ours uses here); polled every 200 ms.
      const rejoinMs = trials.filter((t) => t.rejoinMs !== undefined).map((t) => t.rejoinMs!);
      add(trials.length > 0 && rejoined === trials.length && bad === 0 && rejoinMs.every((v) => v <= REJOIN_TARGET_MS),
        `partition, ${o.label}: old leader rejoined as a follower after the heal in ${rejoined}/${trials.length} trials` +
          (rejoined ? ` (${rejoinMs.map((v) => f(v, 0)).join(", ")} ms after the heal)` : "") +
          ` (target: every trial, within ${REJOIN_TARGET_MS / 1000} s)`);
    }
  }
  return lines;
}

