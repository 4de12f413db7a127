// Faults of a JetStream cluster under a NATS KV election: three nats-servers,
// the election's bucket replicated on all three (R3), member i connected
// through its proxy to server i (and to the next ones if that one refuses).
// Each fault comes twice: while a member leads, and as its leader stops
// cleanly, so that the fault falls on the change of leader (the delete, the
// followers' purge and create):
//
//   stream leader killed   SIGKILL of the server that leads the bucket's raft
//                          group; the other two elect another.
//   other server killed    SIGKILL of a server that neither leads the stream
//                          nor carries the leader's connection, if there is
//                          one; else of one that does not lead the stream.
//   own server killed      SIGKILL of the server the leader is connected to:
//                          its client reconnects to another.
//   stream leader cut off  every route of the stream's leader goes silent
//                          (its route proxies blackhole): the other two
//                          elect another stream leader, and the members
//                          connected to the cut-off server reach nobody.
//
// A killed server is started again on its store, and a cut one healed, once
// a member leads again; the run ends once every replica of the stream is
// current. What is checked: never two leaders (no overlap at all), tokens
// that grow, a leader within TTL + 7 s of the moment the stream and the
// meta group had leaders again (at once where the fault hit neither's
// leader; the 7 s: RECOVERY_SLACK_MS), and the runner's checks after that:
// for a partition, counted from when the cluster is whole again after the
// heal, which on 2.9 makes the stream and the meta group elect anew.
// The figures: storeBackMs, from the fault to new leaders of what the
// server led (the stream, the meta group); leaderAgainMs, from the fault to
// the first election after it (0 where the leader kept leading); and
// clusterBackAfterHealMs, from the heal to a meta leader and a current stream.
import type { NatsServer } from "../kit/nats-server";
import type { MemberProcess } from "../kit/member-process";
import type { ScenarioContext } from "./runner";
import type { Scenario, ScenarioOutcome } from "./types";

type Target = "stream-leader" | "other-server" | "own-server";
type Moment = "leading" | "handover";

const ONLY_CLUSTER = "a fault of a nats-server cluster";
const NOT_HERE = { v2: ONLY_CLUSTER, v3: ONLY_CLUSTER, nats: ONLY_CLUSTER };

/**
 * A request a member sent while the stream or JetStream's meta group had no
 * leader is never answered: the client gives up after its JetStream timeout
 * (5 s by default), and the member retries then. So the bound on a leader
 * again is the TTL plus that timeout plus 2 s, from when both have a leader.
 */
const RECOVERY_SLACK_MS = 5_000 + 2_000;

/** How long after a leader is back the election is watched for a flap before the fault is undone. */
const WATCH_AFTER_MS = 1_000;
/** A killed server's restart and the stream's catch-up must be over within this. */
const CATCH_UP_MS = 30_000;

const TARGET_WORDS: Record<Target, string> = {
  "stream-leader": "the server that leads the bucket's stream",
  "other-server": "a server that neither leads the stream nor carries the leader's connection",
  "own-server": "the server the leader is connected to (its client reconnects to another)",
};

