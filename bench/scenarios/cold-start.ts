// 6. Cold start: N members in one process started at the same moment; time
// until exactly one leads and every other one knows its name.
// 5. Then, with the same members (no proxy in the way), leader changes: the
// leader stops and every follower's delay until it names the successor.
import { storeHosts, type BenchContext } from "../context";
import { Host } from "../host";
import type { SubjectInfo } from "../subjects/types";
import { runTrials } from "../trial";
import { errorMessage, sleep, tag, uniform } from "../util";
import { leaderChange, type LeaderChange } from "./common";
import { emptySafety, type Failure, type SafetySummary } from "../tallies";

export interface ColdStartResult {
  subject: string;
  n: number;
  settleMs: number[];
  /** From start until one member leads and every other one names some leader (right or wrong). */
  readyMs: number[];
  /** From start to the first `elected`. */
  firstElectedMs: number[];
  /** Leader changes after the cold start (scenario 5). */
  changes: LeaderChange[];
  failures: Failure[];
  safety: SafetySummary;
  messages: Record<string, number>;
}

export async function runColdStart(ctx: BenchContext, subject: SubjectInfo): Promise<ColdStartResult> {
  const { ttl } = ctx.params;
  const { n, trials, budgetS } = ctx.params.coldStart;
  const result: ColdStartResult = {
    subject: subject.id, n, settleMs: [], readyMs: [], firstElectedMs: [], changes: [], failures: [], safety: emptySafety(), messages: {},
  };
  const host = await Host.spawn(subject.id, storeHosts(ctx, subject), 5);
  await runTrials({
    label: `${subject.id} cold start`,
    trials,
    budgetS,
    book: result,
    continueAfterFailure: () => host.alive,
    prepare: () => host.request("init"),
    close: () => host.shutdown(),
    async run(trial, i, release) {
      const key = subject.electionKey(`cold/${i}-${tag()}`);
      const names = Array.from({ length: n }, (_, j) => `s${i}m${String(j).padStart(4, "0")}`);
      trial.attach(host, names);
      release(() => host.request("close", { names }, 30_000).catch(() => undefined));
      await host.request("add", { members: names.map((name) => ({ key, name, ttl })) });
      const started = await host.request("start");
      const tStart = started.at as number;
      const ready = await trial.waitFor("one leader, every other member following someone", () => trial.ready(), 15_000);
      result.readyMs.push(ready.t - tStart);
      result.firstElectedMs.push((trial.electedAfter(tStart)?.t ?? NaN) - tStart);
      try {
        const settled = await trial.waitFor("every member naming the leader", () => trial.settled(), ctx.params.quick ? 1500 : 2 * ttl * 1000);
        result.settleMs.push(settled.t - tStart);
      } catch (err) {
        // Reported as a failed cold start; the leader changes are still measured.
        result.failures.push({ trial: i, reason: errorMessage(err) });
      }
      for (let c = 0; c < ctx.params.coldStart.changes; c++) {
        // A random point of the members' renewal cycle.
        await sleep(200 + uniform(0, (ttl * 1000) / 2));
        result.changes.push(await leaderChange(trial, host, ctx.params.quick ? ttl * 1000 : ttl * 1000 + 1000));
      }
      // Let late elections (a second leader) show up before judging safety.
      await sleep(300);
    },
  });
  return result;
}
