// Connections that die without a FIN or an RST, against a real etcd through a
// FaultProxy whose "silence-existing" mode stops every open connection in
// both directions while new ones pass: v2 long polls are re-armed within
// watchRearmInterval (and a re-arm whose history etcd has dropped falls back
// to a point read); etcd3 clients built with etcdLeader.etcd3Options() replace
// a silent connection; and a member on a client without those settings says,
// once, what to configure.
import assert from "node:assert/strict";
import { after, afterEach, before, describe, it } from "node:test";
import { Etcd3, type IOptions } from "etcd3";
import etcdLeader = require("../../src/index");
import { startEtcd, type EtcdCluster } from "../kit/etcd-server";
import { FaultProxy } from "../kit/fault-proxy";
import { exitOrFail, sleep, waitFor, withDeadline } from "../kit/waiting";

// eslint-disable-next-line @typescript-eslint/no-require-imports
const Etcd = require("node-etcd");

/** Short, so that each test is quick; a lost long poll costs at most this. */
const REARM_MS = 1_000;
/** Liveness only: many times the re-arm bound, far below the default bound of 30 s that old code never met either. */
const ELECTED_WITHIN_MS = 10_000;

let etcd: EtcdCluster;
const cleanups: Array<() => Promise<void> | void> = [];
let keys = 0;
const nextKey = () => `/silent/${process.pid}-${++keys}`;

before(async () => {
  etcd = await startEtcd();
});

afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

after(async () => {
  await etcd?.close();
  exitOrFail();
});

async function proxy(): Promise<FaultProxy> {
  const p = await FaultProxy.start({ upstream: etcd.hostPorts });
  cleanups.push(() => p.close());
  return p;
}

function member(client: unknown, key: string, name: string, options: etcdLeader.ElectionOptions = {}): etcdLeader.Election {
  const election = etcdLeader(client, key, name, { ttl: 2, ...options });
  cleanups.push(async () => void (await election.leave()));
  return election;
}

function etcd3(options: IOptions): Etcd3 {
  const client = new Etcd3(options);
  cleanups.push(() => client.close());
  return client;
}

function errorsOf(election: etcdLeader.Election): string[] {
  const messages: string[] = [];
  election.on("error", (err: Error) => messages.push(err.message));
  return messages;
}

describe("watchRearmInterval", () => {
  it("is a duration like the others: positive, at most 2^31 - 1 ms, default 30 s", () => {
    for (const bad of [0, -1, Number.NaN, "5", 2 ** 31]) {
      assert.throws(
        () => etcdLeader(new Etcd("127.0.0.1:9"), "/k", "n", { watchRearmInterval: bad as number }),
        /watchRearmInterval must be/,
      );
    }
    assert.throws(() => etcdLeader(new Etcd("127.0.0.1:9"), "/k", "n", { watchRearmIntervall: 5 } as object), /watchRearmInterval/);
    etcdLeader(new Etcd("127.0.0.1:9"), "/k", "n", { watchRearmInterval: 2 ** 31 - 1 });
  });

  it("is an option of the v2 store, v2.watchRearmInterval; its old place is still accepted, and both must agree", () => {
    const v2 = () => new Etcd("127.0.0.1:9");
    etcdLeader(v2(), "/k", "n", { v2: { watchRearmInterval: 5_000 } });
    etcdLeader(v2(), "/k", "n", { v2: { watchRearmInterval: 5_000 }, watchRearmInterval: 5_000 });
    etcdLeader.observe(v2(), "/k", { v2: { watchRearmInterval: 5_000 } });
    assert.throws(() => etcdLeader(v2(), "/k", "n", { v2: { watchRearmInterval: 0 } }), /v2\.watchRearmInterval must be a positive number/);
    assert.throws(
      () => etcdLeader(v2(), "/k", "n", { v2: { watchRearmInterval: 5_000 }, watchRearmInterval: 6_000 }),
      /watchRearmInterval given twice, as 6000 and as v2\.watchRearmInterval 5000/,
    );
    assert.throws(() => etcdLeader(v2(), "/k", "n", { v2: { watchRearm: 5 } } as object), /unknown v2 option "watchRearm"/);
    assert.throws(() => etcdLeader(v2(), "/k", "n", { v2: 5 } as object), /the v2 option must be an object/);
    const v3 = new Etcd3({ hosts: "127.0.0.1:9" });
    try {
      assert.throws(() => etcdLeader(v3, "/k", "n", { v2: { watchRearmInterval: 5_000 } }), /the v2 option is for the etcd v2 store/);
    } finally {
      v3.close();
    }
  });
});

