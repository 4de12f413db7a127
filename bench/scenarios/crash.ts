// 2. Crash failover: three members, each in its own process, TTL 2 s; the
// leader's process is SIGKILLed at a random point of its renewal cycle; time
// from the kill to the next `elected`; and, on etcd, when the killed leader's
// key was removed (bench/key-removal.ts), which splits that time into the
// store's part and the library's.
import { storeHosts, type BenchContext } from "../context";
import { watchRemoval } from "../key-removal";
import { Host, spawnHosts } from "../host";
import type { SubjectInfo } from "../subjects/types";
import { runTrials } from "../trial";
import { sleep, tag, uniform } from "../util";
import { emptySafety, type Failure, type SafetySummary } from "../tallies";

export interface CrashResult {
  subject: string;
  failoverMs: number[];
  /** etcd only, per trial where it was seen: from the kill to the removal of the killed leader's key arriving at an independent watch. */
  keyGoneMs: number[];
  /** The same trials: from that arrival to the next `elected`, what the library adds to the store's physics. */
  reactionMs: number[];
  failures: Failure[];
  /** Followers that named another member than the one leading, just before the leader was stopped or killed. */
  wrongLeaderNamed: number;
  safety: SafetySummary;
  messages: Record<string, number>;
}

/**
 * Every member process a subject's crash trials will need (three, and one to
 * replace each killed leader), started before any trial so that no process
 * start competes for the CPU while failovers (or the concurrent partition
 * trials) are timed.
 */
export async function prepareCrash(ctx: BenchContext, subject: SubjectInfo): Promise<Host[]> {
  const hosts = await spawnHosts(subject.id, storeHosts(ctx, subject), 2 + ctx.params.crash.trials, 5);
  await Promise.all(hosts.map((h) => h.request("init")));
  return hosts;
}

export async function runCrash(ctx: BenchContext, subject: SubjectInfo, pool: Host[]): Promise<CrashResult> {
  const { ttl } = ctx.params;
  const { trials, budgetS } = ctx.params.crash;
  const result: CrashResult = {
    subject: subject.id, failoverMs: [], keyGoneMs: [], reactionMs: [], failures: [], wrongLeaderNamed: 0, safety: emptySafety(), messages: {},
  };
  const spare = [...pool];
  const take = async (): Promise<Host> => {
    const next = spare.shift();
    if (next?.alive) return next;
    const host = await Host.spawn(subject.id, storeHosts(ctx, subject), 5);
    await host.request("init");
    return host;
  };
  let hosts: Host[] = [await take(), await take(), await take()];
  await runTrials({
    label: `${subject.id} crash`,
    trials,
    budgetS,
    book: result,
    close: async () => void (await Promise.all([...hosts, ...spare].map((h) => h.shutdown()))),
    async run(trial, i, release) {
      const key = subject.electionKey(`crash/${i}-${tag()}`);
      const names = ["a", "b", "c"].map((s) => `k${i}${s}`);
      hosts.forEach((h, j) => trial.attach(h, [names[j]!]));
      let victim: Host | undefined;
      // The survivors leave; the killed process is replaced, so the next trial has three again.
      release(async () => {
        const survivors = hosts.filter((h) => h !== victim && h.alive);
        await Promise.all(survivors.map((h) => h.request("close", {}, 20_000).catch(() => undefined)));
        for (const h of hosts) if (!survivors.includes(h)) await h.shutdown();
        const fresh: Host[] = [];
        while (survivors.length + fresh.length < 3) fresh.push(await take());
        hosts = [...survivors, ...fresh];
      });
      await Promise.all(hosts.map((h, j) => h.request("add", { members: [{ key, name: names[j], ttl }] })));
      await Promise.all(hosts.map((h) => h.request("start")));
      await trial.waitFor("one leader, the others following", () => trial.ready(), 10_000);
      // A random point in the leader's renewal cycle (every subject renews at least every TTL/2).
      await sleep(500 + uniform(0, (ttl * 1000) / 2));
      const settled = trial.ready();
      if (!settled) throw new Error(`the election did not stay settled: ${trial.describe()}`);
      result.wrongLeaderNamed += settled.wrong;
      victim = trial.members.get(settled.leader)!.host;
      const removal = await watchRemoval(ctx, subject, key);
      let successor: string;
      try {
        const tKill = victim.kill();
        trial.killed(settled.leader, tKill);
        const next = await trial.waitFor("the next elected", () => trial.electedAfter(tKill, settled.leader), 3 * ttl * 1000 + 8000);
        result.failoverMs.push(next.t - tKill);
        successor = next.name;
        // The successor and this watch hear of the removal from the same etcd
        // at about the same moment.
        for (let waited = 0; removal && removal.seenAt === undefined && waited < 1000; waited += 10) await sleep(10);
        if (removal?.seenAt !== undefined) {
          result.keyGoneMs.push(removal.seenAt - tKill);
          result.reactionMs.push(next.t - removal.seenAt);
        }
      } finally {
        removal?.close();
      }
      await trial
        .waitFor("the other member knowing the successor", () => {
          const s = trial.settled();
          return s && s.leader === successor ? s : undefined;
        }, 2 * ttl * 1000)
        .catch(() => undefined);
    },
  });
  return result;
}
