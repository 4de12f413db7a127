// Connections that die without a FIN or an RST: a NAT gateway, an L4 load
// balancer or a stateful firewall forgets an idle flow and drops its packets
// from then on. The member's client sees nothing; only its own timeouts,
// re-armed long polls (v2), gRPC keepalive (v3), or on PostgreSQL and Redis
// a request left unanswered past its timeout (the pool drops the client it
// ran on; Redis's client is PINGed and made to connect again) can tell it
// that a connection is dead. New connections pass, as they would through a gateway
// that simply builds a new flow.
import type { MemberProcess } from "../kit/member-process";
import type { ScenarioContext } from "./runner";
import type { Scenario } from "./types";

/**
 * How long a silenced member may take to be back in the election. On v3 it is
 * gRPC keepalive's detection (6 s between pings + 3 s for the answer, as
 * etcdLeader.etcd3Options sets it) plus a retry; on v2 one long-poll re-arm.
 */
const BACK_IN_LINE_BOUND_MS = 20_000;

/** Long polls in these scenarios are re-armed this often, so that a lost one costs little time. */
const SHORT_REARM_MS = 1_500;

/**
 * The options and the bound here are etcd's: v2's watch re-arm and the etcd3 client's gRPC keepalive. A
 * NATS client notices a silent connection by its own pings (pingInterval, two minutes by default), so
 * the 20 s bound does not apply as it stands.
 */
const SILENT_NATS = "watchRearmInterval and the 20 s rejoin bound are etcd's; a NATS client detects a silent connection by its own pings (pingInterval)";

export const silentLeader: Scenario = {
  id: "silent-leader",
  title:
    "every connection the leader holds goes silent (no FIN, no RST; new connections pass): it keeps leading " +
    "if its renewals get through on a new connection, or steps down by its deadline; either way it is back in " +
    "the election, following or leading, within 20 s",
  watchRearmMs: SHORT_REARM_MS,
  notFor: { nats: SILENT_NATS },
  async run(c) {
    const leader = c.leader;
    const faultAt = c.mark(`silence ${leader.name}'s open connections`);
    c.proxyOf(leader).setMode("silence-existing");
    // Past the membership's TTL: a leader that could not renew has stepped down by now, and its membership is gone.
    await c.sleep(c.ttlMs + 1_000);
    await backInTheElection(c, leader, faultAt);
    const steppedDown = leader.seen.some((e) => e.event === "unelected" && e.at >= faultAt);
    c.figure("leaderSteppedDown", steppedDown ? 1 : 0);
    return { faultAt, healedAt: faultAt, reelection: "optional" };
  },
};

export const silentFollowerThenLeaderLeaves: Scenario = {
  id: "silent-follower",
  title:
    "every connection of the next member in line goes silent, then the leader stops cleanly: somebody is " +
    "elected within TTL + 2 s of the stop, and the silenced member is back in the election within 20 s",
  watchRearmMs: SHORT_REARM_MS,
  notFor: { nats: SILENT_NATS },
  async run(c) {
    const leader = c.leader;
    const follower = c.followers[0]!;
    const silencedAt = c.mark(`silence ${follower.name}'s open connections`);
    c.proxyOf(follower).setMode("silence-existing");
    // Long enough for the follower's long poll (v2) or watch stream (v3) to be one of the silenced.
    await c.sleep(500);
    c.expectExit(leader, "left");
    const faultAt = c.mark(`stop ${leader.name}`);
    await leader.stop();
    const next = await c.waitForElection(c.followers, faultAt);
    c.figure("electedAfterStopMs", next.event.at - faultAt);
    await backInTheElection(c, follower, silencedAt);
    return { faultAt, healedAt: faultAt, reelection: "required" };
  },
};

/**
 * Waits until `member` holds a membership in etcd (on a race-style store,
 * where a follower holds nothing, that is left out) and either leads or
 * follows the member that leads, and records how long that took.
 */
async function backInTheElection(c: ScenarioContext, member: MemberProcess, since: number): Promise<void> {
  await c.until(
    async () => {
      const leader = c.currentLeader();
      if (!leader) return undefined;
      // On etcd it holds a place in line; on a race-style store only the leader holds anything.
      const line = await c.line();
      if (c.queue && !line.some((e) => e.name === member.name)) return undefined;
      if (member === leader) return true;
      const latest = [...member.seen].reverse().find((e) => e.event === "leader");
      return latest?.event === "leader" && latest.value === leader.name ? true : undefined;
    },
    BACK_IN_LINE_BOUND_MS,
    `${member.name} back in the election`,
  );
  c.figure("backInElectionMs", Date.now() - since);
}