describe("v2: long polls lost on a silent connection", () => {
  it("a follower whose watch went silent is elected after the leader leaves, by re-arming its watch", async () => {
    const key = nextKey();
    const leader = member(new Etcd(etcd.hostPorts), key, "leader");
    leader.start();
    await waitFor("leader elected", 10_000, () => leader.isLeader());
    const followerProxy = await proxy();
    const follower = member(new Etcd([followerProxy.hostPort]), key, "follower", { v2: { watchRearmInterval: REARM_MS } });
    const errors = errorsOf(follower);
    const followed = new Promise((resolve) => follower.once("leader", resolve));
    follower.start();
    assert.equal(await withDeadline(followed, 10_000, "follower sees the leader"), "leader");
    // Its long poll on the member before it is open now; that connection goes dead.
    await sleep(200);
    followerProxy.setMode("silence-existing");
    await sleep(200);
    await leader.leave();
    await waitFor("the follower elected", ELECTED_WITHIN_MS, () => follower.isLeader());
    assert.deepEqual(errors, [], "re-arming a watch is routine, not an error");
  });

  it("an observer whose recursive watch went silent sees the next leader", async () => {
    const key = nextKey();
    const first = member(new Etcd(etcd.hostPorts), key, "first");
    const second = member(new Etcd(etcd.hostPorts), key, "second");
    first.start();
    await waitFor("first elected", 10_000, () => first.isLeader());
    second.start();
    await waitFor("second in line", 10_000, () => second.state === "following");
    const observerProxy = await proxy();
    const observer = etcdLeader.observe(new Etcd([observerProxy.hostPort]), key, { ttl: 2, watchRearmInterval: REARM_MS });
    cleanups.push(() => void observer.stop());
    observer.start();
    await waitFor("observer sees first", 10_000, () => observer.currentLeader() === "first");
    await sleep(200);
    observerProxy.setMode("silence-existing");
    await sleep(200);
    await first.leave();
    await waitFor("the observer sees second", ELECTED_WITHIN_MS, () => observer.currentLeader() === "second");
  });

  it("a re-arm from an index etcd no longer remembers (error 401) falls back to a point read", async () => {
    const key = nextKey();
    const client = new Etcd(etcd.hostPorts);
    const leader = member(client, key, "leader");
    leader.start();
    await waitFor("leader elected", 10_000, () => leader.isLeader());
    const follower = member(new Etcd(etcd.hostPorts), key, "follower", { watchRearmInterval: REARM_MS });
    const errors = errorsOf(follower);
    follower.start();
    await waitFor("follower waiting", 10_000, () => follower.state === "following");
    // More than the 1000 events etcd v2 keeps, none of them on the election: the follower's
    // next re-arm asks from an index etcd has forgotten.
    const filler = `${key}-filler`;
    for (let i = 0; i < 1_100; i += 50) {
      await Promise.all(
        Array.from({ length: 50 }, (_, j) => new Promise((resolve, reject) => client.set(filler, String(i + j), (err: unknown) => (err ? reject(err) : resolve(undefined))))),
      );
    }
    const cleared = await new Promise<number | undefined>((resolve) =>
      client.get(key, { wait: true, waitIndex: 1 }, (err: { errorCode?: number } | null) => resolve(err?.errorCode)),
    );
    assert.equal(cleared, 401, "etcd should have forgotten the index the follower started from");
    // Past a re-arm, so that the follower's watch is one that met the 401.
    await sleep(REARM_MS * 2);
    assert.equal(follower.isLeader(), false);
    await leader.leave();
    await waitFor("the follower elected", ELECTED_WITHIN_MS, () => follower.isLeader());
    assert.deepEqual(errors, []);
  });
});

