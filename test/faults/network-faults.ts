// Faults of one member's connection to etcd, made by its own FaultProxy:
// partitions that look like silence or like resets, of the leader or of a
// follower, and added latency.
import type { FaultMode } from "../kit/fault-proxy";
import type { ScenarioContext } from "./runner";
import type { Scenario, ScenarioOutcome } from "./types";

function partitionLeader(mode: "blackhole" | "reset"): Scenario {
  return {
    id: `partition-leader-${mode}`,
    title:
      `the leader's connection to etcd is cut (${mode}) for TTL + 1.5 s: it steps down at its deadline while ` +
      "still cut off, a follower is elected once the membership expires, and after the heal the old leader " +
      "rejoins as a follower",
    async run(c) {
      return partitionTheLeader(c, mode);
    },
  };
}

async function partitionTheLeader(c: ScenarioContext, mode: "blackhole" | "reset"): Promise<ScenarioOutcome> {
  const leader = c.leader;
  const cutMs = c.ttlMs + 1_500;
  const faultAt = c.mark(`${mode} ${leader.name}'s connection for ${cutMs} ms`);
  c.proxyOf(leader).setMode(mode);
  const next = await c.waitForElection(c.followers, faultAt);
  c.figure("failoverMs", next.event.at - faultAt);
  const stepDown = await c.waitForEvent(leader, (e) => e.event === "unelected", faultAt, c.recoveryBoundMs, "step down while cut off");
  c.figure("stepDownAfterCutMs", stepDown.at - faultAt);
  await c.sleepUntil(faultAt + cutMs);
  const healAt = c.mark(`heal ${leader.name}'s connection`);
  c.proxyOf(leader).heal();
  c.check(
    leader.seen.some((e) => e.event === "unelected" && e.at >= faultAt && e.at < healAt),
    `${leader.name} did not step down while cut off`,
  );
  const back = await c.waitForEvent(
    leader,
    (e) => (e.event === "leader" && e.value === next.member.name) || e.event === "elected",
    healAt,
    c.recoveryBoundMs,
    `rejoin behind ${next.member.name}`,
  );
  c.figure("rejoinedAfterHealMs", back.at - healAt);
  return { faultAt, healedAt: faultAt, reelection: "required" };
}

export const partitionLeaderBlackhole = partitionLeader("blackhole");
export const partitionLeaderReset = partitionLeader("reset");

export const partitionFollower: Scenario = {
  id: "partition-follower",
  title:
    "the next member in line is cut off (blackhole) for TTL + 1.5 s, so its membership expires: the leader leads " +
    "throughout, unbroken, nobody else is elected, and after the heal the follower rejoins with a new membership " +
    "at the back of the line",
  async run(c) {
    if (!c.queue) return partitionRacingFollower(c);
    const follower = c.followers[0]!;
    const before = c.initialLine.find((e) => e.name === follower.name)!;
    const cutMs = c.ttlMs + 1_500;
    const faultAt = c.mark(`blackhole ${follower.name}'s connection for ${cutMs} ms`);
    c.proxyOf(follower).setMode("blackhole");
    // Its membership expires while it is cut off.
    await c.until(
      async () => ((await c.line()).some((e) => e.key === before.key) ? undefined : true),
      c.recoveryBoundMs,
      `${follower.name}'s membership to expire`,
    );
    c.figure("membershipGoneAfterCutMs", Date.now() - faultAt);
    await c.sleepUntil(faultAt + cutMs);
    const healAt = c.mark(`heal ${follower.name}'s connection`);
    c.proxyOf(follower).heal();
    const rejoined = await c.until(
      async () => {
        const line = await c.line();
        const entry = line.find((e) => e.name === follower.name);
        return entry && entry.token > before.token && entry === line.at(-1) ? entry : undefined;
      },
      c.recoveryBoundMs,
      `${follower.name} back in line with a new membership`,
    );
    c.figure("rejoinedAfterHealMs", Date.now() - healAt);
    c.check(rejoined.key !== before.key, `${follower.name} kept its expired membership ${before.key}`);
    return { faultAt, healedAt: healAt, reelection: "none" };
  },
};

/**
 * NATS: a follower holds nothing, so nothing of it expires. Cut off, it stops
 * seeing the leader's renewals, so it tries to take the key when the last
 * one it saw must have aged out; those writes never arrive, or arrive and
 * fail. The leader leads throughout; after the heal the follower follows it.
 */
async function partitionRacingFollower(c: ScenarioContext): Promise<ScenarioOutcome> {
  const follower = c.followers[0]!;
  const cutMs = c.ttlMs + 1_500;
  const faultAt = c.mark(`blackhole ${follower.name}'s connection for ${cutMs} ms`);
  c.proxyOf(follower).setMode("blackhole");
  await c.sleepUntil(faultAt + cutMs);
  const healAt = c.mark(`heal ${follower.name}'s connection`);
  c.proxyOf(follower).heal();
  c.check(!follower.seen.some((e) => e.event === "elected" && e.at >= faultAt), `${follower.name} was elected while cut off`);
  return { faultAt, healedAt: healAt, reelection: "none" };
}

export const slowLeaderLink: Scenario = {
  id: "slow-leader-link",
  title:
    "300 ms of latency each way on the leader's connection for 4 s: it may step down (and lead again) or not, " +
    "but no two members ever lead at once, and somebody leads soon after the latency goes",
  async run(c) {
    const leader = c.leader;
    const slow: FaultMode = { delayMs: 300 };
    const faultAt = c.mark(`300 ms delay on ${leader.name}'s connection for 4000 ms`);
    c.proxyOf(leader).setMode(slow);
    await c.sleep(4_000);
    const healAt = c.mark(`heal ${leader.name}'s connection`);
    c.proxyOf(leader).heal();
    const window = (e: { at: number }) => e.at >= faultAt && e.at < healAt;
    c.figure("leaderStepDowns", leader.seen.filter((e) => e.event === "unelected" && window(e)).length);
    c.figure("electionsDuringDelay", c.members.reduce((n, m) => n + m.seen.filter((e) => e.event === "elected" && window(e)).length, 0));
    return { faultAt, healedAt: healAt, reelection: "optional" };
  },
};
