import { test } from "node:test";
import assert from "node:assert/strict";
import {
  checkHistories,
  formatReport,
  leadershipIntervals,
  overlapStretches,
  type HistoryEvent,
  type MemberHistory,
} from "../kit/leadership-history";

// Hand-made histories on a timeline starting at T.
const T = 1_700_000_000_000;
const at = (ms: number): number => T + ms;

function member(name: string, ...events: HistoryEvent[]): MemberHistory {
  return { member: name, events };
}

test("a clean handover passes", () => {
  const histories = [
    member(
      "a",
      { type: "elected", at: at(0), token: 10 },
      { type: "believed", at: at(1), until: at(2_000) },
      { type: "unelected", at: at(1_000) },
      { type: "exit", at: at(1_010), code: 0, signal: null },
    ),
    member(
      "b",
      { type: "error", at: at(500), message: "request timed out" },
      { type: "elected", at: at(1_005), token: 12 },
      { type: "believed", at: at(1_006), until: at(3_000) },
    ),
  ];
  const report = checkHistories(histories, { allowedOverlapMs: 0, endOfHistory: at(2_500) });
  assert.deepEqual(report.problems, []);
  assert.equal(report.ok, true);
  assert.equal(report.overlaps.length, 0);
  assert.equal(report.longestOverlapMs, 0);
  assert.equal(report.tokensIncrease.ok, true);
  assert.equal(report.errorCount, 1);
  assert.deepEqual(
    report.intervals.map((i) => [i.member, i.start - T, i.end - T, i.endedBy]),
    [
      ["a", 0, 1_000, "unelected"],
      ["b", 1_005, 2_500, "end of history"],
    ],
  );
});

test("an overlap beyond the allowance fails, one within it does not", () => {
  const histories = [
    member("a", { type: "elected", at: at(0), token: 1 }, { type: "unelected", at: at(1_000) }),
    member("b", { type: "elected", at: at(900), token: 2 }, { type: "unelected", at: at(2_000) }),
  ];
  const strict = checkHistories(histories, { allowedOverlapMs: 50, endOfHistory: at(3_000) });
  assert.equal(strict.ok, false);
  assert.equal(strict.overlaps.length, 1);
  assert.deepEqual(strict.overlaps[0]!.members, ["a", "b"]);
  assert.equal(strict.overlaps[0]!.overlapMs, 100);
  assert.equal(strict.longestOverlapMs, 100);
  assert.match(strict.problems[0]!, /a \(token 1\) and b \(token 2\) both led for 100 ms/);

  const lenient = checkHistories(histories, { allowedOverlapMs: 100, endOfHistory: at(3_000) });
  assert.equal(lenient.ok, true);
  assert.equal(lenient.longestOverlapMs, 100, "a tolerated overlap is still measured");
});

test("a member still leading at the end of the history overlaps a newer leader", () => {
  const histories = [
    member("a", { type: "elected", at: at(0), token: 1 }),
    member("b", { type: "elected", at: at(2_000), token: 2 }),
  ];
  const report = checkHistories(histories, { allowedOverlapMs: 0, endOfHistory: at(2_500) });
  assert.equal(report.ok, false);
  assert.equal(report.longestOverlapMs, 500);
});

test("a frozen leader that reports unelected late but promised to stop early passes", () => {
  // a is SIGSTOPped at 500 ms with a promise to stop believing at 1 500 ms,
  // wakes at 6 000 ms and only then says unelected; b takes over at 2 100 ms.
  const histories = [
    member(
      "a",
      { type: "elected", at: at(0), token: 7 },
      { type: "believed", at: at(1), until: at(1_000) },
      { type: "believed", at: at(400), until: at(1_500) },
      { type: "unelected", at: at(6_000) },
    ),
    member(
      "b",
      { type: "elected", at: at(2_100), token: 9 },
      { type: "believed", at: at(2_101), until: at(4_000) },
    ),
  ];
  const report = checkHistories(histories, { allowedOverlapMs: 0, endOfHistory: at(7_000) });
  assert.deepEqual(report.problems, []);
  const [a] = leadershipIntervals(histories, at(7_000));
  assert.equal(a!.end, at(1_500));
  assert.equal(a!.endedBy, "believed");

  // Without the promise the same timeline is a split brain.
  const withoutPromise = histories.map((h) => member(h.member, ...h.events.filter((e) => e.type !== "believed")));
  assert.equal(checkHistories(withoutPromise, { allowedOverlapMs: 0, endOfHistory: at(7_000) }).ok, false);
});

test("a crashed or killed leader stops leading at its death", () => {
  const histories = [
    member("a", { type: "elected", at: at(0), token: 1 }, { type: "exit", at: at(300), code: null, signal: "SIGKILL" }),
    member("b", { type: "elected", at: at(2_300), token: 2 }),
  ];
  const report = checkHistories(histories, { allowedOverlapMs: 0, endOfHistory: at(3_000) });
  assert.equal(report.ok, true, report.problems.join("; "));
  assert.equal(report.intervals[0]!.endedBy, "exit");

  const crashed = [member("c", { type: "elected", at: at(0), token: 1 }, { type: "crash", at: at(10), message: "boom" })];
  const crashReport = checkHistories(crashed, { allowedOverlapMs: 0, endOfHistory: at(100) });
  assert.equal(crashReport.ok, false, "a crash is a problem in itself");
  assert.deepEqual(crashReport.crashes, [{ member: "c", at: at(10), message: "boom" }]);
  assert.equal(crashReport.intervals[0]!.end, at(10));
});

