// whileLeading() under faults, with members in separate processes
// (test/fixtures/member.ts in "lead" mode), each behind its own fault proxy:
// the routine's signal aborts before the successor is elected when the leader
// is cut off, and (by at most a watch delivery, the README's one exception)
// when its key is deleted from outside; a leader frozen past its TTL refuses
// to act on waking before its signal aborts. The routines' own reports, the
// span from each routine's start to its abort, are checked with the same
// history checker as the fault suite.
//
// LEAD_FAULT_RUNS=10 repeats the partition case and prints the median and
// minimum of how long after the fault the abort came and how long before the
// successor's election.
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { after, afterEach, describe, it } from "node:test";
import { EtcdAdmin } from "./faults/etcd-admin";
import { EXTERNAL_DELETE_OVERLAP_MS } from "./faults/store-faults";
import { BACKENDS, type Backend } from "./faults/types";
import { useEtcd } from "./helpers/hooks";
import { FaultProxy } from "./helpers/fault-proxy";
import { checkHistories, formatReport, type HistoryEvent, type MemberHistory } from "./helpers/leadership-history";
import { killAllMembers, spawnMember, type MemberEvent, type MemberProcess } from "./helpers/member-process";
import { sleep } from "./helpers/waiting";

const TTL_SECONDS = 2;
const TTL_MS = TTL_SECONDS * 1_000;
/** tsx start-up of a member on a loaded 2-core machine. */
const START_MS = 30_000;
/** A successor is elected within TTL + 2 s of a fault; this leaves room. */
const FAILOVER_MS = TTL_MS + 8_000;
const RUNS = Math.max(1, Number(process.env.LEAD_FAULT_RUNS ?? 1));

// Registered first, so that the members are gone before etcd goes.
after(() => killAllMembers());
const etcd = useEtcd();
const proxies: FaultProxy[] = [];

afterEach(async () => {
  await killAllMembers();
  await Promise.all(proxies.splice(0).map((proxy) => proxy.close()));
});

interface Pair {
  key: string;
  leader: MemberProcess;
  follower: MemberProcess;
  leaderProxy: FaultProxy;
}

/** Two members running a routine under whileLeading(); m0 leads and m1 waits behind it. */
async function leaderAndFollower(backend: Backend): Promise<Pair> {
  const key = `/lead-faults-${backend}/${randomUUID()}`;
  const start = async (name: string) => {
    const proxy = await FaultProxy.start({ upstream: etcd.hostPorts });
    proxies.push(proxy);
    return { proxy, member: spawnMember({ backend, hosts: [proxy.hostPort], key, name, ttl: TTL_SECONDS, mode: "lead" }) };
  };
  const first = await start("m0");
  await first.member.waitFor((e) => e.type === "routine-start", START_MS);
  const second = await start("m1");
  await second.member.waitFor((e) => e.type === "leader" && e.leader === "m0", START_MS);
  return { key, leader: first.member, follower: second.member, leaderProxy: first.proxy };
}

/**
 * A member's history as its routine saw it: a term from the routine's start
 * to its signal's abort, bounded by the deadline the member promised.
 */
function routineHistory(member: MemberProcess): MemberHistory {
  const events: HistoryEvent[] = [];
  // The routine starts just after `elected`, after the term's first promise: carry that promise into it.
  let promise: number | undefined;
  for (const event of member.events) {
    if (event.type === "routine-start") {
      events.push({ type: "elected", at: event.at, token: event.token });
      if (promise !== undefined) events.push({ type: "believed", at: event.at, until: promise });
    } else if (event.type === "routine-abort") {
      events.push({ type: "unelected", at: event.at });
    } else if (event.type === "believed") {
      promise = event.until;
      events.push(event);
    } else if (event.type === "unelected") {
      promise = undefined;
    } else if (event.type === "exit" || event.type === "crash") {
      events.push(event);
    }
  }
  return { member: member.name, events };
}

function checkRoutines(pair: Pair, allowedOverlapMs: number): void {
  const report = checkHistories([routineHistory(pair.leader), routineHistory(pair.follower)], {
    allowedOverlapMs,
    endOfHistory: Date.now(),
  });
  assert.ok(report.ok, `${formatReport("routines", report)}\n${pair.leader.recentOutput()}\n${pair.follower.recentOutput()}`);
}

type Found<T extends MemberEvent["type"]> = Extract<MemberEvent, { type: T }>;

async function next<T extends MemberEvent["type"]>(member: MemberProcess, type: T, fromIndex: number, timeoutMs = FAILOVER_MS): Promise<Found<T>> {
  return (await member.waitFor((e) => e.type === type, timeoutMs, { fromIndex })) as Found<T>;
}

/** The leader's acts as leader, stamped at or after `from`. */
function actsSince(member: MemberProcess, from: number): MemberEvent[] {
  return member.events.filter((e) => e.type === "act" && e.at >= from);
}

