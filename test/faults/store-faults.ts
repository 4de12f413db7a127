// Things done to the store's data from outside the election: history that
// watches need is made to disappear (etcd), and the leader's key is deleted by
// an operator (etcd, and the NATS bucket's key). NATS-only ones: nats-faults.ts.
import { randomUUID } from "node:crypto";
import { checkNextInLine } from "./member-faults";
import type { Scenario } from "./types";

/** More than etcd's v2 event history (1000 events). */
const UNRELATED_WRITES = 1_200;

export const historyGone: Scenario = {
  id: "history-gone",
  notFor: {
    nats: "etcd's event history and compaction; a NATS watch is a consumer that resumes from its own sequence",
    postgres: "etcd's event history and compaction; PostgreSQL's notices have no history to lose",
    redis: "etcd's event history and compaction; Redis pub/sub has no history to lose",
  },
  title:
    `${UNRELATED_WRITES} unrelated writes while the members wait, so that etcd no longer has the history their ` +
    "watches started from (v3: then compacted), then every member's connections are reset so that every watch " +
    "must be made again; then the leader is stopped: a follower still takes over within TTL + 2 s",
  async run(c) {
    const floodAt = c.mark(`${UNRELATED_WRITES} unrelated writes`);
    const { before, after } = await c.admin.flood(`/faults-unrelated/${randomUUID()}`, UNRELATED_WRITES);
    c.figure("floodMs", Date.now() - floodAt);
    if (c.backend === "v3") {
      c.mark(`etcdctl compact ${after}`);
      await c.admin.compact(after);
    }
    // The premise: a watch from before the writes can no longer be served.
    c.check(await c.admin.historyGoneSince(before + 1), `etcd still has the history from index ${before + 1}`);
    c.mark("reset every member's connections");
    for (const proxy of c.proxies.values()) proxy.resetConnections();
    // Members re-establish what they lost; then a settled election again.
    const leader = await c.until(
      async () => {
        const current = c.currentLeader();
        const line = await c.line();
        return current && line.length === c.members.length && line[0]!.name === current.name ? current : undefined;
      },
      c.recoveryBoundMs,
      "a leader and a full line after the reset",
    );
    await c.sleep(c.ttlMs / 2);

    c.expectExit(leader, "left");
    const faultAt = c.mark(`stop ${leader.name}`);
    await leader.stop();
    const next = await c.waitForElection(c.running(), faultAt);
    c.figure("handoverMs", next.event.at - faultAt);
    return { faultAt, healedAt: faultAt, reelection: "required" };
  },
};

/**
 * How long the old leader and its successor may both believe they lead after
 * the leader's key is deleted from outside. Each learns of the deletion from
 * its own watch (the README's one exception to the no-overlap guarantee), so
 * the bound is a watch delivery's difference between two processes on one
 * loaded host; the successor also needs one more round trip (a renewal)
 * before it leads, so the overlap measured is normally 0.
 */
export const EXTERNAL_DELETE_OVERLAP_MS = 100;

export const externalDelete: Scenario = {
  id: "external-delete",
  allowedOverlapMs: EXTERNAL_DELETE_OVERLAP_MS,
  title:
    "the leader's key is deleted from outside (v2: HTTP DELETE; v3: etcdctl del; NATS: a KV delete; PostgreSQL: a DELETE of its row; Redis: DEL): the leader steps down, the next " +
    `member is elected, the two overlap by at most ${EXTERNAL_DELETE_OVERLAP_MS} ms, and the old leader rejoins ` +
    "at the back of the line",
  async run(c) {
    const leader = c.leader;
    const entry = c.initialLine[0]!;
    const faultAt = c.mark(`delete ${leader.name}'s key ${entry.key} from outside`);
    await (c.queue ? c.admin.deleteKey(entry.key) : c.raceAdmin.deleteKey(c.key));
    // On NATS the old leader races for the key again too (after its back-off).
    const next = await c.waitForElection(c.queue ? c.followers : c.members, faultAt);
    const stepDown = await c.waitForEvent(leader, (e) => e.event === "unelected", faultAt, c.recoveryBoundMs, "step down");
    c.figure("stepDownAfterDeleteMs", stepDown.at - faultAt);
    c.figure("successorElectedAfterDeleteMs", next.event.at - faultAt);
    // Positive: both believed they led for that long.
    c.figure("oldLeaderLateByMs", stepDown.at - next.event.at);
    checkNextInLine(c, next.member);
    if (!c.queue) {
      // A race-style store holds nothing for a follower: the old leader simply follows the new one (or won the race again).
      if (next.member !== leader) {
        await c.waitForEvent(leader, (e) => e.event === "leader" && e.value === next.member.name, faultAt, c.recoveryBoundMs, `follow ${next.member.name}`);
      }
      return { faultAt, healedAt: faultAt, reelection: "required" };
    }
    const back = await c.until(
      async () => {
        const line = await c.line();
        const mine = line.find((e) => e.name === leader.name);
        return mine && mine.token > entry.token && mine === line.at(-1) ? mine : undefined;
      },
      c.recoveryBoundMs,
      `${leader.name} back at the end of the line`,
    );
    c.figure("rejoinedAfterDeleteMs", Date.now() - faultAt);
    c.check(back.key !== entry.key, `${leader.name}'s deleted key is back`);
    await c.waitForEvent(leader, (e) => e.event === "leader" && e.value === next.member.name, faultAt, c.recoveryBoundMs, `follow ${next.member.name}`);
    return { faultAt, healedAt: faultAt, reelection: "required" };
  },
};

export const wholeElectionDelete: Scenario = {
  id: "whole-election-delete",
  members: 4,
  notFor: {
    nats: "a line of memberships; a NATS election is one key (see nats-key-purge and nats-bucket-recreate)",
    postgres: "a line of memberships; a PostgreSQL election is one row (see external-delete)",
    redis: "a line of memberships; a Redis election is one key (see external-delete)",
  },
  allowedOverlapMs: EXTERNAL_DELETE_OVERLAP_MS,
  title:
    "every membership is deleted at once from outside (v2: recursive DELETE of the directory; v3: etcdctl del " +
    "--prefix): no waiting member is elected on its deleted key; the leader steps down, everyone rejoins and one " +
    "new leader is elected, with a larger fencing token than any before",
  async run(c) {
    const before = c.initialLine;
    const newestToken = Math.max(...before.map((e) => e.token));
    const faultAt = c.mark("delete the whole election from outside");
    await c.admin.deleteElection(c.key);
    const next = await c.waitForElection(c.members, faultAt);
    c.figure("reelectedAfterDeleteMs", next.event.at - faultAt);
    const stepDown = await c.waitForEvent(c.leader, (e) => e.event === "unelected", faultAt, c.recoveryBoundMs, "step down");
    c.figure("stepDownAfterDeleteMs", stepDown.at - faultAt);
    await c.until(
      async () => {
        const line = await c.line();
        return line.length === c.members.length && line.every((e) => e.token > newestToken) ? line : undefined;
      },
      c.recoveryBoundMs,
      "every member back in line on a new membership",
    );
    c.figure("allRejoinedAfterDeleteMs", Date.now() - faultAt);
    for (const member of c.members) {
      for (const event of member.seen) {
        if (event.event !== "elected" || event.at < faultAt) continue;
        c.check(
          event.value > newestToken,
          `${member.name} was elected with token ${event.value}, a membership deleted with the election ` +
            `(newest before the delete: ${newestToken})`,
        );
      }
    }
    return { faultAt, healedAt: faultAt, reelection: "required" };
  },
};
