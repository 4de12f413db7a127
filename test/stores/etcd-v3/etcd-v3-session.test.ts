// Many elections on one etcd v3 session, against a real etcd: one lease, one
// keep-alive per refresh interval for all of them, one revoke to leave them
// all, keys shared with `etcdctl elect`, and a lost session that ends every
// term before another member can be elected, then rejoins on a new lease.
import assert from "node:assert/strict";
import { spawn, type ChildProcess } from "node:child_process";
import { after, afterEach, before, describe, it } from "node:test";
import { Etcd3 } from "etcd3";
import etcdLeader = require("../../../src/index");
import { startEtcd, type EtcdCluster } from "../../kit/etcd-server";
import { FaultProxy } from "../../kit/fault-proxy";
import { checkHistories, formatReport, type MemberHistory } from "../../kit/leadership-history";
import { etcdMetrics } from "../../kit/store-clients";
import { sleep, waitFor, withDeadline } from "../../kit/waiting";
import { REPO_ROOT } from "../../kit/paths";

const TTL = 2;

let cluster: EtcdCluster;
const clients = new Set<Etcd3>();
const sessions = new Set<etcdLeader.Session>();
const processes = new Set<ChildProcess>();
const proxies = new Set<FaultProxy>();
let keys = 0;

before(async () => {
  cluster = await startEtcd({ enableV2: false });
});

afterEach(async () => {
  await Promise.all([...sessions].map((s) => s.close()));
  sessions.clear();
  for (const child of processes) child.kill("SIGKILL");
  processes.clear();
  await Promise.all([...proxies].map((p) => p.close()));
  proxies.clear();
});

after(async () => {
  for (const c of clients) c.close();
  await cluster?.close();
});

function newClient(hosts: string | string[] = cluster.hostPorts): Etcd3 {
  const client = new Etcd3(etcdLeader.etcd3Options({ hosts }));
  clients.add(client);
  return client;
}

function newSession(client: Etcd3, options: etcdLeader.SessionOptions = { ttl: TTL }): etcdLeader.Session {
  const session = etcdLeader.session(client, options);
  sessions.add(session);
  return session;
}

function uniquePrefix(label: string): string {
  return `/etcd-leader-session/${label}-${++keys}`;
}

/** One election on a session, with what it went through, in Date.now() time for the history checker. */
interface Member {
  key: string;
  name: string;
  election: etcdLeader.Election;
  history: MemberHistory;
  tokens: number[];
  leaders: string[];
}

function member(session: etcdLeader.Session, key: string, name: string): Member {
  const election = session.election(key, name);
  const m: Member = { key, name, election, history: { member: name, events: [] }, tokens: [], leaders: [] };
  election.on("elected", (token) => {
    m.tokens.push(token);
    m.history.events.push({ type: "elected", at: Date.now(), token });
    // The promise it makes: not to believe it leads past its deadline.
    m.history.events.push({ type: "believed", at: Date.now(), until: Date.now() + election.leaseRemaining() });
  });
  election.on("unelected", () => m.history.events.push({ type: "unelected", at: Date.now() }));
  election.on("leader", (leader) => m.leaders.push(leader));
  election.on("error", (error) => m.history.events.push({ type: "error", at: Date.now(), message: error.message }));
  return m;
}

function members(session: etcdLeader.Session, prefix: string, count: number, name: string): Member[] {
  return Array.from({ length: count }, (_, i) => member(session, `${prefix}/${i}`, `${name}-${i}`));
}

/** The member keys under `key`, oldest first, as etcd holds them. */
async function line(client: Etcd3, key: string): Promise<Array<{ key: string; value: string }>> {
  const kvs = await client.getAll().prefix(`${key}/`).sort("Create", "Ascend").exec();
  return kvs.kvs.map((kv) => ({ key: kv.key.toString(), value: kv.value.toString() }));
}

/** No two members of one election believed they led at once. */
function assertOneLeaderAtATime(perKey: Member[][], label: string): void {
  for (const group of perKey) {
    const report = checkHistories(
      group.map((m) => m.history),
      { allowedOverlapMs: 0, endOfHistory: Date.now() },
    );
    assert.deepEqual(report.problems, [], formatReport(`${label} ${group[0]!.key}`, report));
  }
}

