// What each election member recorded about its own leadership, and the checks
// that tell whether the members together kept the promise of leader election:
// at most one leader at a time, fencing tokens that only grow, and a new
// leader soon after the network heals.
//
// Times are wall-clock milliseconds (Date.now()) from processes on the same
// host, so they are comparable across members.

export type HistoryEvent =
  | { type: "elected"; at: number; token: number }
  | { type: "unelected"; at: number }
  /** The member promised not to believe it leads past `until`. */
  | { type: "believed"; at: number; until: number }
  | { type: "error"; at: number; message: string }
  | { type: "crash"; at: number; message: string }
  | { type: "exit"; at: number; code: number | null; signal: string | null };

export interface MemberHistory {
  member: string;
  events: HistoryEvent[];
}

/** A stretch of time during which one member may have acted as leader. */
export interface LeadershipInterval {
  member: string;
  token: number;
  start: number;
  end: number;
  /** What ended it: the member saying so, its promise running out, its death, or the end of the record. */
  endedBy: "unelected" | "believed" | "crash" | "exit" | "re-elected" | "end of history";
}

export interface Overlap {
  members: [string, string];
  tokens: [number, number];
  from: number;
  to: number;
  overlapMs: number;
}

export interface TokenViolation {
  previous: { member: string; token: number; at: number };
  next: { member: string; token: number; at: number };
}

export interface CheckOptions {
  /** Overlaps up to this long are tolerated (clock granularity, event reporting lag). */
  allowedOverlapMs: number;
  /** Where intervals still open at the end of the record end. */
  endOfHistory: number;
  /** When a fault was healed; a leader is then expected to be elected. */
  healedAt?: number;
  /** Upper bound for the time from healedAt to the next election. */
  maxReelectMs?: number;
  /** The store was wiped and made again then: the first term after it may restart the tokens. */
  tokensRestartAt?: number;
}

export interface HistoryReport {
  memberCount: number;
  intervals: LeadershipInterval[];
  /** Pairs of intervals of different members that intersect by more than the allowance. */
  overlaps: Overlap[];
  /** The longest intersection between any two members' intervals, allowed or not; 0 if none. */
  longestOverlapMs: number;
  allowedOverlapMs: number;
  tokensIncrease: { ok: boolean; violations: TokenViolation[] };
  /** From healedAt to the first election at or after it; undefined without healedAt or without such an election. */
  reelectedAfterHealMs: number | undefined;
  crashes: Array<{ member: string; at: number; message: string }>;
  errorCount: number;
  ok: boolean;
  problems: string[];
}

/** Each member's leadership intervals, all members together, ordered by start. */
export function leadershipIntervals(histories: MemberHistory[], endOfHistory: number): LeadershipInterval[] {
  const intervals: LeadershipInterval[] = [];
  for (const { member, events } of histories) {
    let open: { token: number; start: number; promisedUntil: number | undefined } | undefined;
    const close = (at: number, reason: LeadershipInterval["endedBy"]): void => {
      if (!open) return;
      // A member frozen by SIGSTOP reports `unelected` only once it wakes up,
      // but it stopped acting as leader when its promise ran out.
      const promiseRanOut = open.promisedUntil !== undefined && open.promisedUntil < at;
      const end = promiseRanOut ? open.promisedUntil! : at;
      intervals.push({
        member,
        token: open.token,
        start: open.start,
        end: Math.max(open.start, end),
        endedBy: promiseRanOut ? "believed" : reason,
      });
      open = undefined;
    };
    for (const event of events) {
      switch (event.type) {
        case "elected":
          close(event.at, "re-elected");
          open = { token: event.token, start: event.at, promisedUntil: undefined };
          break;
        case "believed":
          if (open) open.promisedUntil = Math.max(open.promisedUntil ?? -Infinity, event.until);
          break;
        case "unelected":
          close(event.at, "unelected");
          break;
        case "crash":
        case "exit":
          close(event.at, event.type);
          break;
        case "error":
          break;
      }
    }
    close(endOfHistory, "end of history");
  }
  return intervals.sort((a, b) => a.start - b.start || a.end - b.end);
}

