// Shapes shared by the scenarios' results.
import type { Host } from "../host";
import type { SafetyRecord, Trial } from "../trial";
import { now } from "../util";

export interface Failure {
  trial: number;
  reason: string;
}

/** Safety over a subject's trials in one scenario. */
export interface SafetySummary {
  trials: number;
  instants: number;
  longestMs: number;
  /** The overlaps themselves (first few), for the JSON. */
  examples: SafetyRecord["overlaps"];
}

export function emptySafety(): SafetySummary {
  return { trials: 0, instants: 0, longestMs: 0, examples: [] };
}

export function addSafety(summary: SafetySummary, record: SafetyRecord): void {
  summary.trials++;
  summary.instants += record.instants;
  summary.longestMs = Math.max(summary.longestMs, record.longestMs);
  for (const overlap of record.overlaps) if (summary.examples.length < 10) summary.examples.push(overlap);
}

/** Errors and notes the members reported, counted by message (digits folded). */
export function tally(into: Record<string, number>, trial: Trial): void {
  for (const m of trial.members.values()) {
    for (const message of [...m.errors.map((e) => `error: ${e}`), ...m.notes.map((n) => `note: ${n}`)]) {
      const key = message.replace(/\d+/g, "#").slice(0, 160);
      into[key] = (into[key] ?? 0) + 1;
    }
  }
}

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
