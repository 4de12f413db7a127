// Many elections, one session per process: E elections (one key each), each
// with one member in each of three processes, every process's members on
// the one etcd v3 session (lease) of that process. The first process starts
// first and leads every election; the other two join behind it.
//
// Measured: the time until every election has its leader and two followers
// naming it; heap per election in a leading and a following process; what
// etcd receives while idle, per process per refresh interval (TTL/2); what a
// change of leader in one election costs etcd beyond that idle rate; then a
// clean close of the leading process's session (one LeaseRevoke), and the
// time until each election has a new leader; then SIGKILL of whichever
// remaining process leads most elections, and the same. Last, with the
// processes gone, the floor under the clean close: how soon etcd tells one
// process of a revoke's deletions (bench/watch-delivery.ts). Throughout, per
// election, any instant at which two members believed they led. Elections
// start in batches of 500, as docs/api.md advises.
import type { BenchContext } from "../context";
import { diffMetrics, readMetrics, type MetricsSnapshot } from "../etcd-metrics";
import { Host } from "../host";
import type { EventLine } from "../member-protocol";
import { SESSION_SUBJECT } from "../subjects/info";
import { errorMessage, now, sleep, tag, withDeadline } from "../util";
import { summarize, type Summary } from "../stats";
import { measureWatchDelivery, type WatchDelivery } from "../watch-delivery";
import { overlapStretches, type OverlapStretch } from "../../test/kit/leadership-history";

export interface SessionsCase {
  elections: number;
  /** Elections started together, each batch once the one before has settled. */
  batch: number;
  processes: number;
  ttl: number;
  /** Idle measurement window, seconds. */
  windowS: number;
  /** How long after a change in one election etcd's requests are counted, seconds. */
  changeWindowS: number;
  /** Revokes of as many keys as elections, per way of watching them, once the processes are gone. */
  deliveryTrials: number;
}

export interface Handover {
  /** Elections that had to find a new leader. */
  elections: number;
  /** Per election: from the close call (or the kill) until a member of another process said it leads. */
  ms: Summary;
  /** Elections without a new leader when the wait ended. */
  leaderless: number;
}

export interface SessionsRun extends SessionsCase {
  /** From the first process's start until every election had its leader and both followers naming it. */
  settledMs?: number;
  heapPerElectionKiB?: { leading: number; following: number };
  idle?: {
    seconds: number;
    refreshS: number;
    /** Everything etcd received (gRPC messages and streams opened), per process per refresh interval. */
    requestsPerProcessPerRefresh: number;
    keepAlivesPerProcessPerRefresh: number;
  };
  /** One election's leader stops: etcd's requests in the window after, beyond the idle rate. */
  change?: {
    failoverMs: number;
    requests: number;
    excessRequests: number;
    /** The excess by gRPC method (messages received, and streams opened as `<method> streams`), rounded. */
    excessByMethod: Record<string, number>;
  };
  cleanClose?: Handover;
  crash?: Handover;
  /** The floor under the clean close, measured alone once the member processes are gone. */
  watchDelivery?: WatchDelivery;
  /** Stretches of time in which two members of one election believed they led, by the events' own times. */
  overlaps: number;
  overlapExamples: Array<{ election: number } & OverlapStretch>;
  errors: number;
  failures: string[];
  messages: Record<string, number>;
}

/** One election as the benchmark sees it. */
interface Tracked {
  believers: Set<number>;
  /** Per process: since when its member has believed it leads (the event's own time), while it does. */
  since: Map<number, number>;
  /** Closed stretches of belief, with the events' own times: events of several processes arrive in any order. */
  terms: Array<{ member: string; start: number; end: number }>;
  /** Per process: the leader its member names. */
  named: Array<string | undefined>;
}

const memberName = (process: number, election: number) => `p${process}e${election}`;
const parseName = (name: string) => {
  const match = /^p(\d+)e(\d+)$/.exec(name);
  return match ? { process: Number(match[1]), election: Number(match[2]) } : undefined;
};