function kill(target: Target, moment: Moment): Scenario {
  return {
    id: `nats-cluster-kill-${target}${moment === "handover" ? "-handover" : ""}`,
    notFor: NOT_HERE,
    recoverySlackMs: RECOVERY_SLACK_MS,
    title:
      `SIGKILL of ${TARGET_WORDS[target]}${moment === "handover" ? ", as the leader stops cleanly" : ", while a member leads"}: ` +
      "never two leaders, a leader within TTL + 7 s of the stream and the meta group having leaders again, and the server started again catches up",
    async run(c) {
      const streamLeader = await c.natsCluster.streamLeader(c.natsAdmin.stream);
      const metaLeader = await c.natsCluster.metaLeader();
      const victim = pickServer(c, target, streamLeader);
      const roles = rolesOf(c, victim, streamLeader);
      const faultAt = c.mark(`SIGKILL ${c.natsCluster.nameOf(victim)} (${roles})${moment === "handover" ? `, as ${c.leader.name} stops` : ""}`);
      const stopping = moment === "handover" ? stopLeader(c) : undefined;
      await c.stopEtcd(victim, "kill");
      const backAt = await leadersBack(c, victim, victim === streamLeader, victim === metaLeader, faultAt);
      await stopping;
      const electedAt = await leaderAgain(c, faultAt, backAt);
      // A hand-over the fault did not hold up (the members did not need what
      // the server led) is over when its successor is elected, however long
      // the cluster takes to elect new leaders of its own.
      const healedAt = electedAt === undefined ? backAt : Math.min(backAt, electedAt);
      c.signal.throwIfAborted();
      c.mark(`start ${c.natsCluster.nameOf(victim)} again`);
      await c.startEtcd(victim);
      await c.natsCluster.waitStreamCurrent(c.natsAdmin.stream, CATCH_UP_MS);
      c.mark("every replica of the stream is current");
      return outcome(faultAt, healedAt, moment);
    },
  };
}

function partition(moment: Moment): Scenario {
  return {
    id: `nats-cluster-partition-stream-leader${moment === "handover" ? "-handover" : ""}`,
    notFor: NOT_HERE,
    recoverySlackMs: RECOVERY_SLACK_MS,
    title:
      `every route of the server that leads the bucket's stream goes silent${moment === "handover" ? ", as the leader stops cleanly" : ", while a member leads"}; ` +
      "healed once a member leads again: never two leaders, a leader within TTL + 7 s of the others electing a stream leader, " +
      "and the cut-off server catches up",
    async run(c) {
      const cluster = c.natsCluster;
      const victim = await cluster.streamLeader(c.natsAdmin.stream);
      const metaLeader = await cluster.metaLeader();
      const faultAt = c.mark(
        `cut ${cluster.nameOf(victim)} off (${rolesOf(c, victim, victim)})${moment === "handover" ? `, as ${c.leader.name} stops` : ""}`,
      );
      const stopping = moment === "handover" ? stopLeader(c) : undefined;
      cluster.partition(cluster.nameOf(victim));
      let healAt: number | undefined;
      try {
        const backAt = await leadersBack(c, victim, true, victim === metaLeader, faultAt);
        await stopping;
        await leaderAgain(c, faultAt, backAt);
      } finally {
        cluster.heal();
        healAt = c.mark(`heal ${cluster.nameOf(victim)}`);
      }
      // The heal is a fault of its own on 2.9: the server that was cut off
      // stood for election again and again, and its higher terms make the
      // others' leaders step down (no pre-vote), so the stream and JetStream's
      // meta group elect anew. The bounds count from when they have.
      await cluster.waitReady(CATCH_UP_MS);
      await cluster.waitStreamCurrent(c.natsAdmin.stream, CATCH_UP_MS);
      const settledAt = c.mark("a meta leader, and every replica of the stream current");
      c.figure("clusterBackAfterHealMs", settledAt - healAt);
      // The change of leader, if any, was checked by leaderAgain; whoever leads may go on leading.
      return { faultAt, healedAt: settledAt, reelection: "optional" };
    },
  };
}

/** The server member `member` connects to first: member i's proxy goes to server i (runner.ts). */
function ownServer(c: ScenarioContext, member: MemberProcess): NatsServer {
  return c.natsCluster.servers[c.members.indexOf(member) % c.natsCluster.servers.length]!;
}

function pickServer(c: ScenarioContext, target: Target, streamLeader: NatsServer): NatsServer {
  if (target === "stream-leader") return streamLeader;
  const own = ownServer(c, c.leader);
  if (target === "own-server") return own;
  const others = c.natsCluster.servers.filter((s) => s !== streamLeader);
  return others.find((s) => s !== own) ?? others[0]!;
}