function etcdctl(args: string[]): ChildProcess & { output: () => string } {
  const child = spawn("etcdctl", [`--endpoints=${cluster.clientUrls[0]}`, ...args], {
    env: { ...process.env, ETCDCTL_API: "3" },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let output = "";
  child.stdout!.on("data", (chunk) => (output += String(chunk)));
  processes.add(child);
  return Object.assign(child, { output: () => output });
}

async function etcdctlRun(args: string[]): Promise<string> {
  const child = etcdctl(args);
  const code = await new Promise<number | null>((resolve) => child.once("exit", resolve));
  assert.equal(code, 0, `etcdctl ${args.join(" ")} failed`);
  return child.output();
}

/** LeaseKeepAlive messages etcd has received so far (grpc_server_msg_received_total). */
async function messagesReceived(method: string): Promise<number> {
  const sum = await etcdMetrics(cluster.clientUrls[0]!);
  return sum(new RegExp(`^grpc_server_msg_received_total\\{[^}]*grpc_method="${method}"`));
}

const limit = { timeout: 60_000 };

describe("elections on one etcd v3 session", () => {
  it("each election has its own leader, every key is on the session's one lease, and close() hands them all over at once", limit, async (t) => {
    const prefix = uniquePrefix("independent");
    const clientA = newClient();
    const clientB = newClient();
    const a = newSession(clientA);
    const b = newSession(clientB);
    const first = members(a, prefix, 5, "a");
    for (const m of first) m.election.start();
    await waitFor("every election on a to lead", 10_000, () => first.every((m) => m.election.isLeader()));
    const second = members(b, prefix, 5, "b");
    for (const m of second) m.election.start();
    await waitFor("every election on b to follow a", 10_000, () => second.every((m, i) => m.leaders.includes(`a-${i}`)));
    for (const [i, m] of first.entries()) {
      const keysNow = await line(clientA, m.key);
      assert.deepEqual(
        keysNow.map((kv) => kv.value),
        [`a-${i}`, `b-${i}`],
      );
      assert.equal(keysNow[0]!.key, `${m.key}/${a.leaseId}`, "the member key is <key>/<session lease id in hex>");
      assert.equal(keysNow[1]!.key, `${m.key}/${b.leaseId}`);
    }
    assert.notEqual(a.leaseId, b.leaseId);

    const closedAt = Date.now();
    const closing = a.close();
    assert.equal(a.close(), closing, "close() called again is the same close");
    // stop() and leave() of an election during the close: nothing more to do, and no error.
    first[1]!.election.stop();
    await withDeadline(first[2]!.election.leave(), 5_000, "leave() during the close");
    await closing;
    await withDeadline(first[3]!.election.leave(), 5_000, "leave() after the close");
    await waitFor("every election on b to lead", 10_000, () => second.every((m) => m.election.isLeader()));
    const handOver = second.map((m) => (m.history.events.find((e) => e.type === "elected")!.at - closedAt));
    t.diagnostic(`b elected ${Math.min(...handOver)}–${Math.max(...handOver)} ms after a.close() was called`);
    for (const [i, m] of second.entries()) assert.ok(m.tokens[0]! > first[i]!.tokens[0]!, "the successor's token is larger");
    assert.ok(first.every((m) => !m.election.isRunning() && !m.election.isLeader()));
    assertOneLeaderAtATime(first.map((m, i) => [m, second[i]!]), "close");
    assert.throws(() => a.election(`${prefix}/x`, "late"), { name: "SessionClosedError" });
    assert.throws(() => first[0]!.election.start(), { name: "SessionClosedError" });
    const errors = first.flatMap((m) => m.history.events.filter((e) => e.type === "error"));
    assert.deepEqual(errors, [], "no error event on the closed session's elections");
  });

  it("etcdctl elect waits behind an election on a session, leads after it, and a session election then waits behind etcdctl", limit, async () => {
    const key = uniquePrefix("etcdctl");
    const client = newClient();
    const a = newSession(client);
    const leader = member(a, key, "node-a");
    leader.election.start();
    await waitFor("node-a to lead", 10_000, () => leader.election.isLeader());
    const ctl = etcdctl(["elect", key, "ctl"]);
    await waitFor("etcdctl to campaign", 10_000, async () => (await line(client, key)).length === 2);
    await sleep(500);
    assert.equal(ctl.output(), "", "etcdctl does not lead while node-a does");
    await a.close();
    await waitFor("etcdctl to be elected", 10_000, () => ctl.output().includes("ctl"));

    const b = newSession(newClient());
    const follower = member(b, key, "node-b");
    follower.election.start();
    await waitFor("node-b to follow etcdctl", 10_000, () => follower.leaders.includes("ctl"));
    assert.equal(follower.election.isLeader(), false);
    ctl.kill("SIGINT");
    await waitFor("node-b to lead once etcdctl resigned", 10_000, () => follower.election.isLeader());
  });

  it("idle, 200 elections cost about one LeaseKeepAlive per refresh interval, not one each", limit, async (t) => {
    const prefix = uniquePrefix("coalescing");
    const session = newSession(newClient(), { ttl: TTL });
    const all = members(session, prefix, 200, "m");
    for (const m of all) m.election.start();
    await waitFor("every election to lead", 30_000, () => all.every((m) => m.election.isLeader()));
    // Let the first renewals, spread over the first interval, fall into step.
    await sleep(2_500);
    const before = await messagesReceived("LeaseKeepAlive");
    const seconds = 5;
    await sleep(seconds * 1_000);
    const sent = (await messagesReceived("LeaseKeepAlive")) - before;
    const periods = (seconds * 1_000) / ((TTL * 1_000) / 2);
    t.diagnostic(`${sent} LeaseKeepAlive messages in ${seconds} s (${periods} refresh intervals) for 200 elections`);
    assert.ok(sent >= periods - 1 && sent <= periods + 2, `${sent} keep-alives in ${periods} refresh intervals`);
    assert.ok(all.every((m) => m.election.isLeader()), "a leader stepped down while idle");
  });

  it("a change of leader in one election costs the session's other elections no request", limit, async (t) => {
    const prefix = uniquePrefix("leader-change");
    const a = newSession(newClient());
    const b = newSession(newClient());
    const leaders = members(a, prefix, 50, "a");
    for (const m of leaders) m.election.start();
    await waitFor("a to lead every election", 20_000, () => leaders.every((m) => m.election.isLeader()));
    const followers = members(b, prefix, 50, "b");
    for (const m of followers) m.election.start();
    await waitFor("b to follow in every election", 20_000, () => followers.every((m, i) => m.leaders.includes(`a-${i}`)));
    await sleep(1_500);
    const methods = ["Range", "Txn", "DeleteRange", "Put", "Watch", "LeaseGrant", "LeaseRevoke"];
    const count = async () => (await Promise.all(methods.map(messagesReceived))).reduce((x, y) => x + y, 0);
    const before = await count();
    await leaders[0]!.election.leave();
    await waitFor("b-0 to lead", 10_000, () => followers[0]!.election.isLeader());
    await sleep(500);
    const requests = (await count()) - before;
    t.diagnostic(`one change of leader among 50 elections: ${requests} requests and watch messages besides keep-alives`);
    // The leaving key's deletion, and the new leader's watch of its own key
    // (and the other side's watches it replaces): a handful, not 50.
    assert.ok(requests <= 8, `${requests} requests for one change of leader`);
  });
});

describe("a lost etcd v3 session", () => {
  it("a session cut off from etcd ends every term before any successor is elected, then rejoins on a new lease", limit, async (t) => {
    const prefix = uniquePrefix("cut-off");
    const proxy = await FaultProxy.start({ upstream: cluster.hostPorts });
    proxies.add(proxy);
    const a = newSession(newClient(proxy.hostPort));
    const b = newSession(newClient());
    const cut = members(a, prefix, 20, "a");
    for (const m of cut) m.election.start();
    await waitFor("a to lead every election", 10_000, () => cut.every((m) => m.election.isLeader()));
    const others = members(b, prefix, 20, "b");
    for (const m of others) m.election.start();
    await waitFor("b to follow", 10_000, () => others.every((m, i) => m.leaders.includes(`a-${i}`)));
    const oldLease = a.leaseId;

    const cutAt = Date.now();
    proxy.setMode("blackhole");
    await waitFor("b to lead every election", 15_000, () => others.every((m) => m.election.isLeader()));
    const steppedDown = cut.map((m) => m.history.events.find((e) => e.type === "unelected")!.at - cutAt);
    const elected = others.map((m) => m.history.events.find((e) => e.type === "elected")!.at - cutAt);
    t.diagnostic(`after the cut: a stepped down in ${Math.min(...steppedDown)}–${Math.max(...steppedDown)} ms, b elected in ${Math.min(...elected)}–${Math.max(...elected)} ms`);
    assertOneLeaderAtATime(cut.map((m, i) => [m, others[i]!]), "cut");

    proxy.setMode("pass");
    await waitFor("a to rejoin every election on a new lease", 20_000, async () => {
      if (!a.leaseId || a.leaseId === oldLease) return false;
      const lines = await Promise.all(cut.map((m) => line(newClientOnce(), m.key)));
      return lines.every((l, i) => l.map((kv) => kv.key).includes(`${cut[i]!.key}/${a.leaseId}`));
    });
    // Its key is in line before it has read the line and named the leader.
    await waitFor("a's elections to follow b after rejoining", 10_000, () => cut.every((m, i) => m.leaders.at(-1) === `b-${i}`));
    assertOneLeaderAtATime(cut.map((m, i) => [m, others[i]!]), "rejoin");
  });

  it("a session whose lease is revoked from outside rejoins every election with new keys and new tokens", limit, async () => {
    const prefix = uniquePrefix("revoked");
    const a = newSession(newClient());
    const all = members(a, prefix, 10, "a");
    for (const m of all) m.election.start();
    await waitFor("every election to lead", 10_000, () => all.every((m) => m.election.isLeader()));
    const oldLease = a.leaseId!;
    await etcdctlRun(["lease", "revoke", oldLease]);
    await waitFor("every election to lead again on a new lease", 15_000, () => all.every((m) => m.tokens.length >= 2 && m.election.isLeader()));
    assert.notEqual(a.leaseId, oldLease);
    for (const m of all) assert.ok(m.tokens[1]! > m.tokens[0]!, "the new term's token is larger");
    for (const m of all) assert.deepEqual((await line(newClientOnce(), m.key)).map((kv) => kv.key), [`${m.key}/${a.leaseId}`]);
  });

  it("SIGKILL of a process leading many elections on one session: each has a new leader, never two at once", limit, async (t) => {
    const prefix = uniquePrefix("sigkill");
    const count = 50;
    const child = spawn(process.execPath, ["--import", "tsx", "test/fixtures/session-member.ts", cluster.hostPorts[0]!, prefix, String(count), String(TTL)], {
      cwd: REPO_ROOT,
      stdio: ["ignore", "pipe", "inherit"],
    });
    processes.add(child);
    let output = "";
    child.stdout!.on("data", (chunk) => (output += String(chunk)));
    await waitFor("the child to lead every election", 30_000, () => output.includes('"all-elected"'));
    const b = newSession(newClient());
    const successors = members(b, prefix, count, "b");
    for (const m of successors) m.election.start();
    await waitFor("b to follow in every election", 20_000, () => successors.every((m, i) => m.leaders.includes(`child-${i}`)));
    const killedAt = Date.now();
    child.kill("SIGKILL");
    await waitFor("b to lead every election", 20_000, () => successors.every((m) => m.election.isLeader()));
    const times = successors.map((m) => m.history.events.find((e) => e.type === "elected")!.at - killedAt).sort((x, y) => x - y);
    t.diagnostic(`new leaders ${times[0]}–${times.at(-1)} ms after SIGKILL (median ${times[Math.floor(times.length / 2)]}), TTL ${TTL} s`);
    // The child's terms ended with it: none of b's began before the kill.
    assert.ok(times[0]! >= 0, "a successor was elected before the child died");
  });
});

describe("closing a session", () => {
  it("close() while its elections are still joining leaves no key behind, and its elections stopped", limit, async () => {
    const prefix = uniquePrefix("close-early");
    const client = newClient();
    const session = newSession(client);
    const all = members(session, prefix, 50, "early");
    for (const m of all) m.election.start();
    // Some lead, the others are joining: their transactions are on their way.
    await waitFor("a first election to lead", 10_000, () => all.some((m) => m.election.isLeader()), { every: 1 });
    await session.close();
    assert.ok(all.every((m) => !m.election.isRunning()));
    await sleep(500);
    const left = await client.getAll().prefix(`${prefix}/`).keys();
    assert.deepEqual(left, [], "keys left behind by a session closed while joining");
    assert.ok(all.every((m) => !m.election.isLeader()));
  });
});

describe("closing a session whose leaders run routines", () => {
  it("close() waits for the leaders' whileLeading routines to settle before the revoke: no successor's routine starts before", limit, async () => {
    const prefix = uniquePrefix("drain");
    const session = newSession(newClient());
    const other = newSession(newClient());
    const keys = [0, 1, 2].map((i) => `${prefix}/${i}`);
    const settledAt: number[] = [];
    const successorStartedAt: number[] = [];
    for (const [i, key] of keys.entries()) {
      // Each routine takes a while to finish once its signal aborts: 300, 500 and 700 ms.
      void session
        .election(key, `a-${i}`)
        .whileLeading(({ signal }) =>
          new Promise<void>((resolve) =>
            signal.addEventListener("abort", () =>
              setTimeout(() => {
                settledAt.push(performance.now());
                resolve();
              }, 300 + 200 * i),
            ),
          ),
        )
        .catch(() => undefined);
    }
    const probe = newClient();
    await waitFor("the first session to lead every election", 10_000, async () =>
      (await Promise.all(keys.map((k) => etcdLeader.whoLeads(probe, k)))).every((leader) => leader?.name.startsWith("a-")),
    );
    const successors = keys.map((key, i) => other.election(key, `b-${i}`));
    for (const successor of successors) {
      void successor.whileLeading(() => void successorStartedAt.push(performance.now())).catch(() => undefined);
    }
    await waitFor("the other session to wait in every line", 10_000, () => successors.every((b) => b.currentLeader()?.startsWith("a-")));
    const closedAt = performance.now();
    await session.close();
    const closeTook = performance.now() - closedAt;
    await waitFor("every successor's routine", 10_000, () => successorStartedAt.length === keys.length);
    assert.equal(settledAt.length, keys.length, "close() resolved after every routine settled");
    assert.ok(Math.min(...successorStartedAt) >= Math.max(...settledAt), "a successor's routine started before one of ours settled");
    assert.ok(closeTook >= 650, `close() took ${closeTook.toFixed(0)} ms: it waited for the slowest routine (700 ms)`);
  });
});

describe("session options", () => {
  it("are checked as an election's are, and name the value", () => {
    const client = newClient();
    assert.throws(() => etcdLeader.session(client, { ttl: -1 }), /ttl must be a positive whole number of seconds, got -1/);
    assert.throws(() => etcdLeader.session(client, { ttl: 2, refreshInterval: 5_000 }), /refreshInterval \(5000 ms\) must be shorter/);
    assert.throws(() => etcdLeader.session(client, { tll: 2 } as never), /unknown session option "tll"/);
    assert.throws(() => etcdLeader.session(client, 5 as never), /session options must be an object, got number/);
    assert.throws(() => etcdLeader.session({ get() {} }), /a session needs an etcd3 client/);
    const session = newSession(client);
    assert.throws(() => session.election("/k", "n", { ttl: 5 } as never), /ttl is the session's/);
    assert.throws(() => session.election("/k", "", {}), /name must be a non-empty string/);
    assert.throws(() => session.election("/k", "n", { stepDownMargin: -1 }), /stepDownMargin must be a positive number of milliseconds, got -1/);
  });

  it("an election without options of its own takes the session's; one with its own takes those", limit, async () => {
    // TTL 4 s: the session's leaders step down 500 ms before it, the one
    // given its own margin 1500 ms before it, counted from renewals sent
    // within milliseconds of each other.
    const session = newSession(newClient(), { ttl: 4, stepDownMargin: 500 });
    const plain = session.election(uniquePrefix("plain-options"), "plain").start();
    const own = session.election(uniquePrefix("own-options"), "own", { stepDownMargin: 1_500 }).start();
    await waitFor("both to lead", 10_000, () => plain.isLeader() && own.isLeader());
    // Both counted from the same keep-alive once it is answered.
    await sleep(2_500);
    const apart = plain.leaseRemaining() - own.leaseRemaining();
    assert.ok(apart > 700 && apart < 1_300, `the terms end ${apart} ms apart, not about 1000 ms`);
  });

  it("one election per key runs on a session at a time", limit, async () => {
    const session = newSession(newClient());
    const key = uniquePrefix("same-key");
    const first = session.election(key, "first").start();
    const second = session.election(key, "second");
    assert.throws(() => second.start(), /already runs on this session/);
    assert.equal(second.isRunning(), false);
    await first.leave();
    second.start();
    await waitFor("the second to lead", 10_000, () => second.isLeader());
  });
});

let spare: Etcd3 | undefined;
function newClientOnce(): Etcd3 {
  return (spare ??= newClient());
}