export function checkHistories(histories: MemberHistory[], options: CheckOptions): HistoryReport {
  const { allowedOverlapMs, endOfHistory, healedAt, maxReelectMs } = options;
  const intervals = leadershipIntervals(histories, endOfHistory);
  const problems: string[] = [];

  const overlaps: Overlap[] = [];
  let longestOverlapMs = 0;
  for (let i = 0; i < intervals.length; i++) {
    for (let j = i + 1; j < intervals.length; j++) {
      const a = intervals[i]!;
      const b = intervals[j]!;
      if (a.member === b.member) continue;
      const from = Math.max(a.start, b.start);
      const to = Math.min(a.end, b.end);
      if (to <= from) continue;
      const overlapMs = to - from;
      longestOverlapMs = Math.max(longestOverlapMs, overlapMs);
      if (overlapMs > allowedOverlapMs) {
        overlaps.push({ members: [a.member, b.member], tokens: [a.token, b.token], from, to, overlapMs });
        problems.push(
          `${a.member} (token ${a.token}) and ${b.member} (token ${b.token}) both led for ${overlapMs} ms ` +
            `from ${iso(from)} (allowed ${allowedOverlapMs} ms)`,
        );
      }
    }
  }

  const violations: TokenViolation[] = [];
  for (let i = 1; i < intervals.length; i++) {
    const previous = intervals[i - 1]!;
    const next = intervals[i]!;
    // The same member picking its own membership back up, with nobody in
    // between, hands out the same token again; that fences nobody out wrongly.
    if (next.member === previous.member && next.token === previous.token) continue;
    if (next.token > previous.token) continue;
    const restarted = options.tokensRestartAt;
    if (restarted !== undefined && previous.start < restarted && next.start >= restarted) continue;
    violations.push({
      previous: { member: previous.member, token: previous.token, at: previous.start },
      next: { member: next.member, token: next.token, at: next.start },
    });
    problems.push(
      `fencing token went from ${previous.token} (${previous.member}) to ${next.token} (${next.member}) at ${iso(next.start)}`,
    );
  }

  let reelectedAfterHealMs: number | undefined;
  if (healedAt !== undefined) {
    const firstAfterHeal = intervals.find((interval) => interval.start >= healedAt);
    reelectedAfterHealMs = firstAfterHeal ? firstAfterHeal.start - healedAt : undefined;
    if (reelectedAfterHealMs === undefined) {
      problems.push(`nobody was elected after the heal at ${iso(healedAt)}`);
    } else if (maxReelectMs !== undefined && reelectedAfterHealMs > maxReelectMs) {
      problems.push(`re-election took ${reelectedAfterHealMs} ms after the heal (at most ${maxReelectMs} ms allowed)`);
    }
  }

  const crashes: HistoryReport["crashes"] = [];
  let errorCount = 0;
  for (const { member, events } of histories) {
    for (const event of events) {
      if (event.type === "crash") {
        crashes.push({ member, at: event.at, message: event.message });
        problems.push(`${member} crashed at ${iso(event.at)}: ${event.message}`);
      } else if (event.type === "error") {
        errorCount++;
      }
    }
  }

  return {
    memberCount: histories.length,
    intervals,
    overlaps,
    longestOverlapMs,
    allowedOverlapMs,
    tokensIncrease: { ok: violations.length === 0, violations },
    reelectedAfterHealMs,
    crashes,
    errorCount,
    ok: problems.length === 0,
    problems,
  };
}

/** One line of numbers, plus a second line listing the problems if there are any. */
export function formatReport(scenarioName: string, report: HistoryReport): string {
  const reelect =
    report.reelectedAfterHealMs === undefined ? "" : `, re-elected ${report.reelectedAfterHealMs} ms after heal`;
  const summary =
    `${scenarioName}: ${report.ok ? "ok" : "FAILED"} - ${report.memberCount} members, ` +
    `${report.intervals.length} terms, longest overlap ${report.longestOverlapMs} ms ` +
    `(allowed ${report.allowedOverlapMs}), ${report.overlaps.length} overlaps, ` +
    `${report.tokensIncrease.violations.length} token violations${reelect}, ` +
    `${report.crashes.length} crashes, ${report.errorCount} errors`;
  return report.ok ? summary : `${summary}\n  problems: ${report.problems.join("; ")}`;
}

function iso(at: number): string {
  return new Date(at).toISOString();
}

/** A stretch of time during which two or more members led at once, and every member that led during it. */
export interface OverlapStretch {
  from: number;
  to: number;
  ms: number;
  members: string[];
}

/**
 * The separate stretches of time during which two or more of `intervals`
 * (of different members) were open at once. An interval ending at the moment
 * another starts does not overlap it. The benchmark counts these: one stretch
 * is one incident, however many pairs of members it involves.
 */
export function overlapStretches(intervals: Array<Pick<LeadershipInterval, "member" | "start" | "end">>): OverlapStretch[] {
  const edges = intervals
    .filter((interval) => interval.end > interval.start)
    .flatMap((interval) => [
      { at: interval.start, member: interval.member, opens: true },
      { at: interval.end, member: interval.member, opens: false },
    ])
    // Ends before starts at the same moment: a hand-over on the dot is no overlap.
    .sort((a, b) => a.at - b.at || Number(a.opens) - Number(b.opens));
  const open = new Map<string, number>();
  const stretches: OverlapStretch[] = [];
  let current: OverlapStretch | undefined;
  for (const edge of edges) {
    const count = (open.get(edge.member) ?? 0) + (edge.opens ? 1 : -1);
    if (count > 0) open.set(edge.member, count);
    else open.delete(edge.member);
    if (open.size >= 2) {
      current ??= { from: edge.at, to: edge.at, ms: 0, members: [] };
      current.members = [...new Set([...current.members, ...open.keys()])];
    } else if (current) {
      current.to = edge.at;
      current.ms = current.to - current.from;
      stretches.push(current);
      current = undefined;
    }
  }
  return stretches;
}
