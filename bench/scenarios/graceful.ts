// 1. Graceful failover: three members in one process, TTL 2 s; the leader
// stops (stop() / resign()); time from that call to the next `elected`.
import { storeHosts, type BenchContext } from "../context";
import { Host } from "../host";
import type { SubjectInfo } from "../subjects/types";
import { runTrials } from "../trial";
import { sleep, tag, uniform } from "../util";
import { emptySafety, type Failure, type SafetySummary } from "../tallies";

export interface GracefulResult {
  subject: string;
  failoverMs: number[];
  failures: Failure[];
  /** Followers that named another member than the one leading, just before the leader was stopped or killed. */
  wrongLeaderNamed: number;
  safety: SafetySummary;
  messages: Record<string, number>;
}

export async function runGraceful(ctx: BenchContext, subject: SubjectInfo): Promise<GracefulResult> {
  const { ttl } = ctx.params;
  const result: GracefulResult = {
    subject: subject.id, failoverMs: [], failures: [], wrongLeaderNamed: 0, safety: emptySafety(), messages: {},
  };
  const host = await Host.spawn(subject.id, storeHosts(ctx, subject), 5);
  await runTrials({
    label: `${subject.id} graceful`,
    trials: ctx.params.graceful.trials,
    budgetS: ctx.params.graceful.budgetS,
    book: result,
    continueAfterFailure: () => host.alive,
    prepare: () => host.request("init"),
    close: () => host.shutdown(),
    async run(trial, i, release) {
      const key = subject.electionKey(`graceful/${i}-${tag()}`);
      const names = ["a", "b", "c"].map((s) => `g${i}${s}`);
      trial.attach(host, names);
      release(() => host.request("close", { names }, 20_000).catch(() => undefined));
      await host.request("add", { members: names.map((name) => ({ key, name, ttl })) });
      await host.request("start");
      await trial.waitFor("one leader, the others following", () => trial.ready(), 10_000);
      await sleep(uniform(100, 500));
      const settled = trial.ready();
      if (!settled) throw new Error(`the election did not stay settled: ${trial.describe()}`);
      result.wrongLeaderNamed += settled.wrong;
      const stopped = await host.request("stop", { name: settled.leader });
      const tStop = stopped.at as number;
      trial.markGone(settled.leader);
      const next = await trial.waitFor("the next elected", () => trial.electedAfter(tStop, settled.leader), 10_000);
      result.failoverMs.push(next.t - tStop);
      await sleep(50);
    },
  });
  return result;
}
