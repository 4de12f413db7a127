// Faults of the store server itself: a quick restart and an outage longer
// than the TTL (etcd, or nats-server on NATS runs: same store dir, same port),
// and the loss of the raft leader of a three-server etcd cluster.
import type { Scenario } from "./types";

export const etcdQuickRestart: Scenario = {
  id: "etcd-quick-restart",
  title:
    "etcd is stopped and started again on the same data dir, down for less than the TTL: the leader may keep " +
    "its term or hand over, somebody leads within TTL + 2 s of etcd's start, and every member is back in line",
  async run(c) {
    const server = c.server;
    const faultAt = c.mark("stop etcd");
    await c.stopEtcd(server);
    await c.sleep(200);
    const startAt = c.mark("start etcd again");
    await c.startEtcd(server);
    await server.waitReady(10_000);
    const readyAt = c.mark("etcd ready");
    const downMs = readyAt - faultAt;
    c.figure("etcdDownMs", downMs);
    // The scenario is about an outage shorter than the TTL; a slower restart would test something else.
    c.check(downMs < c.ttlMs, `etcd was down for ${downMs} ms, not less than the TTL: the scenario did not happen as meant`);
    return { faultAt, healedAt: startAt, reelection: "optional" };
  },
};

export const etcdLongOutage: Scenario = {
  id: "etcd-long-outage",
  title:
    "etcd is down for TTL + 1.5 s, then started again on the same data dir: the leader steps down during the " +
    "outage, and a leader is elected within TTL + 2 s of etcd's start; every member recovers",
  async run(c) {
    const server = c.server;
    const leader = c.leader;
    const outageMs = c.ttlMs + 1_500;
    const faultAt = c.mark(`stop etcd for ${outageMs} ms`);
    await c.stopEtcd(server);
    await c.sleepUntil(faultAt + outageMs);
    c.check(
      leader.seen.some((e) => e.event === "unelected" && e.at >= faultAt),
      `${leader.name} did not step down while etcd was down`,
    );
    const startAt = c.mark("start etcd again");
    await c.startEtcd(server);
    await server.waitReady(10_000);
    c.figure("etcdStartMs", c.mark("etcd ready") - startAt);
    const next = await c.waitForElection(c.members, startAt);
    c.figure("electedAfterStartMs", next.event.at - startAt);
    return { faultAt, healedAt: startAt, reelection: "required" };
  },
};

export const clusterLeaderCrash: Scenario = {
  id: "etcd-cluster-leader-crash",
  etcdServers: 3,
  notFor: {
    nats: "a raft cluster of etcd servers; the NATS runs use one nats-server (the JetStream cluster's scenarios are nats-cluster-faults.ts)",
    postgres: "a raft cluster of etcd servers; the PostgreSQL runs use one server",
    redis: "a raft cluster of etcd servers; the Redis runs use one redis-server",
  },
  title:
    "three etcd servers, each member's proxy spreading its connections over all three: the raft leader is " +
    "SIGKILLed, the other two elect a new one, the killed server is started again a second later; somebody " +
    "leads within TTL + 2 s of the cluster serving again, and every member is back in line",
  async run(c) {
    const raftLeader = await c.etcd.leader();
    const faultAt = c.mark(`SIGKILL etcd raft leader ${raftLeader.name}`);
    await c.stopEtcd(raftLeader, "kill");
    await c.etcd.waitReady(10_000);
    const servingAt = c.mark(`the other two serve again (raft leader ${(await c.etcd.leader()).name})`);
    c.figure("raftFailoverMs", servingAt - faultAt);
    await c.sleep(1_000);
    c.mark(`start ${raftLeader.name} again`);
    await c.startEtcd(raftLeader);
    await raftLeader.waitReady(10_000);
    c.mark(`${raftLeader.name} ready`);
    return { faultAt, healedAt: servingAt, reelection: "optional" };
  },
};