async function partition(backend: Backend): Promise<{ abortAfterFaultMs: number; abortBeforeSuccessorMs: number }> {
  const pair = await leaderAndFollower(backend);
  const marks = { leader: pair.leader.events.length, follower: pair.follower.events.length };
  const faultAt = Date.now();
  pair.leaderProxy.setMode("blackhole");
  const abort = await next(pair.leader, "routine-abort", marks.leader);
  const successor = await next(pair.follower, "elected", marks.follower);
  assert.equal(abort.reason, "LeaseExpiredError");
  assert.ok(
    abort.at < successor.at,
    `the routine's signal aborted at ${abort.at}, ${abort.at - successor.at} ms after the successor was elected at ${successor.at}`,
  );
  assert.deepEqual(actsSince(pair.leader, abort.at + 1), [], "the routine acted after its signal aborted");
  checkRoutines(pair, 0);
  return { abortAfterFaultMs: abort.at - faultAt, abortBeforeSuccessorMs: successor.at - abort.at };
}

for (const backend of BACKENDS) {
  describe(`whenElected() called off, in a process of its own, etcd ${backend} API`, () => {
    it("rejects with an AbortError, takes back its membership, and leaves nothing that keeps the process alive", { timeout: 60_000 }, async () => {
      const key = `/lead-faults-${backend}/${randomUUID()}`;
      const hosts = etcd.hostPorts;
      const leader = spawnMember({ backend, hosts, key, name: "m0", ttl: TTL_SECONDS });
      await leader.waitFor((e) => e.type === "elected", START_MS);
      // It aborts its wait as soon as it hears of m0, then closes its client and does nothing more.
      const waiter = spawnMember({ backend, hosts, key, name: "m1", ttl: TTL_SECONDS, mode: "abandon-wait" });
      const rejected = await next(waiter, "wait-rejected", 0, START_MS);
      assert.equal(rejected.error, "AbortError");
      const exit = await Promise.race([waiter.exited, sleep(10_000).then(() => undefined)]);
      assert.ok(exit, `the process did not exit by itself within 10 s of the rejection\n${waiter.recentOutput()}`);
      assert.equal(exit.code, 0, waiter.recentOutput());
      const line = await new EtcdAdmin(backend, etcd.hostPorts).line(key);
      assert.deepEqual(line.map((entry) => entry.name), ["m0"]);
    });
  });

  describe(`whileLeading() under faults, members in processes, etcd ${backend} API`, () => {
    it("the routine's signal aborts (LeaseExpiredError) before the successor is elected when the leader is cut off (blackhole)", { timeout: 60_000 * RUNS }, async (t) => {
      const figures: Array<{ abortAfterFaultMs: number; abortBeforeSuccessorMs: number }> = [];
      for (let run = 0; run < RUNS; run++) {
        figures.push(await partition(backend));
        await killAllMembers();
        await Promise.all(proxies.splice(0).map((proxy) => proxy.close()));
      }
      const summary = (name: "abortAfterFaultMs" | "abortBeforeSuccessorMs") => {
        const values = figures.map((f) => f[name]).sort((a, b) => a - b);
        const middle = values.length / 2;
        const median = values.length % 2 ? values[Math.floor(middle)]! : (values[middle - 1]! + values[middle]!) / 2;
        return `${name} median ${median} min ${values[0]} (n=${values.length}: ${values.join(", ")})`;
      };
      t.diagnostic(`${backend} partition: ${summary("abortAfterFaultMs")}; ${summary("abortBeforeSuccessorMs")}`);
    });

    it("the routine's signal aborts (MembershipRemovedError) when its key is deleted from outside, within a watch delivery of the successor", { timeout: 60_000 }, async () => {
      const pair = await leaderAndFollower(backend);
      const marks = { leader: pair.leader.events.length, follower: pair.follower.events.length };
      const admin = new EtcdAdmin(backend, etcd.hostPorts);
      const [entry] = await admin.line(pair.key);
      await admin.deleteKey(entry!.key);
      const abort = await next(pair.leader, "routine-abort", marks.leader);
      const successor = await next(pair.follower, "elected", marks.follower);
      assert.equal(abort.reason, "MembershipRemovedError");
      assert.ok(
        abort.at <= successor.at + EXTERNAL_DELETE_OVERLAP_MS,
        `the routine's signal aborted ${abort.at - successor.at} ms after the successor was elected`,
      );
      checkRoutines(pair, EXTERNAL_DELETE_OVERLAP_MS);
    });

    it("a leader frozen (SIGSTOP) past its TTL does not act on waking: isLeader() is false before its signal aborts (LeaseExpiredError)", { timeout: 60_000 }, async (t) => {
      const pair = await leaderAndFollower(backend);
      const marks = { leader: pair.leader.events.length, follower: pair.follower.events.length };
      const frozenAt = Date.now();
      pair.leader.pause();
      await next(pair.follower, "elected", marks.follower);
      await sleep(Math.max(0, frozenAt + TTL_MS + 1_500 - Date.now()));
      const resumedAt = Date.now();
      pair.leader.resume();
      const abort = await next(pair.leader, "routine-abort", marks.leader);
      assert.equal(abort.reason, "LeaseExpiredError");
      assert.deepEqual(actsSince(pair.leader, resumedAt), [], "the routine acted as leader after waking");
      checkRoutines(pair, 0);
      const refused = pair.leader.events.some((e) => e.type === "act-refused" && e.at >= resumedAt);
      t.diagnostic(`on waking, a tick ${refused ? "found isLeader() false before" : "did not run before"} the signal aborted`);
    });
  });
}
