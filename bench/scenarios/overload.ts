// Overload: many members that all start at the same instant, at a TTL short
// enough that their joins and renewals are more than one process (and etcd on
// the same two cores) can answer within the request timeout if sent at once.
// Does the election slow down and converge, or do timeouts and retries feed
// each other (a metastable failure)? Per case: from the start until one member
// leads and every other one follows some leader, and until every member names
// the leader; then, for a window, how much of it the election was not
// converged, how often the leader changed, and the error events from the
// start on; and what etcd received meanwhile, per member.
//
// A case's members run in `processes` member processes (bench/member-process.ts),
// each member with its own client, as in the scale scenario.
import type { BenchContext } from "../context";
import { diffMetrics, readMetrics } from "../etcd-metrics";
import { Host } from "../host";
import type { SubjectInfo } from "../subjects/types";
import { Trial } from "../trial";
import { errorMessage, now, sleep, tag } from "../util";
import { addSafety, emptySafety, tally, type SafetySummary } from "../tallies";
import { diffCounts, totalOf } from "../../test/kit/counting-proxy";
import { spawnScaleHost } from "./scale";

export interface OverloadCase {
  n: number;
  processes: number;
  ttl: number;
  /** How long the election is watched once converged. 0: not watched. */
  stayS: number;
  /** Give up waiting for convergence after this long. */
  convergeTimeoutS: number;
}

export interface OverloadRun extends OverloadCase {
  subject: string;
  /** Start → one leader and every other member following some leader. */
  convergedMs?: number;
  /** Start → every member naming the leader (within 5 s of convergence). */
  settledMs?: number;
  /** Over the window after convergence, sampled every 100 ms: how long it was not converged. */
  unconvergedMs?: number;
  /** `elected` events after convergence, within the window. */
  leaderChanges?: number;
  /** Error events from the start to the end of the window. */
  errors: number;
  /** What etcd received from the start to the end of the window, per member: v3 gRPC messages and streams, v2 HTTP requests. */
  requestsPerMember?: number;
  /** v3: lease grants per member (one per join sent; a join given up at its timeout costs another). */
  grantsPerMember?: number;
  failures: string[];
  safety: SafetySummary;
  messages: Record<string, number>;
}

interface StoreCount {
  requests: number;
  grants?: number;
}

async function countStore(ctx: BenchContext, subject: SubjectInfo): Promise<() => Promise<StoreCount>> {
  if (subject.api === "v2") {
    const before = ctx.countingProxy.snapshot();
    return async () => ({ requests: totalOf(diffCounts(ctx.countingProxy.snapshot(), before)) });
  }
  const before = await readMetrics(ctx.etcdUrl);
  return async () => {
    const d = diffMetrics(await readMetrics(ctx.etcdUrl), before);
    const streams = (d.started.Watch ?? 0) + (d.started.LeaseKeepAlive ?? 0);
    return { requests: d.receivedTotal + streams, grants: d.received.LeaseGrant ?? 0 };
  };
}

export async function runOverload(ctx: BenchContext, subject: SubjectInfo, c: OverloadCase): Promise<OverloadRun> {
  const run: OverloadRun = { ...c, subject: subject.id, errors: 0, failures: [], safety: emptySafety(), messages: {} };
  const perProcess = Math.ceil(c.n / c.processes);
  const hosts: Host[] = [];
  const trial = new Trial(`${subject.id} overload N=${c.n} TTL ${c.ttl} s`, false);
  try {
    hosts.push(...(await Promise.all(Array.from({ length: c.processes }, () => spawnScaleHost(ctx, subject, perProcess)))));
    const key = subject.electionKey(`overload/${c.n}-${c.ttl}-${tag()}`);
    const groups = hosts.map((_, p) =>
      Array.from({ length: Math.min(perProcess, c.n - p * perProcess) }, (__, j) => `o${c.n}p${p}m${String(j).padStart(4, "0")}`),
    );
    for (const [p, host] of hosts.entries()) {
      trial.attach(host, groups[p]!);
      await host.request("init");
      await host.request("add", { members: groups[p]!.map((name) => ({ key, name, ttl: c.ttl })) }, 60_000);
    }
    const counted = await countStore(ctx, subject);
    // Every process starts all of its members in one go.
    const starts = await Promise.all(hosts.map((host) => host.request("start", { spreadMs: 0 })));
    const tStart = Math.min(...starts.map((s) => s.at as number));
    const converged = await trial.waitFor("one leader, every other member following", () => trial.ready(), c.convergeTimeoutS * 1000);
    run.convergedMs = converged.t - tStart;
    const settled = await trial.waitFor("every member naming the leader", () => trial.settled(), 5_000).catch(() => undefined);
    if (settled) run.settledMs = settled.t - tStart;

    if (c.stayS > 0) {
      const from = now();
      let unconverged = 0;
      let last = from;
      while (now() - from < c.stayS * 1000) {
        await sleep(100);
        const t = now();
        if (!trial.ready()) unconverged += t - last;
        last = t;
      }
      run.unconvergedMs = unconverged;
      run.leaderChanges = trial.events.filter((e) => e.type === "elected" && e.at > converged.t).length;
    }
    const count = await counted();
    run.requestsPerMember = count.requests / c.n;
    if (count.grants !== undefined) run.grantsPerMember = count.grants / c.n;
  } catch (err) {
    run.failures.push(`${errorMessage(err)}; ${trial.describe()}`.slice(0, 400));
  } finally {
    run.errors = trial.errorCount();
    addSafety(run.safety, trial.safety());
    tally(run.messages, trial);
    trial.dispose();
    await Promise.all(hosts.map((host) => host.shutdown(60_000).catch(() => undefined)));
  }
  return run;
}
