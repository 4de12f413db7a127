// The port's behaviour against a real etcd (v2 API, through node-etcd): the
// arguments it accepts, its life cycle, fencing tokens, leave(), the four
// defects of etcd-leader 0.0.1 it fixes, foreign keys, and the observer.
//
// Each test uses its own election key and stops every member it made (see
// `cleanup`), so a failing test neither hangs nor disturbs the next one.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { request } from "node:http";
import { join } from "node:path";
import { CountingProxy, type ProxiedRequest } from "../../kit/counting-proxy";
import { EventRecorder } from "../../kit/event-recorder";
import { exitWhenDone, useCleanup, useEtcd } from "../../kit/hooks";
import { sleep, waitFor, withDeadline } from "../../kit/waiting";
import { freePort } from "../../kit/free-port";
import etcdLeader = require("../../../src/index");
import { FIXTURES, REPO_ROOT } from "../../kit/paths";

// eslint-disable-next-line @typescript-eslint/no-require-imports
const Etcd = require("node-etcd");

type Election = etcdLeader.Election;

const etcd = useEtcd();
exitWhenDone();

// ---------------------------------------------------------------------------
// Helpers

const now = () => performance.now();

/** Run after each test, newest first: stops members, closes proxies, restarts etcd. */
const cleanup = useCleanup();

let keyCounter = 0;
/** A fresh election key for one test. */
function electionKey(label: string): string {
  keyCounter += 1;
  return `/election-v2/${keyCounter}-${label}`;
}

function client(hostPort: string = etcd.hostPorts[0]!): unknown {
  return new Etcd([hostPort]);
}

/** A member of an election with every event it emitted recorded, stopped after the test. */
class Member extends EventRecorder {
  constructor(readonly e: Election, readonly name: string, recordErrors = true) {
    super(e, name, { recordErrors });
    cleanup.push(() => e.leave());
  }
}

function member(
  key: string,
  name: string,
  ttl?: number | string,
  options?: etcdLeader.ElectionOptions,
  via: unknown = client(),
): Member {
  return new Member(etcdLeader(via, key, name, ttl, options), name);
}

interface EtcdNode {
  key: string;
  value?: string;
  dir?: boolean;
  ttl?: number;
  createdIndex: number;
  modifiedIndex: number;
  nodes?: EtcdNode[];
}

interface EtcdAnswer {
  status: number;
  index: number;
  body: { node?: EtcdNode; errorCode?: number; [k: string]: unknown };
}

/** One request to etcd's v2 keys API, outside node-etcd and outside any proxy. */
function etcdHttp(method: string, path: string, form?: Record<string, string>, hostPort = etcd.hostPorts[0]!): Promise<EtcdAnswer> {
  const [host, port] = hostPort.split(":");
  const body = form ? new URLSearchParams(form).toString() : undefined;
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host,
        port: Number(port),
        method,
        path: `/v2/keys${path}`,
        agent: false,
        timeout: 3_000,
        headers: body ? { "content-type": "application/x-www-form-urlencoded", "content-length": Buffer.byteLength(body) } : {},
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (c: Buffer) => chunks.push(c));
        res.on("end", () => {
          const text = Buffer.concat(chunks).toString("utf8");
          resolve({ status: res.statusCode!, index: Number(res.headers["x-etcd-index"]), body: text ? JSON.parse(text) : {} });
        });
        res.on("error", reject);
      },
    );
    req.on("timeout", () => req.destroy(new Error(`${method} ${path}: etcd did not answer`)));
    req.on("error", reject);
    req.end(body);
  });
}

/** The nodes directly under `key` (members and anything else), oldest first; [] if there is no such directory. */
async function listDir(key: string): Promise<EtcdNode[]> {
  const answer = await etcdHttp("GET", `${key}?sorted=true`);
  if (answer.status === 404) return [];
  assert.equal(answer.status, 200, JSON.stringify(answer.body));
  return [...(answer.body.node?.nodes ?? [])].sort((a, b) => a.createdIndex - b.createdIndex);
}

/** The in-order membership keys under `key`, oldest first. */
async function members(key: string): Promise<EtcdNode[]> {
  return (await listDir(key)).filter((n) => !n.dir && /\/\d{20}$/.test(n.key));
}

async function membershipOf(key: string, name: string): Promise<EtcdNode> {
  const found = (await members(key)).filter((n) => n.value === name);
  assert.equal(found.length, 1, `exactly one key for ${name} under ${key}: ${JSON.stringify(found)}`);
  return found[0]!;
}

/** Stops etcd, and makes sure it runs again after the test. */
async function stopEtcd(): Promise<void> {
  const server = etcd.members[0]!;
  cleanup.push(async () => {
    await server.start();
    await etcd.waitReady(15_000);
  });
  await server.stop();
}

