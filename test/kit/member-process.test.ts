import { test, describe, before, after } from "node:test";
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { startEtcd, type EtcdCluster } from "./etcd-server";
import { checkHistories, formatReport } from "./leadership-history";
import { killAllClis, runningClis } from "./cli-process";
import { firstOf, type RecordedEvent } from "./event-recorder";
import { spawnMember, spawnMembers, type MemberProcess } from "./member-process";

const TTL_SECONDS = 2;

describe("election members in their own processes", () => {
  let etcd: EtcdCluster;
  const freshKey = (): string => `/test/member-process/${randomUUID()}`;

  before(async () => {
    etcd = await startEtcd();
  });
  after(async () => {
    await killAllClis();
    await etcd?.close();
  });

  test("three v2 members: one leader, and another after it is SIGKILLed", async (t) => {
    const members = spawnMembers(3, { backend: "v2", hosts: etcd.hostPorts, key: freshKey(), ttl: TTL_SECONDS });
    const first = await firstOf(members, "an election", 15_000, is("elected"));
    // Give the others time to (wrongly) believe they lead too.
    await firstOf(members.filter((m) => m !== first.member), "a follower", 5_000, is("leader"));
    await new Promise((resolve) => setTimeout(resolve, 500));
    assert.deepEqual(leaders(members), [first.member.name]);
    assert.equal(electedCount(members), 1);

    const killedAt = Date.now();
    await first.member.kill("SIGKILL");
    const survivors = members.filter((m) => m !== first.member);
    const second = await firstOf(survivors, "the next election", 4 * TTL_SECONDS * 1_000, is("elected"));
    const failoverMs = second.event.at - killedAt;
    // The killed leader's key has to expire first: that takes up to a TTL, never much more.
    assert.ok(failoverMs <= (TTL_SECONDS + 1.5) * 1_000, `failover took ${failoverMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 300));
    assert.deepEqual(leaders(survivors), [second.member.name]);

    await Promise.all(survivors.map((m) => m.stop()));
    for (const member of survivors) {
      assert.ok(member.seen.some(is("left")), `${member.name} did not leave:\n${member.output()}`);
      assert.equal(member.seen.at(-1)?.event, "exit");
    }

    const report = checkHistories(
      members.map((m) => m.history()),
      { allowedOverlapMs: 0, endOfHistory: Date.now() },
    );
    const summary = formatReport("sigkill-leader", report);
    t.diagnostic(`${summary}; failover ${failoverMs} ms`);
    assert.ok(report.ok, summary);
    assert.equal(report.intervals.length, 2, summary);
    assert.equal(report.tokensIncrease.ok, true);
    assert.deepEqual(report.intervals.map((i) => i.member), [first.member.name, second.member.name]);
    assert.equal(report.intervals[0]!.endedBy === "exit" || report.intervals[0]!.endedBy === "believed", true);
  });

  test("a frozen leader is replaced, and admits it once thawed", async (t) => {
    const members = spawnMembers(2, { backend: "v2", hosts: etcd.hostPorts, key: freshKey(), ttl: TTL_SECONDS, namePrefix: "f" });
    const first = await firstOf(members, "an election", 15_000, is("elected"));
    const other = members.find((m) => m !== first.member)!;
    await other.next("leader", 5_000);

    first.member.pause();
    await other.next("elected", 4 * TTL_SECONDS * 1_000);
    // Stay frozen well into the new term, so that believing past the promise would show as a long overlap.
    await new Promise((resolve) => setTimeout(resolve, 500));
    const thawIndex = first.member.mark;
    first.member.resume();
    await first.member.next("unelected", 5_000, thawIndex);

    await Promise.all(members.map((m) => m.stop()));
    const report = checkHistories(
      members.map((m) => m.history()),
      { allowedOverlapMs: 0, endOfHistory: Date.now() },
    );
    const summary = formatReport("sigstop-leader", report);
    t.diagnostic(summary);
    assert.ok(report.ok, summary);
    // The frozen member's term ends where it promised, not where it woke up.
    assert.equal(report.intervals[0]!.member, first.member.name);
    assert.equal(report.intervals[0]!.endedBy, "believed", summary);
  });

  test("v3 members: a leader that exits cleanly hands over without waiting for its lease", async () => {
    const members = spawnMembers(2, { backend: "v3", hosts: etcd.hostPorts, key: freshKey(), ttl: TTL_SECONDS, namePrefix: "v" });
    await explained(members, async () => {
      const first = await firstOf(members, "an election", 15_000, is("elected"));
      const other = members.find((m) => m !== first.member)!;
      await other.next("leader", 5_000);
      const exitAt = Date.now();
      await first.member.stop();
      const next = await other.next("elected", 4 * TTL_SECONDS * 1_000);
      // leave() revoked the lease, so the handover does not wait for the TTL.
      assert.ok(next.at - exitAt < TTL_SECONDS * 1_000, `handover took ${next.at - exitAt} ms`);
      await other.stop();
      const report = checkHistories(
        members.map((m) => m.history()),
        { allowedOverlapMs: 0, endOfHistory: Date.now() },
      );
      assert.ok(report.ok, formatReport("v3-clean-exit", report));
      assert.equal(report.intervals[0]!.endedBy, "unelected");
    });
  });

  test("a wait gives up with the member's output; stop() leaves and exits 0", async () => {
    const member = spawnMember({ backend: "v2", hosts: etcd.hostPorts, key: freshKey(), name: "solo", ttl: TTL_SECONDS });
    await member.next("elected", 15_000);
    assert.equal(member.isLeaderNow(), true);
    await assert.rejects(member.next("error-state", 200), (err: Error) => {
      assert.match(err.message, /solo: error-state: not within 200 ms/);
      assert.match(err.message, /"event":"elected"/);
      return true;
    });
    await member.stop();
    assert.equal(member.isLeaderNow(), false);
    const exit = member.seen.at(-1);
    assert.deepEqual(exit && exit.event === "exit" ? [exit.code, exit.signal] : exit, [0, null]);
    await assert.rejects(member.next("elected", 1_000, member.mark), /exited first/);
  });

  test("killAllClis leaves no process behind", async () => {
    const members: MemberProcess[] = spawnMembers(2, { backend: "v2", hosts: etcd.hostPorts, key: freshKey(), ttl: TTL_SECONDS, namePrefix: "k" });
    members[1]!.pause();
    await killAllClis();
    assert.deepEqual(runningClis(), []);
    for (const member of members) {
      assert.throws(() => process.kill(member.pid, 0), { code: "ESRCH" }, `${member.name} (${member.pid}) still exists`);
    }
  });
});

/** Runs `body`; if it fails, adds every member's recent output to the error, since the culprit may be another member. */
async function explained(members: MemberProcess[], body: () => Promise<void>): Promise<void> {
  try {
    await body();
  } catch (err) {
    const message = err instanceof Error ? err.message : String(err);
    throw new Error(`${message}\n--- all members:\n${members.map((m) => m.output()).join("\n")}`, { cause: err });
  }
}

function leaders(members: MemberProcess[]): string[] {
  return members.filter((m) => m.isLeaderNow()).map((m) => m.name);
}

function electedCount(members: MemberProcess[]): number {
  return members.reduce((n, m) => n + m.count("elected"), 0);
}

function is(name: RecordedEvent["event"]): (event: RecordedEvent) => boolean {
  return (event) => event.event === name;
}