test("decreasing fencing tokens fail", () => {
  const histories = [
    member("a", { type: "elected", at: at(0), token: 20 }, { type: "unelected", at: at(100) }),
    member("b", { type: "elected", at: at(200), token: 15 }, { type: "unelected", at: at(300) }),
  ];
  const report = checkHistories(histories, { allowedOverlapMs: 0, endOfHistory: at(1_000) });
  assert.equal(report.ok, false);
  assert.equal(report.tokensIncrease.ok, false);
  assert.deepEqual(report.tokensIncrease.violations, [
    { previous: { member: "a", token: 20, at: at(0) }, next: { member: "b", token: 15, at: at(200) } },
  ]);
});

test("an equal token is only fine for the same member resuming its own term", () => {
  const resumed = [
    member(
      "a",
      { type: "elected", at: at(0), token: 5 },
      { type: "unelected", at: at(100) },
      { type: "elected", at: at(200), token: 5 },
    ),
  ];
  assert.equal(checkHistories(resumed, { allowedOverlapMs: 0, endOfHistory: at(300) }).tokensIncrease.ok, true);

  const reused = [
    member("a", { type: "elected", at: at(0), token: 5 }, { type: "unelected", at: at(100) }),
    member("b", { type: "elected", at: at(200), token: 5 }),
  ];
  assert.equal(checkHistories(reused, { allowedOverlapMs: 0, endOfHistory: at(300) }).tokensIncrease.ok, false);
});

test("no re-election after the heal fails; a slow one fails against maxReelectMs", () => {
  const histories = [
    member("a", { type: "elected", at: at(0), token: 1 }, { type: "unelected", at: at(1_000) }),
    member("b", { type: "error", at: at(1_500), message: "unavailable" }),
  ];
  const none = checkHistories(histories, { allowedOverlapMs: 0, endOfHistory: at(9_000), healedAt: at(2_000) });
  assert.equal(none.ok, false);
  assert.equal(none.reelectedAfterHealMs, undefined);
  assert.match(none.problems.join("\n"), /nobody was elected after the heal/);

  histories[1]!.events.push({ type: "elected", at: at(5_000), token: 3 });
  const slow = checkHistories(histories, {
    allowedOverlapMs: 0,
    endOfHistory: at(9_000),
    healedAt: at(2_000),
    maxReelectMs: 2_000,
  });
  assert.equal(slow.reelectedAfterHealMs, 3_000);
  assert.equal(slow.ok, false);
  assert.match(slow.problems.join("\n"), /re-election took 3000 ms/);

  const quickEnough = checkHistories(histories, {
    allowedOverlapMs: 0,
    endOfHistory: at(9_000),
    healedAt: at(2_000),
    maxReelectMs: 3_000,
  });
  assert.equal(quickEnough.ok, true, quickEnough.problems.join("; "));
});

test("formatReport gives one line when fine and two when not", () => {
  const fine = checkHistories([member("a", { type: "elected", at: at(0), token: 1 })], {
    allowedOverlapMs: 0,
    endOfHistory: at(10),
    healedAt: at(0),
  });
  const line = formatReport("kill-leader", fine);
  assert.equal(line.split("\n").length, 1);
  assert.match(line, /^kill-leader: ok - 1 members, 1 terms, longest overlap 0 ms .*re-elected 0 ms after heal/);

  const bad = checkHistories(
    [
      member("a", { type: "elected", at: at(0), token: 2 }),
      member("b", { type: "elected", at: at(5), token: 1 }),
    ],
    { allowedOverlapMs: 0, endOfHistory: at(10) },
  );
  const lines = formatReport("split-brain", bad).split("\n");
  assert.equal(lines.length, 2);
  assert.match(lines[0]!, /^split-brain: FAILED .*longest overlap 5 ms.*1 overlaps, 1 token violations/);
  assert.match(lines[1]!, /problems: .*both led for 5 ms.*fencing token went from 2 \(a\) to 1 \(b\)/);
});

test("overlap stretches: a hand-over on the dot is none; one incident counts once however many members it involves", () => {
  const stretches = overlapStretches([
    { member: "a", start: at(0), end: at(1_000) },
    // b starts as a ends: no overlap.
    { member: "b", start: at(1_000), end: at(3_000) },
    // c and then d join b: one stretch from c's start until only b is left.
    { member: "c", start: at(1_500), end: at(2_000) },
    { member: "d", start: at(1_800), end: at(2_200) },
  ]);
  assert.deepEqual(stretches, [{ from: at(1_500), to: at(2_200), ms: 700, members: ["b", "c", "d"] }]);
});

test("overlap stretches: separate incidents are separate; empty intervals and one member's own terms never overlap", () => {
  const stretches = overlapStretches([
    { member: "a", start: at(0), end: at(100) },
    { member: "b", start: at(50), end: at(60) },
    { member: "b", start: at(80), end: at(80) },
    { member: "a", start: at(90), end: at(200) },
    { member: "c", start: at(300), end: at(400) },
    { member: "a", start: at(350), end: at(500) },
  ]);
  assert.deepEqual(
    stretches.map(({ from, to, members }) => ({ from: from - T, to: to - T, members: [...members].sort() })),
    [
      { from: 50, to: 60, members: ["a", "b"] },
      { from: 350, to: 400, members: ["a", "c"] },
    ],
  );
});