describe("etcdLeader.etcd3Options()", () => {
  it("sets gRPC keepalive and a per-host circuit breaker, and lets overrides win", () => {
    const options = etcdLeader.etcd3Options({ hosts: ["127.0.0.1:1"], grpcOptions: { "grpc.keepalive_time_ms": 10_000 } });
    assert.deepEqual(options.hosts, ["127.0.0.1:1"]);
    const { channelFactoryOverride, ...channelOptions } = options.grpcOptions ?? {};
    assert.deepEqual(channelOptions, {
      "grpc.keepalive_time_ms": 10_000,
      "grpc.keepalive_timeout_ms": 3_000,
      "grpc.keepalive_permit_without_calls": 1,
      "grpc.enable_channelz": 0,
      "grpc.per_rpc_retry_buffer_size": 16 * 1024,
    });
    // One channel for the client's services (etcd3-shared-channel.test.ts).
    assert.equal(typeof channelFactoryOverride, "function");
    const own = () => undefined;
    assert.equal(etcdLeader.etcd3Options({ grpcOptions: { channelFactoryOverride: own } }).grpcOptions?.channelFactoryOverride, own);
    const breaker = options.faultHandling?.host?.("127.0.0.1:1") as { execute?: unknown } | undefined;
    assert.equal(typeof breaker?.execute, "function", "faultHandling.host makes a cockatiel policy");
    const noBreaker = etcdLeader.etcd3Options({ faultHandling: { host: undefined as never } });
    assert.equal(noBreaker.faultHandling?.host, undefined);
    assert.equal(etcdLeader.etcd3Options().hosts, "127.0.0.1:2379");
  });

  it("a client built with it replaces a connection that went silent", async () => {
    const p = await proxy();
    const client = etcd3(etcdLeader.etcd3Options({ hosts: [p.hostPort] }));
    const key = nextKey();
    await client.put(key).value("before");
    p.setMode("silence-existing");
    // Each try gives up after 2 s; the dead connection is dropped by keepalive (about 9 s) and a new one dialled.
    const value = await waitFor("a read through a new connection", 40_000, () =>
      Promise.race([client.get(key).string().catch(() => undefined), sleep(2_000).then(() => undefined)]),
    );
    assert.equal(value, "before");
  });
  it("its circuit breaker still opens on a host whose calls keep failing, so that etcd3 can turn to another", async () => {
    const p = await proxy();
    const client = etcd3(etcdLeader.etcd3Options({ hosts: [p.hostPort] }));
    const key = nextKey();
    await client.put(key).value("v");
    p.setMode("reset");
    const failures: string[] = [];
    for (let i = 0; i < 10 && !failures.some((e) => /circuit breaker is open/.test(e)); i++) {
      await client.get(key).string().then(
        () => assert.fail("a read through a proxy that resets every connection succeeded"),
        (err: Error) => failures.push(err.message),
      );
      await sleep(150); // past a burst: each failed call is one
    }
    assert.match(failures.at(-1) ?? "", /circuit breaker is open/, failures.join("\n"));
    assert.ok(failures.length >= 3, `opened after ${failures.length} failed calls: at least three bursts`);
  });

  it("a leader cut off until its lease expired rejoins after the heal without meeting an open circuit breaker", async () => {
    // The heal resets the connection, which fails every call and stream in
    // flight on it at once: one cause, which must not open the breaker.
    const p = await proxy();
    const key = nextKey();
    const cut = member(etcd3(etcdLeader.etcd3Options({ hosts: [p.hostPort] })), key, "cut");
    const errors = errorsOf(cut);
    cut.start();
    await waitFor("the proxied member elected", ELECTED_WITHIN_MS, () => cut.isLeader());
    const other = member(etcd3(etcdLeader.etcd3Options({ hosts: etcd.hostPorts })), key, "other");
    other.start();
    await waitFor("the other member following", ELECTED_WITHIN_MS, () => other.currentLeader() === "cut");
    p.setMode("blackhole");
    // Elected only once etcd expired the cut member's lease.
    await waitFor("the other member elected", ELECTED_WITHIN_MS, () => other.isLeader());
    const beforeHeal = errors.length;
    p.heal();
    const reader = etcd3({ hosts: etcd.hostPorts });
    await waitFor("the cut member in line again, following", ELECTED_WITHIN_MS, async () =>
      !cut.isLeader() && cut.currentLeader() === "other" && (await reader.getAll().prefix(`${key}/`).keys()).length === 2,
    );
    const afterHeal = errors.slice(beforeHeal);
    assert.deepEqual(afterHeal.filter((e) => /circuit breaker is open/.test(e)), [], afterHeal.join("\n"));
  });
});