async function restartEtcd(): Promise<void> {
  await etcd.members[0]!.start();
  await etcd.waitReady(15_000);
}

/** A counting proxy in front of the file's etcd, closed (and its holds released) after the test. */
async function countingProxy(port?: number): Promise<CountingProxy> {
  const proxy = await CountingProxy.start(etcd.hostPorts[0]!, { port });
  cleanup.push(() => proxy.close());
  return proxy;
}

const isRefresh = (r: ProxiedRequest) => r.method === "PUT" && r.query.get("refresh") === "true";
const isCreate = (key: string) => (r: ProxiedRequest) => r.method === "POST" && r.path === `/v2/keys${key}`;

function describeRequests(requests: ProxiedRequest[]): string {
  return requests.map((r) => `${r.method} ${r.path}?${r.query}`).join("\n");
}

/** Names with quotes, slashes, backslashes, unicode (astral too), JSON and form metacharacters. */
function oddName(length: number): string {
  const piece = `"quoted" 'single' /slash\\back\\slash/ ünïcødé Ω 雪 🚀 {"json":[1,2]} a=b&c=d%20 +plus\n\t`;
  let name = "";
  while (name.length < length) name += piece;
  // Cut on a code point boundary so no lone surrogate is left.
  return Array.from(name).slice(0, length).join("");
}

// ---------------------------------------------------------------------------

describe("arguments", () => {
  it("throws 'etcd is required' synchronously when no client is given", () => {
    for (const missing of [undefined, null, 0, ""]) {
      assert.throws(() => etcdLeader(missing, "/k", "n"), { message: "etcd is required" });
    }
  });

  it("throws 'node key not specified' for a missing, empty or blank key", () => {
    for (const key of [undefined, null, "", "   "]) {
      assert.throws(() => etcdLeader(client(), key as unknown as string, "n"), { message: "node key not specified" });
    }
  });

  it("throws 'node name not specified' for a missing, empty or blank name", () => {
    for (const name of [undefined, null, "", "   "]) {
      assert.throws(() => etcdLeader(client(), "/k", name as unknown as string), { message: "node name not specified" });
    }
  });

  it("defaults the TTL to 10 s and coerces a numeric string ('5' writes a 5 s key)", async () => {
    const key10 = electionKey("ttl-default");
    const key5 = electionKey("ttl-string");
    const byDefault = member(key10, "default");
    const fromString = member(key5, "string", "5");
    byDefault.e.start();
    fromString.e.start();
    await byDefault.next("elected", 5_000);
    await fromString.next("elected", 5_000);
    const ttl10 = (await membershipOf(key10, "default")).ttl!;
    const ttl5 = (await membershipOf(key5, "string")).ttl!;
    assert.ok(ttl10 >= 9 && ttl10 <= 10, `default ttl is 10, etcd shows ${ttl10}`);
    assert.ok(ttl5 >= 4 && ttl5 <= 5, `ttl "5" is 5, etcd shows ${ttl5}`);
  });

  it("rejects TTL 0, -5, NaN, 1.5 and 'abc' with a RangeError naming the value", () => {
    const cases: Array<[unknown, string]> = [[0, "0"], [-5, "-5"], [NaN, "NaN"], [1.5, "1.5"], ["abc", "abc"]];
    for (const [ttl, shown] of cases) {
      assert.throws(
        () => etcdLeader(client(), "/k", "n", ttl as number),
        (err: Error) => err instanceof RangeError && err.message.includes(shown),
        `ttl ${String(ttl)}`,
      );
    }
  });

  it("rejects invalid or inconsistent options with a RangeError naming the option", () => {
    const cases: Array<[etcdLeader.ElectionOptions, string]> = [
      [{ stepDownMargin: 9_000 }, "stepDownMargin"], // 10 s - 9 s leaves less than the 5 s refresh interval
      [{ stepDownMargin: -1 }, "stepDownMargin"],
      [{ refreshInterval: 0 }, "refreshInterval"],
      [{ requestTimeout: NaN }, "requestTimeout"],
      [{ retryInitialDelay: 500, retryMaxDelay: 100 }, "retryMaxDelay"],
    ];
    for (const [options, named] of cases) {
      assert.throws(
        () => etcdLeader(client(), "/k", "n", 10, options),
        (err: Error) => err instanceof RangeError && err.message.includes(named),
        JSON.stringify(options),
      );
    }
    // The options may also take the TTL's place.
    assert.throws(() => etcdLeader(client(), "/k", "n", { ttl: 2, stepDownMargin: 1_500 }), RangeError);
  });
});

