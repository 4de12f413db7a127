// Faults of the leader's process: a clean stop, a crash, a freeze.
import { believedUntil, type RecordedEventName } from "../kit/event-recorder";
import type { MemberProcess } from "../kit/member-process";
import type { ScenarioContext } from "./runner";
import type { Scenario } from "./types";

export const gracefulStop: Scenario = {
  id: "graceful-stop",
  title:
    "the leader is stopped cleanly (leave() and exit 0): the next member is elected without waiting for the " +
    "membership to expire (within one TTL)",
  async run(c) {
    const leader = c.leader;
    c.expectExit(leader, "left");
    const faultAt = c.mark(`stop ${leader.name}`);
    await leader.stop();
    const next = await c.waitForElection(c.followers, faultAt);
    const handoverMs = next.event.at - faultAt;
    c.figure("handoverMs", handoverMs);
    checkNextInLine(c, next.member);
    c.check(handoverMs < c.ttlMs, `handover after a clean stop took ${handoverMs} ms, as long as the membership takes to expire`);
    return { faultAt, healedAt: faultAt, reelection: "required" };
  },
};

export const sigkillLeader: Scenario = {
  id: "sigkill-leader",
  title: "the leader is SIGKILLed: its membership expires and the next member is elected within TTL + 2 s",
  async run(c) {
    const leader = c.leader;
    c.expectExit(leader, "killed");
    const faultAt = c.mark(`SIGKILL ${leader.name}`);
    await leader.kill("SIGKILL");
    const next = await c.waitForElection(c.followers, faultAt);
    c.figure("failoverMs", next.event.at - faultAt);
    checkNextInLine(c, next.member);
    return { faultAt, healedAt: faultAt, reelection: "required" };
  },
};

export const sigstopLeader: Scenario = {
  id: "sigstop-leader",
  title:
    "the leader is frozen (SIGSTOP) for TTL + 1.5 s, a successor is elected meanwhile, then it is thawed: its term " +
    "ends at the deadline it promised before the freeze, it promises nothing more on waking, says unelected, and " +
    "rejoins as a follower (or leads again legitimately)",
  async run(c) {
    const leader = c.leader;
    const freezeMs = c.ttlMs + 1_500;
    const termStart = lastIndexOf(leader, "elected");
    const faultAt = c.mark(`SIGSTOP ${leader.name} for ${freezeMs} ms`);
    leader.pause();
    const next = await c.waitForElection(c.followers, faultAt, freezeMs + 1_000);
    c.figure("failoverMs", next.event.at - faultAt);
    await c.sleepUntil(faultAt + freezeMs);
    const thawIndex = leader.seen.length;
    const thawAt = c.mark(`SIGCONT ${leader.name}`);
    leader.resume();
    const unelected = await c.waitForEvent(leader, (e) => e.event === "unelected", thawAt, 3_000, "unelected on waking");

    // Its promises in the frozen term: every one made before the freeze, and the last one over before the successor began.
    const term = leader.seen.slice(termStart, thawIndex);
    const promised = Math.max(...term.flatMap((e) => believedUntil(e) ?? []));
    c.figure("promiseEndedBeforeSuccessorMs", next.event.at - promised);
    c.figure("unelectedAfterThawMs", unelected.at - thawAt);
    c.check(promised <= next.event.at, `${leader.name} promised to lead until ${promised}, past ${next.member.name}'s election at ${next.event.at}`);
    const lateBeliefs = leader.seen
      .slice(thawIndex)
      .filter((e) => believedUntil(e) !== undefined && e.at < unelected.at);
    c.check(lateBeliefs.length === 0, `${leader.name} extended its promise after waking: ${JSON.stringify(lateBeliefs)}`);

    // It comes back as a follower of whoever leads, or is elected again with a larger token.
    const back = await c.waitForEvent(
      leader,
      (e) => e.event === "leader" || e.event === "elected",
      thawAt,
      c.recoveryBoundMs,
      "rejoin as follower or leader",
    );
    c.figure("rejoinedAfterThawMs", back.at - thawAt);
    if (back.event === "elected") {
      const successorToken = next.event.value;
      c.check(back.value > successorToken, `${leader.name} led again with token ${back.value}, not above ${successorToken}`);
    }
    return { faultAt, healedAt: faultAt, reelection: "required" };
  },
};

/** On a store with a line (etcd), the next member in it takes over; on NATS followers race and any may win. */
export function checkNextInLine(c: ScenarioContext, successor: MemberProcess): void {
  if (!c.queue) return;
  c.check(successor === c.followers[0], `${successor.name} took over, not ${c.followers[0]!.name}, the next in line`);
}

function lastIndexOf(member: MemberProcess, event: RecordedEventName): number {
  for (let i = member.seen.length - 1; i >= 0; i--) if (member.seen[i]!.event === event) return i;
  return 0;
}
