// What a subject's trials add up to in one scenario: failed trials, safety
// (instants with two leaders), and the errors and notes members reported.
import type { OverlapStretch } from "../test/kit/leadership-history";

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
  examples: OverlapStretch[];
}

export function emptySafety(): SafetySummary {
  return { trials: 0, instants: 0, longestMs: 0, examples: [] };
}

export function addSafety(summary: SafetySummary, record: { instants: number; longestMs: number; overlaps: OverlapStretch[] }): void {
  summary.trials++;
  summary.instants += record.instants;
  summary.longestMs = Math.max(summary.longestMs, record.longestMs);
  for (const overlap of record.overlaps) if (summary.examples.length < 10) summary.examples.push(overlap);
}

/** Errors and notes the members reported, counted by message (digits folded). */
export function tally(into: Record<string, number>, trial: { members: ReadonlyMap<string, { errors: string[]; notes: string[] }> }): void {
  for (const m of trial.members.values()) {
    for (const message of [...m.errors.map((e) => `error: ${e}`), ...m.notes.map((n) => `note: ${n}`)]) {
      const key = message.replace(/\d+/g, "#").slice(0, 160);
      into[key] = (into[key] ?? 0) + 1;
    }
  }
}