describe("start() and stop()", () => {
  it("start() returns the election, and calling it twice makes one membership key", async () => {
    const key = electionKey("start-twice");
    const m = member(key, "only", 2);
    assert.equal(m.e.start(), m.e);
    assert.equal(m.e.start(), m.e);
    await m.next("elected", 5_000);
    assert.equal(m.e.start(), m.e);
    await sleep(200);
    const keys = await listDir(key);
    assert.equal(keys.length, 1, JSON.stringify(keys));
    assert.equal(keys[0]!.value, "only");
    assert.equal(m.all("elected").length, 1);
  });

  it("start() joins on the next tick: start() then stop() in the same tick sends no request and leaves no key", async () => {
    const key = electionKey("same-tick");
    const proxy = await countingProxy();
    const m = member(key, "never", 2, undefined, client(proxy.hostPort));
    m.e.start();
    assert.equal(m.e.isRunning(), true);
    m.e.stop();
    assert.equal(m.e.isRunning(), false);
    await withDeadline(m.e.leave(), 2_000, "leave()");
    await sleep(300);
    assert.deepEqual(proxy.requests, []);
    assert.deepEqual(await listDir(key), []);
    assert.deepEqual(m.seen, []);
  });

  it("stop() returns the election, is idempotent, and emits unelected once", async () => {
    const key = electionKey("stop-twice");
    const m = member(key, "stopper", 2);
    assert.equal(m.e.stop(), m.e, "stop() before start()");
    m.e.start();
    await m.next("elected", 5_000);
    assert.equal(m.e.stop(), m.e);
    assert.equal(m.e.stop(), m.e);
    assert.equal(m.e.isRunning(), false);
    assert.equal(m.e.isLeader(), false);
    await withDeadline(m.e.leave(), 2_000, "leave()");
    await sleep(100);
    assert.equal(m.all("unelected").length, 1);
    assert.equal(m.all("elected").length, 1);
  });
});

describe("fencing token", () => {
  it("elected carries the createdIndex of the member's key; fencingToken() returns it only while leading", async () => {
    const key = electionKey("token");
    const a = member(key, "a", 2);
    const b = member(key, "b", 2);
    assert.equal(a.e.fencingToken(), undefined, "before start");
    a.e.start();
    const elected = await a.next("elected", 5_000);
    const ownKey = await membershipOf(key, "a");
    assert.equal(typeof elected.value, "number");
    assert.equal(elected.value, ownKey.createdIndex);
    assert.equal(a.e.fencingToken(), ownKey.createdIndex);
    assert.equal(a.e.currentLeader(), "a", "a leader names itself");
    const remaining = a.e.leaseRemaining();
    assert.ok(remaining > 0 && remaining <= 1_600, `lease left: ${remaining} ms (TTL 2 s less the 400 ms margin at most)`);
    b.e.start();
    await b.next("leader", 5_000);
    assert.equal(b.e.fencingToken(), undefined, "a follower has no token");
    assert.equal(b.e.leaseRemaining(), 0, "a follower has no lease");
    assert.equal(b.e.currentLeader(), "a");
    assert.equal(a.e.fencingToken(), ownKey.createdIndex, "still the leader's");
    a.e.stop();
    assert.equal(a.e.fencingToken(), undefined, "after stop()");
    const bElected = await b.next("elected", 5_000);
    assert.equal(bElected.value, (await membershipOf(key, "b")).createdIndex);
    assert.equal(b.e.fencingToken(), bElected.value);
    assert.equal(a.e.leaseRemaining(), 0);
  });

  it("successive leaders get increasing fencing tokens", async () => {
    const key = electionKey("tokens-increase");
    const a = member(key, "a", 2);
    const b = member(key, "b", 2);
    a.e.start();
    await a.next("elected", 5_000);
    b.e.start();
    await b.next("leader", 5_000);
    const tokens: number[] = [a.e.fencingToken()!];
    for (let round = 0; round < 3; round++) {
      const [leader, follower] = round % 2 === 0 ? [a, b] : [b, a];
      const mark = follower.mark;
      await leader.e.leave();
      const elected = await follower.next("elected", 5_000, mark);
      tokens.push(elected.value as number);
      const rejoin = leader.mark;
      leader.e.start();
      await leader.next("leader", 5_000, rejoin);
    }
    for (let i = 1; i < tokens.length; i++) {
      assert.ok(tokens[i]! > tokens[i - 1]!, `tokens increase: ${tokens.join(", ")}`);
    }
  });
});

