// NATS idle load: N members of one election in one process, each on its own
// NATS connection, settled; over a window, the messages each member's
// connection sent to nats-server and received from it, per member per
// second, read from the server's own per-connection counters (/connz: a
// client's in_msgs are what it published, out_msgs what it was delivered),
// the leader apart from the followers. Pings and other protocol lines are not
// messages and are not counted.
import type { BenchContext } from "../context";
import { storeHosts } from "../context";
import { Host } from "../host";
import type { SubjectInfo } from "../subjects/types";
import { Trial } from "../trial";
import { errorMessage, sleep, tag } from "../util";
import { addSafety, emptySafety, tally, type SafetySummary } from "../tallies";

export interface NatsIdleRun {
  subject: string;
  n: number;
  seconds: number;
  /** Per member per second: what followers and the leader sent (published) and received (were delivered). */
  followerSent?: number;
  followerReceived?: number;
  leaderSent?: number;
  leaderReceived?: number;
  failures: string[];
  safety: SafetySummary;
  messages: Record<string, number>;
}

interface Connz {
  connections?: Array<{ cid: number; name?: string; in_msgs: number; out_msgs: number }>;
}

async function connz(ctx: BenchContext): Promise<Map<string, { sent: number; received: number }>> {
  const res = await fetch(`${ctx.natsMonitorUrl}/connz?limit=100000`, { signal: AbortSignal.timeout(5_000) });
  const body = (await res.json()) as Connz;
  const byName = new Map<string, { sent: number; received: number }>();
  for (const c of body.connections ?? []) if (c.name) byName.set(c.name, { sent: c.in_msgs, received: c.out_msgs });
  return byName;
}

export async function runNatsIdle(ctx: BenchContext, subject: SubjectInfo, n: number): Promise<NatsIdleRun> {
  const p = ctx.params.scale;
  const run: NatsIdleRun = { subject: subject.id, n, seconds: p.windowS, failures: [], safety: emptySafety(), messages: {} };
  const host = await Host.spawn(subject.id, storeHosts(ctx, subject), 20);
  const key = subject.electionKey(`idle/${n}-${tag()}`);
  const names = Array.from({ length: n }, (_, j) => `i${n}m${String(j).padStart(4, "0")}`);
  const trial = new Trial(`${subject.id} idle N=${n}`);
  trial.attach(host, names);
  try {
    await host.request("init");
    await host.request("add", { members: names.map((name) => ({ key, name, ttl: p.ttl })) }, 60_000);
    await host.request("start", { spreadMs: p.spreadMs });
    const settled = await trial.waitFor("every member naming the leader", () => trial.settled(), p.spreadMs + 30_000);
    // A whole renewal interval and more, so that every member is in its steady state.
    await sleep((p.ttl * 1000) / 2 + p.extraSettleS * 1000);
    const before = await connz(ctx);
    await sleep(p.windowS * 1000);
    const after = await connz(ctx);
    const rate = (names: string[], pick: "sent" | "received") => {
      let total = 0;
      for (const name of names) total += (after.get(name)?.[pick] ?? NaN) - (before.get(name)?.[pick] ?? NaN);
      return total / names.length / p.windowS;
    };
    const followers = names.filter((name) => name !== settled.leader);
    run.followerSent = rate(followers, "sent");
    run.followerReceived = rate(followers, "received");
    run.leaderSent = rate([settled.leader], "sent");
    run.leaderReceived = rate([settled.leader], "received");
    addSafety(run.safety, trial.safety());
  } catch (err) {
    run.failures.push(errorMessage(err));
    addSafety(run.safety, trial.safety());
  } finally {
    tally(run.messages, trial);
    trial.dispose();
    await host.request("close", { names }, 60_000).catch(() => undefined);
    await host.shutdown();
  }
  return run;
}