describe("v3: advice on the etcd3 client, once", () => {
  it("repeated request timeouts on a client without keepalive say what to configure, once", async () => {
    const p = await proxy();
    const client = etcd3({ hosts: [p.hostPort] });
    const key = nextKey();
    const election = member(client, key, "m", { requestTimeout: 300, retryMaxDelay: 300 });
    const errors = errorsOf(election);
    election.start();
    await waitFor("elected", 10_000, () => election.isLeader());
    p.setMode("silence-existing");
    await waitFor("several timeouts", 20_000, () => errors.filter((e) => /did not answer/.test(e)).length >= 8);
    const advice = errors.filter((e) => e.includes("etcdLeader.etcd3Options"));
    assert.equal(advice.length, 1, `one error with the advice, got:\n${errors.join("\n")}`);
    assert.match(advice[0]!, /keepalive/);
    assert.match(advice[0]!, /Configuring the etcd3 client/);
  });

  it("a client built with etcd3Options gets no such advice", async () => {
    const p = await proxy();
    const client = etcd3(etcdLeader.etcd3Options({ hosts: [p.hostPort] }));
    const election = member(client, nextKey(), "m", { requestTimeout: 300, retryMaxDelay: 300 });
    const errors = errorsOf(election);
    election.start();
    await waitFor("elected", 10_000, () => election.isLeader());
    p.setMode("silence-existing");
    // The advice comes after three timeouts in a row; keepalive replaces the
    // connection after about 9 s, and on a loaded machine fewer tries fit in
    // that time, so four is what to wait for.
    await waitFor("several timeouts", 20_000, () => errors.filter((e) => /did not answer/.test(e)).length >= 4);
    assert.deepEqual(errors.filter((e) => e.includes("etcdLeader.etcd3Options")), []);
  });

  it("etcd3's default circuit breaker, once open, is named with what to configure, once", async () => {
    const p = await proxy();
    const client = etcd3({ hosts: [p.hostPort] });
    const election = member(client, nextKey(), "m", { requestTimeout: 300, retryMaxDelay: 300 });
    const errors = errorsOf(election);
    election.start();
    await waitFor("elected", 10_000, () => election.isLeader());
    p.setMode("reset");
    await waitFor("the breaker open", 20_000, () => errors.filter((e) => /circuit breaker is open/.test(e)).length >= 3);
    const advice = errors.filter((e) => e.includes("etcdLeader.etcd3Options"));
    assert.equal(advice.length, 1, `one error with the advice, got:\n${errors.join("\n")}`);
    assert.match(advice[0]!, /default circuit breaker is open/);
  });
});