describe("leave()", () => {
  it("resolves once the membership key is deleted from etcd", async () => {
    const key = electionKey("leave");
    const a = member(key, "a", 10);
    const b = member(key, "b", 10);
    a.e.start();
    await a.next("elected", 5_000);
    b.e.start();
    await b.next("leader", 5_000);
    assert.equal((await members(key)).length, 2);
    await withDeadline(b.e.leave(), 2_000, "follower leave()");
    assert.deepEqual((await members(key)).map((n) => n.value), ["a"]);
    await withDeadline(a.e.leave(), 2_000, "leader leave()");
    assert.deepEqual(await members(key), []);
  });

  it("resolves promptly, without rejecting, when etcd refuses connections", async () => {
    const key = electionKey("leave-refused");
    const a = member(key, "a", 2);
    a.e.start();
    await a.next("elected", 5_000);
    await stopEtcd();
    const started = now();
    await withDeadline(a.e.leave(), 3_000, "leave() with etcd down");
    assert.ok(now() - started < 1_500, `leave() took ${Math.round(now() - started)} ms`);
    assert.equal(a.e.isRunning(), false);
  });

  it("resolves within the request timeout, without rejecting, when etcd does not answer", async () => {
    const key = electionKey("leave-silent");
    const proxy = await countingProxy();
    const a = member(key, "a", 2, undefined, client(proxy.hostPort)); // request timeout: 1 s
    a.e.start();
    await a.next("elected", 5_000);
    proxy.hold(() => true);
    const started = now();
    await withDeadline(a.e.leave(), 3_000, "leave() with etcd silent");
    const took = now() - started;
    assert.ok(took < 1_800, `leave() took ${Math.round(took)} ms`);
    assert.ok(proxy.requests.some((r) => r.method === "DELETE"), "it did try to delete");
  });
});

describe("defect 1 of 0.0.1: a failed request never ends the election", () => {
  it("a member whose client points at a closed port reports errors, keeps running, and joins once the port opens", async () => {
    const key = electionKey("closed-port");
    const port = await freePort();
    const m = member(key, "patient", 2, undefined, client(`127.0.0.1:${port}`));
    m.e.start();
    await waitFor("two join errors", 3_000, () => m.all("error").length >= 2);
    const error = m.all("error")[0]!.value as etcdLeader.ElectionError;
    assert.ok(error instanceof etcdLeader.ElectionError);
    assert.equal(error.phase, "join");
    assert.equal(m.e.isRunning(), true);
    assert.equal(m.e.isLeader(), false);
    await countingProxy(port);
    await m.next("elected", 5_000);
    assert.equal(m.e.isRunning(), true);
    assert.equal((await membershipOf(key, "patient")).value, "patient");
  });

  it("a leader rides out an etcd restart: errors while etcd is down, unelected before its lease ends, elected again after", async () => {
    const key = electionKey("etcd-restart");
    const m = member(key, "survivor", 2);
    m.e.start();
    await m.next("elected", 5_000);
    const mark = m.mark;
    const downAt = now();
    await stopEtcd();
    const unelected = await m.next("unelected", 3_000, mark);
    // The lease is 2 s less the 400 ms margin, counted from the last renewal sent before etcd went down.
    assert.ok(unelected.at - downAt < 2_000, `stepped down ${Math.round(unelected.at - downAt)} ms after etcd stopped`);
    await waitFor("an error while etcd is down", 3_000, () => m.seen.slice(mark).some((s) => s.event === "error"));
    assert.equal(m.e.isRunning(), true);
    assert.equal(m.e.isLeader(), false);
    await restartEtcd();
    await m.next("elected", 10_000, mark);
    assert.equal(m.e.isRunning(), true);
    assert.equal(m.e.isLeader(), true);
  });

  it("a leader cut off from etcd steps down before its key expires; its successor takes over; it rejoins at the back", async () => {
    const key = electionKey("cut-off");
    const proxy = await countingProxy();
    const a = member(key, "a", 2, undefined, client(proxy.hostPort));
    const b = member(key, "b", 2);
    a.e.start();
    const aToken = (await a.next("elected", 5_000)).value as number;
    b.e.start();
    await b.next("leader", 5_000);

    const bothLead: number[] = [];
    const poll = setInterval(() => {
      if (a.e.isLeader() && b.e.isLeader()) bothLead.push(now());
    }, 5);
    cleanup.push(() => clearInterval(poll));

    const silence = proxy.hold(() => true); // every new request from a goes unanswered
    const unelected = await a.next("unelected", 3_000);
    const elected = await b.next("elected", 5_000);
    assert.ok(unelected.at < elected.at, "the old leader stepped down before the new one was elected");
    assert.deepEqual(bothLead, [], "never two leaders at once");
    assert.equal(a.e.isRunning(), true);
    assert.ok(a.all("error").length > 0, "failed renewals were reported");

    silence.release();
    await waitFor("a to rejoin at the back", 5_000, async () => {
      const line = await members(key);
      return line.length === 2 && line[0]!.value === "b" && line[1]!.value === "a" && line[1]!.createdIndex > aToken;
    });
    await a.next("leader", 5_000, 0, (name) => name === "b");
    assert.equal(b.e.isLeader(), true);
    assert.equal(a.e.isLeader(), false);
  });
});

