// 8. Step-down under a partition. The first member reaches the store (etcd,
// PostgreSQL or Redis) through a TCP proxy of its own and becomes leader; two
// more join directly. At a random point of the leader's renewal cycle the
// proxy goes silent (a black hole, not a reset). Measured: cut -> the old
// leader stops believing it leads, cut -> a successor's `elected`, and the
// margin between the two (positive: the old leader let go first). Then the
// proxy heals and the old leader must rejoin as a follower: running, not
// leading, naming the successor (where its library names leaders), and, on
// etcd, holding a membership again (on PostgreSQL and Redis a follower holds
// nothing in the store).
import { storeHosts, storeMemberCount, throughProxy, type BenchContext } from "../context";
import { Host } from "../host";
import { FaultProxy } from "../../test/kit/fault-proxy";
import { storeOf, type SubjectInfo } from "../subjects/types";
import { runTrials } from "../trial";
import { now, sleep, tag, uniform } from "../util";
import { emptySafety, type Failure, type SafetySummary } from "../tallies";

export interface PartitionTrial {
  trial: number;
  /** Cut -> the old leader's belief ended; undefined if it never did before the deadline. */
  stepDownMs?: number;
  /** Cut -> a successor's `elected`. */
  successorMs?: number;
  /** successor - step-down; negative means two leaders at once. */
  marginMs?: number;
  /** Heal -> the old leader is a follower again; undefined if not within the deadline. */
  rejoinMs?: number;
  /** Why it did not rejoin, if it did not. */
  rejoinProblem?: string;
  oldLeaderErrors: string[];
  /** Every election event of the three members, ms from the cut (first 80). */
  timeline: string[];
}

export interface PartitionResult {
  subject: string;
  trials: PartitionTrial[];
  failures: Failure[];
  safety: SafetySummary;
  messages: Record<string, number>;
}

const STEP_DEADLINE_S = 15;
const REJOIN_DEADLINE_S = 8;
/**
 * How often the rejoin is checked (the member's state, then a read of etcd):
 * a rejoin is reported up to this much, plus one check, after it happened.
 */
const REJOIN_POLL_MS = 20;

/** The member process for a subject's partition trials, started before any trial. */
export async function preparePartition(ctx: BenchContext, subject: SubjectInfo): Promise<Host> {
  const host = await Host.spawn(subject.id, storeHosts(ctx, subject), 5);
  await host.request("init");
  return host;
}

export async function runPartition(ctx: BenchContext, subject: SubjectInfo, host: Host): Promise<PartitionResult> {
  const { ttl } = ctx.params;
  const { trials, budgetS } = ctx.params.partition;
  const result: PartitionResult = { subject: subject.id, trials: [], failures: [], safety: emptySafety(), messages: {} };
  const onEtcd = storeOf(subject) === "etcd";
  await runTrials({
    label: `${subject.id} partition`,
    trials,
    budgetS,
    book: result,
    continueAfterFailure: () => host.alive,
    close: () => host.shutdown(),
    async run(trial, i, release) {
      const storeUrl = storeHosts(ctx, subject)[0]!;
      const proxy = await FaultProxy.start({ upstream: new URL(storeUrl).host });
      const proxied = onEtcd ? proxy.url : throughProxy(storeUrl, proxy.hostPort);
      const key = subject.electionKey(`partition/${i}-${tag()}`);
      const [a, b, c] = ["a", "b", "c"].map((s) => `p${i}${s}`) as [string, string, string];
      trial.attach(host, [a, b, c]);
      release(async () => {
        await host.request("close", { names: [a, b, c] }, 20_000).catch(() => undefined);
        await proxy.close();
      });
      await host.request("add", { members: [{ key, name: a, ttl, hosts: [proxied] }] });
      await host.request("start", { names: [a] });
      await trial.waitFor("the proxied member elected", () => (trial.members.get(a)!.believes ? true : undefined), 10_000);
      await host.request("add", { members: [b, c].map((name) => ({ key, name, ttl })) });
      await host.request("start", { names: [b, c] });
      await trial.waitFor("the others following", () => {
        const s = trial.ready();
        return s?.leader === a ? s : undefined;
      }, 10_000);
      // A random point in the leader's renewal cycle (every subject renews at least every TTL/2).
      await sleep(500 + uniform(0, (ttl * 1000) / 2));
      if (trial.ready()?.leader !== a) throw new Error(`the election did not stay settled: ${trial.describe()}`);

      const tCut = now();
      proxy.setMode("blackhole");
      const outcome: PartitionTrial = { trial: i, oldLeaderErrors: [], timeline: [] };
      const stepDownAt = () => trial.transitions.find((t) => t.name === a && !t.on && t.t >= tCut)?.t;
      const successor = () => trial.electedAfter(tCut, a);
      await trial
        .waitFor("the old leader stepping down and a successor elected", () => {
          return stepDownAt() !== undefined && successor() !== undefined ? true : undefined;
        }, STEP_DEADLINE_S * 1000)
        .catch(() => undefined);
      const down = stepDownAt();
      const next = successor();
      if (down !== undefined) outcome.stepDownMs = down - tCut;
      if (next) outcome.successorMs = next.t - tCut;
      if (down !== undefined && next) outcome.marginMs = next.t - down;
      // Still believing at the deadline: the margin is at most this.
      else if (next && trial.members.get(a)!.believes) outcome.marginMs = next.t - now();

      await sleep(500);
      const tHeal = now();
      proxy.heal();
      if (next) {
        const rejoinDeadline = tHeal + REJOIN_DEADLINE_S * 1000;
        let problem = "";
        while (now() < rejoinDeadline) {
          const state = ((await host.request("running")).state as Record<string, { running: boolean; leader: boolean }>)[a];
          const member = trial.members.get(a)!;
          const count = onEtcd ? await storeMemberCount(ctx, subject, subject.storePrefix(key)).catch(() => -1) : 3;
          if (!state?.running) problem = "the old leader stopped running (it gave up after an error)";
          else if (state.leader) problem = "the old leader still believes it leads";
          else if (member.namesLeader && member.knownLeader !== next.name) problem = `the old leader names ${member.knownLeader ?? "nobody"} as leader`;
          else if (count !== 3) problem = `etcd holds ${count} members, not 3`;
          else {
            outcome.rejoinMs = now() - tHeal;
            problem = "";
            break;
          }
          await sleep(REJOIN_POLL_MS);
        }
        if (outcome.rejoinMs === undefined) outcome.rejoinProblem = problem || "deadline";
      } else {
        outcome.rejoinProblem = "no successor was elected, so no rejoin to check";
      }
      outcome.oldLeaderErrors = trial.members.get(a)!.errors.slice(0, 5);
      outcome.timeline = trial.events
        .filter((e) => e.type !== "belief")
        .slice(0, 80)
        .map((e) => `${(e.at - tCut).toFixed(0)} ${e.name} ${e.type}${e.leader !== undefined ? ` ${String(e.leader)}` : ""}${e.message ? ` ${String(e.message).slice(0, 80)}` : ""}`);
      outcome.timeline.push(`${(tHeal - tCut).toFixed(0)} heal`);
      result.trials.push(outcome);
    },
  });
  return result;
}
