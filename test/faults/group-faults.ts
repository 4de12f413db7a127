// Faults that meet a process group, not a lone process: the leader's work is
// a shell whose child ignores SIGTERM and has a child of its own that ignores
// it too (LeaderWork "shell-group" and "hook-group"). The shell dies of the
// stop signal at once; the rest of its group must be SIGKILLed after --grace,
// and the member must not count its work as stopped (report the command's
// exit, run the end hook, leave) before then. The runner checks that no
// process of the old group runs when the next member's work starts, and that
// none is left at the end.
import type { RecordedEvent, RecordedEventName } from "../kit/event-recorder";
import type { MemberProcess } from "../kit/member-process";
import { MEMBER_GRACE_SECONDS } from "../kit/member-process";
import type { ScenarioContext } from "./runner";
import type { Scenario, ScenarioOutcome } from "./types";

/** Timer slack on a loaded machine: the SIGKILL may come this much before the grace period is over by Date.now(). */
const TIMER_SLACK_MS = 50;

export const commandGroupStopped: Scenario = {
  id: "command-group-stopped",
  title:
    "the leader's command is a shell whose child ignores SIGTERM and has a child of its own; the leading CLI gets " +
    "SIGTERM: the shell dies at once, the rest of its group is SIGKILLed after --grace, and only then does the CLI " +
    "report the command's exit and leave, and the next member's command start",
  members: 2,
  work: "shell-group",
  async run(c) {
    return stopTheLeader(c, "SIGTERM", "command-start", "command-exit");
  },
};

export const hookGroupHungUp: Scenario = {
  id: "hook-group-hung-up",
  title:
    "the members run no command but an --on-elected hook that hangs: a shell whose child ignores SIGTERM and has a " +
    "child of its own; the leading CLI gets SIGHUP (its terminal closed): the hook's group is stopped, SIGKILL after " +
    "--grace, and only then does the CLI report the hook's end and leave, and the next member's hook start",
  members: 2,
  work: "hook-group",
  async run(c) {
    return stopTheLeader(c, "SIGHUP", "hook-start", "hook-failed");
  },
};

/**
 * Signals the leading CLI, which must stop its work's group and leave; checks
 * that it reported the work's end no sooner than the grace period after the
 * stop, and waits for the next member's work to start.
 */
async function stopTheLeader(
  c: ScenarioContext,
  signal: NodeJS.Signals,
  workBegan: RecordedEventName,
  workEnded: RecordedEventName,
): Promise<ScenarioOutcome> {
  const leader = c.leader;
  c.expectExit(leader, "left");
  const faultAt = c.mark(`${signal} ${leader.name}, whose work's group ignores SIGTERM`);
  await leader.kill(signal);
  const next = await c.waitForElection(c.followers, faultAt);
  c.figure("failoverMs", next.event.at - faultAt);
  const ended = lastEvent(leader, workEnded);
  c.check(ended !== undefined && ended.at >= faultAt, `${leader.name} did not report ${workEnded} after the ${signal}`);
  if (ended) {
    const afterSignalMs = ended.at - faultAt;
    c.figure("workEndedAfterSignalMs", afterSignalMs);
    c.check(
      afterSignalMs >= MEMBER_GRACE_SECONDS * 1_000 - TIMER_SLACK_MS,
      `${leader.name} reported ${workEnded} ${afterSignalMs} ms after the ${signal}, before the grace period was over: ` +
        "processes of its group that ignore SIGTERM still ran",
    );
  }
  await c.waitForEvent(next.member, (e) => e.event === workBegan, next.event.at, 10_000, `its ${workBegan}`);
  // The runner's check reads the work's own start line, written once it runs.
  await next.member.commandLog.waitFor(`${next.member.name}'s work`, 10_000, (records) =>
    records.find((r) => r.event === "start" && r.name === next.member.name && r.at >= next.event.at),
  );
  return { faultAt, healedAt: faultAt, reelection: "required" };
}

function lastEvent(member: MemberProcess, event: RecordedEventName): RecordedEvent | undefined {
  return member.all(event).at(-1);
}