describe("defect 2 of 0.0.1: followers do not list the election again on every refresh", () => {
  it("idle followers send only refresh PUTs of their own key: no listing, no watch re-issued", async () => {
    const key = electionKey("idle");
    const leader = member(key, "m1", 2);
    const proxies = [await countingProxy(), await countingProxy()];
    const followers = [member(key, "m2", 2, undefined, client(proxies[0]!.hostPort)), member(key, "m3", 2, undefined, client(proxies[1]!.hostPort))];
    leader.e.start();
    await leader.next("elected", 5_000);
    for (const f of followers) {
      f.e.start();
      await f.next("leader", 5_000);
    }
    await sleep(300); // their watches are in place
    const from = now();
    await sleep(3_000); // three refresh intervals, and as many refreshes by the leader
    for (const [i, f] of followers.entries()) {
      const ownKey = `/v2/keys${(await membershipOf(key, f.name)).key}`;
      const seen = proxies[i]!.since(from);
      const unexpected = seen.filter((r) => !(isRefresh(r) && r.path === ownKey));
      assert.deepEqual(describeRequests(unexpected), "", `${f.name} sent only refreshes of its own key`);
      assert.ok(seen.length >= 2, `${f.name} kept refreshing:\n${describeRequests(seen)}`);
      assert.equal(f.e.isLeader(), false);
      assert.deepEqual(f.values("leader"), ["m1"]);
    }
    assert.equal(leader.e.isLeader(), true);
  });

  it("when the leader stops, every follower learns the new leader at once, not at its next refresh", async () => {
    const key = electionKey("prompt-leader");
    const m = [1, 2, 3, 4].map((i) => member(key, `m${i}`, 10));
    for (const x of m) {
      x.e.start();
      await (x === m[0] ? x.next("elected", 5_000) : x.next("leader", 5_000));
      await waitFor(`${x.name}'s key`, 2_000, async () => (await members(key)).some((n) => n.value === x.name));
    }
    await sleep(200);
    const marks = m.map((x) => x.mark);
    const stoppedAt = now();
    m[0]!.e.stop();
    const elected = await m[1]!.next("elected", 4_000, marks[1]);
    const third = await m[2]!.next("leader", 4_000, marks[2], (name) => name === "m2");
    const fourth = await m[3]!.next("leader", 4_000, marks[3], (name) => name === "m2");
    for (const [who, seen] of [["m2 elected", elected], ["m3 heard m2", third], ["m4 heard m2", fourth]] as const) {
      assert.ok(seen.at - stoppedAt < 5_000, `${who} after ${Math.round(seen.at - stoppedAt)} ms (TTL/2 is 5000 ms)`);
    }
    assert.deepEqual(m[2]!.values("leader"), ["m1", "m2"]);
    assert.deepEqual(m[3]!.values("leader"), ["m1", "m2"]);
  });
});

describe("defect 3 of 0.0.1: a lost membership is rejoined, never fatal", () => {
  it("deleting the whole election directory while members run: they rejoin and one is elected again", async () => {
    const key = electionKey("rmdir");
    const m = ["a", "b", "c"].map((name) => member(key, name, 10));
    m[0]!.e.start();
    await m[0]!.next("elected", 5_000);
    for (const x of m.slice(1)) {
      x.e.start();
      await x.next("leader", 5_000);
    }
    const marks = m.map((x) => x.mark);
    const deleted = await etcdHttp("DELETE", `${key}?recursive=true&dir=true`);
    assert.equal(deleted.status, 200, JSON.stringify(deleted.body));
    await m[0]!.next("unelected", 3_000, marks[0]);
    // TTL 10: this is not expiry, it is the members noticing.
    const line = await waitFor("three new memberships", 5_000, async () => {
      const now = await members(key);
      return now.length === 3 ? now : undefined;
    });
    assert.ok(line.every((n) => n.createdIndex > deleted.index), "all memberships are new");
    const leaders = await waitFor("one leader", 5_000, () => {
      const leading = m.filter((x) => x.e.isLeader());
      return leading.length === 1 ? leading : undefined;
    });
    assert.equal(leaders[0]!.name, line[0]!.value, "the oldest new membership leads");
    assert.ok(m.every((x) => x.e.isRunning()));
    // A follower emits `leader` only when the name changes; the same member may well lead again.
    for (const x of m.filter((y) => y !== leaders[0])) {
      await waitFor(`${x.name} to follow ${leaders[0]!.name}`, 3_000, () => x.e.currentLeader() === leaders[0]!.name);
      assert.equal(x.e.isLeader(), false);
    }
  });

  it("a member whose key is deleted from outside rejoins at the back; a leader emits unelected first", async () => {
    const key = electionKey("key-deleted");
    const [a, b, c] = ["a", "b", "c"].map((name) => member(key, name, 2)) as [Member, Member, Member];
    a.e.start();
    await a.next("elected", 5_000);
    b.e.start();
    await b.next("leader", 5_000);
    c.e.start();
    await c.next("leader", 5_000);
    const before = await members(key);
    assert.deepEqual(before.map((n) => n.value), ["a", "b", "c"]);

    // The leader's key goes.
    const aMark = a.mark;
    await etcdHttp("DELETE", before[0]!.key);
    const unelected = await a.next("unelected", 3_000, aMark);
    const bElected = await b.next("elected", 5_000);
    assert.ok(unelected.at <= bElected.at + 50, "a stepped down no later than b took over");
    await waitFor("a at the back", 5_000, async () => {
      const line = await members(key);
      return line.map((n) => n.value).join() === "b,c,a" && line[2]!.createdIndex > before[2]!.createdIndex;
    });
    assert.equal(a.e.isLeader(), false);
    assert.equal(a.all("elected").length, 1);

    // A follower's key goes: it notices at its next refresh (TTL 2: within a second) and rejoins.
    const cKey = (await membershipOf(key, "c")).key;
    const aKey = (await membershipOf(key, "a")).key;
    await etcdHttp("DELETE", cKey);
    const line = await waitFor("c at the back", 5_000, async () => {
      const now = await members(key);
      return now.map((n) => n.value).join() === "b,a,c" ? now : undefined;
    });
    assert.equal(line[1]!.key, aKey, "a kept its place");
    assert.ok(line[2]!.key !== cKey && line[2]!.createdIndex > line[1]!.createdIndex);
    assert.equal(c.all("elected").length, 0);
    assert.equal(c.all("unelected").length, 0, "a follower has nothing to step down from");
    assert.ok(b.e.isLeader());
    assert.ok([a, b, c].every((x) => x.e.isRunning()));
  });
});

