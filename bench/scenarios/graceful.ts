// 1. Graceful failover: three members in one process, TTL 2 s; the leader
// stops (stop() / resign()); time from that call to the next `elected`.
import { storeHosts, type BenchContext } from "../context";
import { Host } from "../host";
import type { SubjectInfo } from "../subjects/types";
import { Trial } from "../trial";
import { errorMessage, now, sleep, tag, uniform } from "../util";
import { addSafety, emptySafety, tally, type Failure, type SafetySummary } from "./common";

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
  const began = now();
  try {
    await host.request("init");
    for (let i = 1; i <= ctx.params.graceful.trials; i++) {
      if ((now() - began) / 1000 > ctx.params.graceful.budgetS) {
        result.failures.push({ trial: i, reason: `time budget of ${ctx.params.graceful.budgetS} s used up; trials ${i}.. not run` });
        break;
      }
      const key = subject.electionKey(`graceful/${i}-${tag()}`);
      const names = ["a", "b", "c"].map((s) => `g${i}${s}`);
      const trial = new Trial(`${subject.id} graceful ${i}`);
      trial.attach(host, names);
      try {
        await host.request("add", { members: names.map((name) => ({ key, name, ttl })) });
        await host.request("start");
        await trial.waitFor("one leader, the others following", () => trial.ready(), 10_000);
        await sleep(uniform(100, 500));
        const settled = trial.ready();
        if (!settled) throw new Error(`the election did not stay settled: ${trial.describe()}`);
        result.wrongLeaderNamed += settled.wrong;
        const stopped = await host.request("stop", { name: settled.leader });
        const tStop = stopped.t as number;
        trial.markGone(settled.leader);
        const next = await trial.waitFor("the next elected", () => trial.electedAfter(tStop, settled.leader), 10_000);
        result.failoverMs.push(next.t - tStop);
        await sleep(50);
        addSafety(result.safety, trial.safety());
      } catch (err) {
        result.failures.push({ trial: i, reason: errorMessage(err) });
        addSafety(result.safety, trial.safety());
        if (!host.alive) break;
      } finally {
        tally(result.messages, trial);
        trial.dispose();
        await host.request("close", { names }, 20_000).catch(() => undefined);
      }
    }
  } finally {
    await host.shutdown();
  }
  return result;
}