/** What `server` is to the election, for the timeline. */
function rolesOf(c: ScenarioContext, server: NatsServer, streamLeader: NatsServer): string {
  const roles = [
    server === streamLeader ? "stream leader" : "stream follower",
    ...c.members.filter((m) => ownServer(c, m) === server).map((m) => `${m.name}${m === c.leader ? " (leader)" : ""} connected`),
  ];
  return roles.join(", ");
}

/** The leader's clean stop, begun now: it deletes its key as it goes, and the others race for it. */
function stopLeader(c: ScenarioContext): Promise<void> {
  c.expectExit(c.leader, "left");
  return c.leader.stop();
}

/**
 * When the servers left (or on the majority's side) agree on leaders other
 * than `victim` of what it led: the stream (which every write needs) and
 * JetStream's meta group (which a watch's consumer needs). At once if it
 * led neither.
 */
async function leadersBack(c: ScenarioContext, victim: NatsServer, ledStream: boolean, ledMeta: boolean, faultAt: number): Promise<number> {
  const cluster = c.natsCluster;
  const led = [ledStream ? "stream" : "", ledMeta ? "meta group" : ""].filter(Boolean).join(" and ");
  if (!led) return faultAt;
  const [stream, meta] = await Promise.all([
    ledStream ? cluster.streamLeaderWithout(c.natsAdmin.stream, victim) : undefined,
    ledMeta ? cluster.metaLeaderWithout(victim) : undefined,
  ]);
  const named = [stream && `stream ${cluster.nameOf(stream)}`, meta && `meta ${cluster.nameOf(meta)}`].filter(Boolean).join(", ");
  const at = c.mark(`new leaders of the ${led}: ${named}`);
  c.figure("storeBackMs", at - faultAt);
  return at;
}

/**
 * Waits for the election after the fault: a member elected at or after
 * `faultAt`, or, past `healedAt` + TTL, the leader of before still leading
 * (its renewals went through). Records leaderAgainMs; resolves with when
 * the member was elected, or undefined if the leader of before kept leading.
 */
async function leaderAgain(c: ScenarioContext, faultAt: number, healedAt: number): Promise<number | undefined> {
  const electedSince = () => c.members.some((m) => m.seen.some((e) => e.event === "elected" && e.at >= faultAt));
  await c.sleepUntil(healedAt + c.ttlMs);
  if (!electedSince() && c.leader.running && c.leader.isLeaderNow()) {
    c.figure("leaderAgainMs", 0);
    c.mark(`${c.leader.name} still leads`);
    return undefined;
  }
  const next = await c.waitForElection(c.members, faultAt, Math.max(0, healedAt + c.recoveryBoundMs - Date.now()) + 2_000);
  c.figure("leaderAgainMs", next.event.at - faultAt);
  c.mark(`${next.member.name} leads (token ${next.event.value})`);
  await c.sleep(WATCH_AFTER_MS);
  return next.event.at;
}

function outcome(faultAt: number, healedAt: number, moment: Moment): ScenarioOutcome {
  return { faultAt, healedAt, reelection: moment === "handover" ? "required" : "optional" };
}

export const natsClusterKillStreamLeader = kill("stream-leader", "leading");
export const natsClusterKillStreamLeaderHandover = kill("stream-leader", "handover");
export const natsClusterKillOtherServer = kill("other-server", "leading");
export const natsClusterKillOtherServerHandover = kill("other-server", "handover");
export const natsClusterKillOwnServer = kill("own-server", "leading");
export const natsClusterKillOwnServerHandover = kill("own-server", "handover");
export const natsClusterPartitionStreamLeader = partition("leading");
export const natsClusterPartitionStreamLeaderHandover = partition("handover");

/** Every cluster scenario, in the order the soak runs them. */
export const CLUSTER_SCENARIOS: readonly Scenario[] = [
  natsClusterKillStreamLeader,
  natsClusterKillStreamLeaderHandover,
  natsClusterKillOtherServer,
  natsClusterKillOtherServerHandover,
  natsClusterKillOwnServer,
  natsClusterKillOwnServerHandover,
  natsClusterPartitionStreamLeader,
  natsClusterPartitionStreamLeaderHandover,
];