// stop() at any moment (on the next tick, mid-join, while following, mid-renewal,
// while leading) is the conformance suite's (test/contract/conformance-etcd-v2.test.ts);
// here, what is v2's own: a create etcd answers only after the request timeout,
// and whole processes that must exit by themselves once stopped.
describe("defect 4 of 0.0.1: stop() at any moment leaves nothing behind", () => {
  /** Matches only the first create request of `key`. */
  function firstCreate(key: string): (r: ProxiedRequest) => boolean {
    let first: ProxiedRequest | undefined;
    return (r) => isCreate(key)(r) && (first ??= r) === r;
  }

  it("a create answered only after the request timeout leaves no ghost membership for the member to queue behind", async () => {
    const key = electionKey("late-create");
    const proxy = await countingProxy();
    proxy.delayAnswers(firstCreate(key), 600); // etcd creates the key at once; the answer comes after the timeout
    // TTL 10: a ghost key would stand in the member's way for 10 s.
    const m = member(key, "slow", 10, { requestTimeout: 300 }, client(proxy.hostPort));
    m.e.start();
    const timedOut = await m.next("error", 2_000); // the create timed out
    const elected = await m.next("elected", 4_000);
    assert.ok(elected.at - timedOut.at < 3_000, `elected ${Math.round(elected.at - timedOut.at)} ms after the timeout, not after the 10 s TTL`);
    assert.equal((await members(key)).length, 1, "one key: its current membership");
  });

  it("stop() after a create timed out, before its late answer, leaves no key once the answer comes", async () => {
    const key = electionKey("late-create-stop");
    const proxy = await countingProxy();
    proxy.delayAnswers(firstCreate(key), 600);
    const m = member(key, "slow", 10, { requestTimeout: 300, retryInitialDelay: 2_000 }, client(proxy.hostPort));
    m.e.start();
    await m.next("error", 2_000);
    assert.equal((await members(key)).length, 1, "etcd did create the key");
    m.e.stop();
    await withDeadline(m.e.leave(), 3_000, "leave()");
    await waitFor("the late-created key to be deleted (not left to its 10 s TTL)", 3_000, async () => (await members(key)).length === 0);
  });

  /** Runs the fixture in its own process; resolves with its exit code and output, or fails after `ms`. */
  async function runFixture(args: string[], ms: number): Promise<{ code: number | null; output: string; stoppedToExit: number }> {
    const child = spawn(process.execPath, ["--import", "tsx", join(FIXTURES, "stop-and-exit.ts"), ...args], {
      cwd: REPO_ROOT,
      stdio: ["ignore", "pipe", "pipe"],
    });
    let output = "";
    let stoppedAt: number | undefined;
    const onData = (chunk: Buffer) => {
      output += chunk.toString();
      if (stoppedAt === undefined && output.includes("stopped\n")) stoppedAt = now();
    };
    child.stdout.on("data", onData);
    child.stderr.on("data", onData);
    const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
    try {
      const code = await withDeadline(exited, ms, `fixture ${args.join(" ")} exiting by itself`);
      return { code, output, stoppedToExit: stoppedAt === undefined ? NaN : now() - stoppedAt };
    } catch (err) {
      child.kill("SIGKILL");
      await exited;
      throw new Error(`${(err as Error).message}\noutput:\n${output}`);
    }
  }

  for (const mode of ["leader", "follower", "next-tick"] as const) {
    it(`a process whose member is stopped (${mode}) exits by itself: no timer, request or watch left`, async () => {
      const key = electionKey(`exit-${mode}`);
      if (mode === "follower") {
        const leader = member(key, "resident", 10);
        leader.e.start();
        await leader.next("elected", 5_000);
      }
      // TTL 10: a leftover refresh timer would hold the process for 5 s, a watch for ever.
      const { code, output, stoppedToExit } = await runFixture([etcd.hostPorts[0]!, key, "child", mode, "10"], 8_000);
      assert.equal(code, 0, output);
      assert.match(output, /stopped\n/);
      if (mode !== "next-tick") assert.match(output, mode === "leader" ? /elected \d+/ : /leader resident/);
      assert.ok(stoppedToExit < 2_000, `exited ${Math.round(stoppedToExit)} ms after stop()`);
      assert.deepEqual((await members(key)).map((n) => n.value), mode === "follower" ? ["resident"] : []);
    });
  }
});