export async function runSessions(ctx: BenchContext, c: SessionsCase): Promise<SessionsRun> {
  const run: SessionsRun = { ...c, overlaps: 0, overlapExamples: [], errors: 0, failures: [], messages: {} };
  const scope = `sessions-${tag()}`;
  const keyOf = (e: number) => SESSION_SUBJECT.electionKey(`${scope}/e${e}`);
  const tracked: Tracked[] = Array.from({ length: c.elections }, () => ({ believers: new Set(), since: new Map(), terms: [], named: [] }));
  const endBelief = (t: Tracked, p: number, at: number) => {
    const start = t.since.get(p);
    if (start === undefined) return;
    t.since.delete(p);
    t.terms.push({ member: `p${p}`, start, end: at });
  };
  /** Times members of a process said they lead, per election, after `since`. */
  let electedLog: Array<{ process: number; election: number; at: number }> = [];
  const hosts: Host[] = [];
  const offs: Array<() => void> = [];

  const onEvent = (p: number) => (event: EventLine) => {
    if (event.type === "exit") {
      // A SIGKILLed process stops believing at the kill.
      const at = hosts[p]?.killedAt ?? event.at;
      for (const t of tracked) {
        t.believers.delete(p);
        endBelief(t, p, at);
      }
      return;
    }
    const who = event.name === undefined ? undefined : parseName(event.name);
    if (!who || who.process !== p) return;
    const t = tracked[who.election];
    if (!t) return;
    switch (event.type) {
      case "belief":
        if (event.on === true) {
          t.believers.add(p);
          if (!t.since.has(p)) t.since.set(p, event.at);
          electedLog.push({ process: p, election: who.election, at: event.at });
        } else {
          t.believers.delete(p);
          endBelief(t, p, event.at);
        }
        break;
      case "leader":
        t.named[p] = (event.leader as string | null) ?? undefined;
        break;
      case "error": {
        run.errors++;
        const message = `error: ${String(event.message)}`.replace(/\d+/g, "#").slice(0, 160);
        run.messages[message] = (run.messages[message] ?? 0) + 1;
        break;
      }
    }
  };

  const waitUntil = async (what: string, check: () => boolean, timeoutMs: number) => {
    const deadline = now() + timeoutMs;
    while (!check()) {
      if (now() > deadline) throw new Error(`timed out after ${(timeoutMs / 1000).toFixed(0)} s waiting for ${what}`);
      await sleep(20);
    }
    return now();
  };

  /** Elections whose leader was in `gone` get a new one: per election, the time from `t0` to it. */
  const handover = async (gone: number, led: number[], t0: number, timeoutMs: number): Promise<Handover> => {
    await waitUntil(`a new leader in each of ${led.length} elections`, () => led.every((e) => {
      const b = tracked[e]!.believers;
      return b.size > 0 && !b.has(gone);
    }), timeoutMs).catch(() => undefined);
    const first = new Map<number, number>();
    for (const entry of electedLog) {
      if (entry.process !== gone && entry.at >= t0 && !first.has(entry.election)) first.set(entry.election, entry.at);
    }
    const ms = led.flatMap((e) => (first.has(e) ? [first.get(e)! - t0] : []));
    return { elections: led.length, ms: summarize(ms), leaderless: led.length - ms.length };
  };

  try {
    // One member process per session; belief sampled every 100 ms: ten thousand isLeader() calls per sweep.
    hosts.push(...(await Promise.all(Array.from({ length: c.processes }, () => Host.spawn(SESSION_SUBJECT.id, [ctx.etcdUrl], 100)))));
    hosts.forEach((host, p) => offs.push(host.onEvent(onEvent(p))));
    const before = await Promise.all(hosts.map(async (host) => {
      await host.request("init");
      return host.request("stats", { gc: true }, 60_000);
    }));
    for (const [p, host] of hosts.entries()) {
      const members = Array.from({ length: c.elections }, (_, e) => ({ key: keyOf(e), name: memberName(p, e), ttl: c.ttl }));
      await host.request("add", { members }, 120_000);
    }
    // In batches, each once the one before has settled, as docs/api.md advises: ten thousand elections
    // started on one session in the same moment do not settle (see there).
    const followers = hosts.map((_, p) => p).slice(1);
    const range = (from: number) => Array.from({ length: Math.min(c.batch, c.elections - from) }, (_, i) => from + i);
    const perBatch = 5_000 + c.batch * 20;
    let tStart = NaN;
    for (let from = 0; from < c.elections; from += c.batch) {
      const batch = range(from);
      const at = (await hosts[0]!.request("start", { names: batch.map((e) => memberName(0, e)) })).at as number;
      if (from === 0) tStart = at;
      await waitUntil(`the first process to lead elections ${from} to ${from + batch.length - 1}`, () => batch.every((e) => tracked[e]!.believers.has(0)), perBatch);
    }
    const short = (batch: number[]) => batch.filter((e) => followers.some((p) => tracked[e]!.named[p] !== memberName(0, e))).length;
    let settled = NaN;
    for (let from = 0; from < c.elections; from += c.batch) {
      const batch = range(from);
      await Promise.all(followers.map((p) => hosts[p]!.request("start", { names: batch.map((e) => memberName(p, e)) })));
      settled = await waitUntil(`the followers of elections ${from} to ${from + batch.length - 1} to name the leader`, () => short(batch) === 0, perBatch).catch(
        (err: unknown) => {
          throw new Error(`${errorMessage(err)} (${short(batch)} elections short)`);
        },
      );
    }
    run.settledMs = settled - tStart;

    // Keep-alive streams and watches open up to TTL/8 after the last join: wait past that.
    await sleep((c.ttl * 1000) / 8 + 1000);
    const after = await Promise.all(hosts.slice(0, 2).map((host) => host.request("stats", { gc: true }, 60_000)));
    const heap = (i: number) => ((after[i]!.heapUsed as number) - (before[i]!.heapUsed as number)) / c.elections / 1024;
    run.heapPerElectionKiB = { leading: heap(0), following: heap(1) };

    const refreshS = c.ttl / 2;
    const idleFrom: MetricsSnapshot = await readMetrics(ctx.etcdUrl);
    await sleep(c.windowS * 1000);
    const idleDelta = diffMetrics(await readMetrics(ctx.etcdUrl), idleFrom);
    const streams = (idleDelta.started.Watch ?? 0) + (idleDelta.started.LeaseKeepAlive ?? 0);
    const idleRequests = idleDelta.receivedTotal + streams;
    const periods = idleDelta.seconds / refreshS;
    run.idle = {
      seconds: idleDelta.seconds,
      refreshS,
      requestsPerProcessPerRefresh: idleRequests / c.processes / periods,
      keepAlivesPerProcessPerRefresh: (idleDelta.received.LeaseKeepAlive ?? 0) / c.processes / periods,
    };

    // A change of leader in election 0: its leader stops; what does etcd receive beyond the idle rate?
    const changeFrom = await readMetrics(ctx.etcdUrl);
    const stopAt = (await hosts[0]!.request("stop", { name: memberName(0, 0) })).at as number;
    await waitUntil("election 0's successor", () => tracked[0]!.believers.size > 0 && !tracked[0]!.believers.has(0), 10_000);
    const successorAt = electedLog.find((x) => x.election === 0 && x.process !== 0 && x.at >= stopAt)?.at ?? NaN;
    const windowEnd = stopAt + c.changeWindowS * 1000;
    if (now() < windowEnd) await sleep(windowEnd - now());
    const changeDelta = diffMetrics(await readMetrics(ctx.etcdUrl), changeFrom);
    const changeRequests = changeDelta.receivedTotal + (changeDelta.started.Watch ?? 0) + (changeDelta.started.LeaseKeepAlive ?? 0);
    const scale = changeDelta.seconds / idleDelta.seconds;
    const excessByMethod: Record<string, number> = {};
    const methods = new Set([...Object.keys(changeDelta.received), ...Object.keys(idleDelta.received)]);
    for (const m of methods) {
      const excess = Math.round((changeDelta.received[m] ?? 0) - (idleDelta.received[m] ?? 0) * scale);
      if (excess !== 0) excessByMethod[m] = excess;
    }
    for (const m of ["Watch", "LeaseKeepAlive"]) {
      const excess = Math.round((changeDelta.started[m] ?? 0) - (idleDelta.started[m] ?? 0) * scale);
      if (excess !== 0) excessByMethod[`${m} streams`] = excess;
    }
    run.change = {
      failoverMs: successorAt - stopAt,
      requests: changeRequests,
      excessRequests: changeRequests - idleRequests * scale,
      excessByMethod,
    };

    // A clean close of the first process's session: one revoke hands every election it leads over.
    const ledByFirst = tracked.flatMap((t, e) => (t.believers.has(0) ? [e] : []));
    electedLog = [];
    const closeAt = (await hosts[0]!.request("release", {}, 30_000)).at as number;
    run.cleanClose = await handover(0, ledByFirst, closeAt, 10_000);

    // SIGKILL of the process that now leads most elections.
    const counts = hosts.map((_, p) => tracked.filter((t) => t.believers.has(p)).length);
    const victim = counts.indexOf(Math.max(...counts.slice(1)), 1);
    const ledByVictim = tracked.flatMap((t, e) => (t.believers.has(victim) ? [e] : []));
    electedLog = [];
    const killedAt = hosts[victim]!.kill();
    for (const t of tracked) {
      t.believers.delete(victim);
      endBelief(t, victim, killedAt);
    }
    run.crash = await handover(victim, ledByVictim, killedAt, c.ttl * 1000 + 10_000);
  } catch (err) {
    run.failures.push(errorMessage(err).slice(0, 400));
  } finally {
    const end = now();
    for (const t of tracked) {
      for (const p of [...t.since.keys()]) endBelief(t, p, end);
      const stretches = overlapStretches(t.terms);
      run.overlaps += stretches.length;
      for (const s of stretches) if (run.overlapExamples.length < 10) run.overlapExamples.push({ election: tracked.indexOf(t), ...s });
    }
    for (const off of offs) off();
    await Promise.all(hosts.map((host) => withDeadline(host.shutdown(60_000), 70_000, "closing a session process").catch(() => undefined)));
  }
  if (c.deliveryTrials > 0) {
    run.watchDelivery = await measureWatchDelivery(ctx.etcdUrl, c.elections, c.deliveryTrials).catch((err: unknown) => {
      run.failures.push(`watch delivery: ${errorMessage(err).slice(0, 200)}`);
      return undefined;
    });
  }
  return run;
}
