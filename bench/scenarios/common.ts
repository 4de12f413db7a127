// Shapes shared by the scenarios' results, and the leader change they measure.
import type { Host } from "../host";
import type { Trial } from "../trial";
import { now } from "../util";

export interface LeaderChange {
  tStop: number;
  successor: string;
  failoverMs: number;
  /** Per follower: from the stop call, and from the successor's `elected`, to its `leader` event naming the successor. */
  learnFromStopMs: number[];
  learnFromElectedMs: number[];
  /** Followers that had not named the successor when the wait ended. */
  unaware: number;
  /** The member process's CPU time from just before the stop until the last follower learned (or the wait ended), and that wall time. */
  hostCpuMs: number;
  wallMs: number;
}

/**
 * Stops the current leader (one must lead), waits for a successor and for
 * every remaining member to name it (until `learnDeadlineMs` after the stop),
 * and measures how long each follower took.
 */
export async function leaderChange(trial: Trial, host: Host, learnDeadlineMs: number): Promise<LeaderChange> {
  const current = await trial.waitFor("one leader before the change", () => trial.ready(), 10_000);
  const cpuBefore = (await host.request("cpu")).cpuMs as number;
  const stopped = await host.request("stop", { name: current.leader });
  const tStop = stopped.at as number;
  trial.markGone(current.leader);
  const next = await trial.waitFor("the next elected", () => trial.electedAfter(tStop, current.leader), 10_000);
  const remaining = Math.max(0, tStop + learnDeadlineMs - now());
  await trial
    .waitFor("every follower naming the successor", () => {
      const s = trial.settled();
      return s && s.leader === next.name ? s : undefined;
    }, remaining)
    .catch(() => undefined);
  const cpuAfter = (await host.request("cpu")).cpuMs as number;
  const wallMs = now() - tStop;
  const learnFromStopMs: number[] = [];
  const learnFromElectedMs: number[] = [];
  let unaware = 0;
  for (const m of trial.active()) {
    if (m.name === next.name) continue;
    if (m.knownLeader === next.name && m.knownLeaderAt !== undefined) {
      learnFromStopMs.push(m.knownLeaderAt - tStop);
      learnFromElectedMs.push(m.knownLeaderAt - next.t);
    } else unaware++;
  }
  return {
    tStop, successor: next.name, failoverMs: next.t - tStop, learnFromStopMs, learnFromElectedMs, unaware,
    hostCpuMs: cpuAfter - cpuBefore, wallMs,
  };
}