describe("foreign keys and odd names", () => {
  it("plain keys, subdirectories, garbage values and in-order directories under the election key are ignored", async () => {
    const key = electionKey("foreign");
    await etcdHttp("PUT", `${key}/junk`, { value: "x" });
    await etcdHttp("PUT", `${key}/sub/inner`, { value: "y" });
    await etcdHttp("PUT", `${key}/garbage`, { value: '\u0000{"not json]]\\' });
    await etcdHttp("POST", `${key}?dir=true`); // an in-order directory, named like a member
    const m = ["a", "b", "c"].map((name) => member(key, name, 2));
    m[0]!.e.start();
    await m[0]!.next("elected", 5_000);
    for (const x of m.slice(1)) {
      x.e.start();
      await x.next("leader", 5_000);
    }
    await etcdHttp("PUT", `${key}/late-junk`, { value: "z" }); // while they wait
    await etcdHttp("PUT", `${key}/sub/inner`, { value: "changed" });
    await sleep(300);
    const mark = m[1]!.mark;
    await m[0]!.e.leave();
    await m[1]!.next("elected", 3_000, mark);
    await m[2]!.next("leader", 3_000, 0, (name) => name === "b");
    for (const x of m) assert.deepEqual(x.all("error"), [], `${x.name} saw no error`);
    assert.equal((await listDir(key)).filter((n) => n.key.endsWith("/junk")).length, 1, "foreign keys untouched");
  });

  it("an in-order key written by someone else with a 64 KB odd name is followed as leader, name intact, until it expires", async () => {
    const key = electionKey("foreign-in-order");
    const name = oddName(64 * 1024);
    const created = await etcdHttp("POST", key, { value: name, ttl: "2" });
    assert.equal(created.status, 201, JSON.stringify(created.body).slice(0, 200));
    const m = ["a", "b"].map((n) => member(key, n, 2));
    for (const x of m) {
      x.e.start();
      const seen = await x.next("leader", 5_000);
      assert.ok(seen.value === name, `${x.name} heard the foreign leader's name intact`);
      assert.ok(x.e.currentLeader() === name);
    }
    await m[0]!.next("elected", 6_000); // once the foreign key expires
    await m[1]!.next("leader", 3_000, 0, (n) => n === "a");
    assert.equal(m[1]!.e.isLeader(), false);
  });

  it("a member name with quotes, slashes, unicode and 64 KB reaches followers' leader events intact", async () => {
    const key = electionKey("odd-name");
    const name = oddName(64 * 1024);
    const odd = member(key, name, 2);
    odd.e.start();
    await odd.next("elected", 5_000);
    assert.ok(odd.e.currentLeader() === name);
    assert.ok((await membershipOf(key, name)).value === name, "etcd holds the name as given");
    const followers = ["f1", "f2"].map((n) => member(key, n, 2));
    for (const f of followers) {
      f.e.start();
      const seen = await f.next("leader", 5_000);
      assert.ok(seen.value === name, `${f.name}'s leader event carries the name intact`);
      assert.ok(f.e.currentLeader() === name);
    }
    const mark = followers[0]!.mark;
    await odd.e.leave();
    await followers[0]!.next("elected", 3_000, mark);
    await followers[1]!.next("leader", 3_000, 0, (n) => n === "f1");
  });
});

describe("error events", () => {
  it("a member with no error listener, while etcd is unreachable (closed port), does not crash and keeps running", async () => {
    const key = electionKey("no-listener");
    const port = await freePort();
    const e = etcdLeader(client(`127.0.0.1:${port}`), key, "quiet", 2);
    const m = new Member(e, "quiet", false);
    assert.equal(e.listenerCount("error"), 0);
    e.start();
    await sleep(1_000); // several failed joins, each emitting `error` to nobody
    assert.equal(e.isRunning(), true);
    await countingProxy(port);
    await m.next("elected", 5_000);
  });
});

describe("observer", () => {
  function observe(key: string, via: unknown = client()): { observer: etcdLeader.LeaderObserver; heard: Array<string | undefined> } {
    const observer = etcdLeader.observe(via, key);
    const heard: Array<string | undefined> = [];
    observer.on("leader", (name) => heard.push(name));
    cleanup.push(() => observer.stop());
    return { observer, heard };
  }

  it("observe() reports the leader, each new leader, and undefined when the election empties; it writes nothing", async () => {
    const key = electionKey("observe");
    const proxy = await countingProxy();
    const { observer, heard } = observe(key, client(proxy.hostPort));
    assert.equal(observer.start(), observer);
    await waitFor("the observer's first answer", 3_000, () => heard.length === 1);
    assert.deepEqual(heard, [undefined], "nobody leads an empty election");

    const a = member(key, "a", 2);
    const b = member(key, "b", 2);
    a.e.start();
    await a.next("elected", 5_000);
    await waitFor("observer hears a", 3_000, () => heard.at(-1) === "a");
    b.e.start();
    await b.next("leader", 5_000);
    await sleep(300);
    assert.deepEqual(heard, [undefined, "a"], "a follower joining changes nothing");
    assert.equal(observer.currentLeader(), "a");

    await a.e.leave();
    await waitFor(`observer hears b (heard ${JSON.stringify(heard)})`, 3_000, () => heard.at(-1) === "b");
    await b.e.leave();
    await waitFor(`observer hears nobody (heard ${JSON.stringify(heard)})`, 3_000, () => heard.length === 4);
    assert.deepEqual(heard, [undefined, "a", "b", undefined]);
    assert.equal(observer.currentLeader(), undefined);
    assert.deepEqual(await members(key), [], "no key of the observer's");
    const writes = proxy.requests.filter((r) => r.method !== "GET");
    assert.deepEqual(describeRequests(writes), "", "the observer only reads");
    observer.stop();
    assert.equal(observer.isRunning(), false);
  });

  it("observe() notices a leader whose membership expires", async () => {
    const key = electionKey("observe-expiry");
    // A member that stops renewing: an in-order key with a 1 s TTL, as a crashed member leaves behind.
    await etcdHttp("POST", key, { value: "crashed", ttl: "1" });
    const { observer, heard } = observe(key);
    observer.start();
    await waitFor("observer hears crashed", 3_000, () => heard.at(-1) === "crashed");
    await waitFor(`observer hears nobody after the expiry (heard ${JSON.stringify(heard)})`, 5_000, () => heard.at(-1) === undefined);
    assert.deepEqual(await members(key), []);
  });

  it("observe() reports nobody once the election directory is deleted", async () => {
    const key = electionKey("observe-rmdir");
    await etcdHttp("POST", key, { value: "x" });
    await etcdHttp("POST", key, { value: "y" });
    const { observer, heard } = observe(key);
    observer.start();
    await waitFor("observer hears x", 3_000, () => heard.at(-1) === "x");
    const deleted = await etcdHttp("DELETE", `${key}?recursive=true&dir=true`);
    assert.equal(deleted.status, 200);
    await waitFor(`observer hears nobody (heard ${JSON.stringify(heard)})`, 3_000, () => heard.at(-1) === undefined);
    await etcdHttp("POST", key, { value: "z" });
    await waitFor(`observer hears z (heard ${JSON.stringify(heard)})`, 3_000, () => heard.at(-1) === "z");
    await etcdHttp("DELETE", `${key}?recursive=true&dir=true`);
  });

  it("observe() of an election that does not exist yet waits without polling etcd, even past 1000 events of history", async () => {
    const key = electionKey("observe-absent");
    // etcd keeps the last 1000 events; push the index well past that.
    for (let i = 0; i < 1_100; i++) await etcdHttp("PUT", "/election-v2-filler", { value: String(i) });
    const proxy = await countingProxy();
    const { observer, heard } = observe(key, client(proxy.hostPort));
    observer.start();
    await waitFor("the observer's first answer", 3_000, () => heard.length === 1);
    await sleep(1_000);
    const count = proxy.requests.length;
    assert.ok(count <= 10, `${count} requests in about a second:\n${describeRequests(proxy.requests.slice(0, 6))}\n...`);
    const a = member(key, "a", 2);
    a.e.start();
    await a.next("elected", 5_000);
    await waitFor(`observer hears a (heard ${JSON.stringify(heard)})`, 3_000, () => heard.at(-1) === "a");
    await etcdHttp("DELETE", "/election-v2-filler");
  });
});
