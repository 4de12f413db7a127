// The NATS KV backend against a real nats-server with JetStream (Debian's
// 2.9): elections among our members, graceful and silent (expiry) fail-over,
// the key deleted or overwritten from outside, the conditional leave, the
// observer and the one-shot read, whileLeading, bad input refused at once,
// TLS with a password, and one election shared with a member that follows
// the Go implementation's protocol on the raw KV.
import assert from "node:assert/strict";
import { after, afterEach, before, describe, it, type TestContext } from "node:test";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { Kvm, type KV } from "@nats-io/kv";
import { NatsKvBackend } from "../../../src/stores/nats-kv/recipe";
import { NatsKvAdapter } from "../../../src/stores/nats-kv/nats/adapter";
import type { NatsMembership } from "../../../src/stores/nats-kv/holder";
import { MembershipLostError } from "../../../src/contract/errors";
import type { Election } from "../../../src/election/election";
import { natsLeader } from "../../../src/nats";
import { FaultProxy } from "../../kit/fault-proxy";
import { GoStyleMember } from "../../kit/go-style-member";
import { startNats, type NatsServer } from "../../kit/nats-server";
import { makeTestPki } from "../../kit/tls";
import { deferred, exitOrFail, sleep, waitFor, withDeadline } from "../../kit/waiting";

/** The bucket TTL most tests use: failovers by expiry stay short. */
const TTL_MS = 2_000;
/** Generous: elections settle in milliseconds, but the machine is shared. */
const BOUND_MS = 15_000;
const KEY = "leader";
const DAY_MS = 86_400_000;

let server: NatsServer;
let nc: NatsConnection;
let kvm: Kvm;
let buckets = 0;
const elections = new Set<Election>();

before(async () => {
  server = await startNats();
  nc = await connect({ servers: server.url });
  kvm = new Kvm(nc);
});

afterEach(async () => {
  await Promise.all([...elections].map((e) => e.leave()));
  elections.clear();
});

after(async () => {
  await nc?.close().catch(() => undefined);
  await server?.close();
  exitOrFail();
});

function freshBucket(ttlMs = TTL_MS, on: Kvm = kvm): Promise<KV> {
  return on.create(`election_${++buckets}`, { ttl: ttlMs, history: 1 });
}

type Recorded = { type: "elected" | "unelected" | "leader"; value?: unknown; at: number };

interface Member {
  name: string;
  election: Election;
  events: Recorded[];
}

async function member(kv: KV, name: string): Promise<Member> {
  const election = await natsLeader(kv, KEY, name);
  const events: Recorded[] = [];
  election.on("elected", (token) => events.push({ type: "elected", value: token, at: performance.now() }));
  election.on("unelected", () => events.push({ type: "unelected", at: performance.now() }));
  election.on("leader", (leader) => events.push({ type: "leader", value: leader, at: performance.now() }));
  elections.add(election);
  election.start();
  return { name, election, events };
}

const leaders = (members: Member[]) => members.filter((m) => m.election.isLeader());
const tokensOf = (m: Member) => m.events.filter((e) => e.type === "elected").map((e) => e.value as number);

async function oneLeader(members: Member[], what = "one leader"): Promise<Member> {
  const [leader] = await waitFor(what, BOUND_MS, () => {
    const now = leaders(members);
    assert.ok(now.length <= 1, `two leaders at once: ${now.map((m) => m.name).join(", ")}`);
    return now.length === 1 ? now : undefined;
  });
  return leader!;
}

type KvMethod = (...args: unknown[]) => Promise<unknown>;

/** The bucket with some of its methods wrapped (each wrapper gets the bucket's own, bound); the rest as they are. */
function withMethods(kv: KV, wrappers: Partial<Record<"create" | "update" | "watch", (original: KvMethod) => KvMethod>>): KV {
  return new Proxy(kv, {
    get(target, property, receiver) {
      const value = Reflect.get(target, property, receiver);
      if (typeof value !== "function") return value;
      const bound = value.bind(target) as KvMethod;
      const wrap = wrappers[property as keyof typeof wrappers];
      return wrap ? wrap(bound) : bound;
    },
  });
}

type WatchIterator = AsyncIterable<{ operation: string }> & { stop(): void };

/** A watch that holds each delete or purge marker back until the next write arrives, then yields both. */
function markersWithTheNextWrite(iterator: WatchIterator): WatchIterator {
  return {
    stop: () => iterator.stop(),
    // KeyWatch deletes the watch's consumer through it.
    get _data() {
      return (iterator as { _data?: unknown })._data;
    },
    async *[Symbol.asyncIterator]() {
      let held: { operation: string } | undefined;
      for await (const entry of iterator) {
        if (entry.operation !== "PUT") {
          held = entry;
          continue;
        }
        if (held) yield held;
        held = undefined;
        yield entry;
      }
    },
  } as WatchIterator;
}

/** A member on the raw KV that works as the Go implementation does, driven by hand here: one tick per tick(). */
const goStyleMember = (kv: KV, name: string) => new GoStyleMember(kv, KEY, name, TTL_MS);

describe("NATS KV elections (nats-server 2.9)", () => {
  it("elects one of three members; the others are told its name, and the token is the create's revision", async () => {
    const kv = await freshBucket();
    const members = await Promise.all(["a", "b", "c"].map((name) => member(kv, name)));
    const leader = await oneLeader(members);
    const entry = await kv.get(KEY);
    assert.equal(entry?.string(), leader.name);
    const [token] = tokensOf(leader);
    assert.ok(token! > 0 && token! <= entry!.revision);
    for (const other of members.filter((m) => m !== leader)) {
      await waitFor(`${other.name} to be told the leader`, BOUND_MS, () =>
        other.events.some((e) => e.type === "leader" && e.value === leader.name),
      );
    }
    // Renewals go on: well past the TTL, the same leader, and only one.
    await sleep(TTL_MS * 1.5);
    assert.deepEqual(leaders(members), [leader]);
    assert.ok((await kv.get(KEY))!.revision > entry!.revision, "the leader renewed its key");
  });

  it("a leader that stops deletes its key and the next member is elected at once, with a larger token", async (t) => {
    const kv = await freshBucket();
    const members = await Promise.all(["a", "b", "c"].map((name) => member(kv, name)));
    let remaining = members;
    const tokens = [tokensOf(await oneLeader(remaining)).at(-1)!];
    for (let round = 0; round < 2; round++) {
      const leader = await oneLeader(remaining);
      const stoppedAt = performance.now();
      await leader.election.leave();
      remaining = remaining.filter((m) => m !== leader);
      const next = await oneLeader(remaining, "the next leader");
      const electedAt = next.events.find((e) => e.type === "elected")!.at;
      t.diagnostic(`round ${round + 1}: leave() called -> next elected in ${(electedAt - stoppedAt).toFixed(1)} ms`);
      // A clean stop hands over through the delete marker, not by expiry.
      assert.ok(electedAt - stoppedAt < TTL_MS, `took ${(electedAt - stoppedAt).toFixed(0)} ms, as long as an expiry`);
      tokens.push(tokensOf(next).at(-1)!);
    }
    for (let i = 1; i < tokens.length; i++) assert.ok(tokens[i]! > tokens[i - 1]!, `tokens ${tokens.join(", ")} must grow`);
  });

  it("a follower names the member that won as soon as its write shows on the watch, before the answer to its own create", async () => {
    const kv = await freshBucket();
    const a = await member(kv, "a");
    await oneLeader([a]);
    // b's creates go out 300 ms late, so that c wins, and their answers reach b
    // a second after they came.
    let answerHandedAt = Infinity;
    const slowly = (write: KvMethod): KvMethod => async (...args) => {
      await sleep(300);
      const outcome = await write(...args).then(
        (v) => ({ v }),
        (e: unknown) => ({ e }),
      );
      await sleep(1_000);
      answerHandedAt = performance.now();
      if ("e" in outcome) throw outcome.e;
      return outcome.v;
    };
    const slow = withMethods(kv, { create: slowly, update: slowly });
    const b = await member(slow, "b");
    const c = await member(kv, "c");
    for (const follower of [b, c]) {
      await waitFor(`${follower.name} to name a`, BOUND_MS, () => follower.events.some((e) => e.type === "leader" && e.value === "a"));
    }
    await a.election.leave();
    assert.equal(await oneLeader([b, c], "c to lead"), c);
    const named = await waitFor("b to name c", BOUND_MS, () => b.events.find((e) => e.type === "leader" && e.value === "c"));
    await waitFor("b's create to be answered", BOUND_MS, () => answerHandedAt < Infinity);
    assert.ok(named.at < answerHandedAt, "b named c only once its own create was answered");
  });

  it("a follower whose turn to campaign comes after the winning write arrived follows it, and sends no create", async () => {
    const kv = await freshBucket();
    const a = await member(kv, "a");
    await oneLeader([a]);
    // b's watch hands over a delete marker only with the write after it, as
    // when that write arrives while b waits for its turn among many followers.
    let campaigns = 0;
    const counted = (write: KvMethod): KvMethod => (...args) => {
      campaigns++;
      return write(...args);
    };
    const late = withMethods(kv, {
      create: counted,
      update: counted,
      watch: (watch) => async (...args) => markersWithTheNextWrite((await watch(...args)) as WatchIterator),
    });
    const b = await member(late, "b");
    const c = await member(kv, "c");
    for (const follower of [b, c]) {
      await waitFor(`${follower.name} to name a`, BOUND_MS, () => follower.events.some((e) => e.type === "leader" && e.value === "a"));
    }
    const campaignsBefore = campaigns;
    await a.election.leave();
    assert.equal(await oneLeader([b, c], "c to lead"), c);
    await waitFor("b to name c", BOUND_MS, () => b.events.find((e) => e.type === "leader" && e.value === "c"));
    assert.equal(campaigns - campaignsBefore, 0, "b sent a create after the delete");
  });

  it("followers take over a key nobody renews (a crashed holder) once it ages out: no event tells them, the arrival of its last write does", async (t) => {
    const kv = await freshBucket();
    const crashed = goStyleMember(kv, "crashed");
    assert.ok(await crashed.tick());
    const lastWriteAcked = performance.now();
    const members = await Promise.all(["a", "b"].map((name) => member(kv, name)));
    await waitFor("the followers to name the holder", BOUND_MS, () =>
      members.every((m) => m.events.some((e) => e.type === "leader" && e.value === "crashed")),
    );
    const leader = await oneLeader(members, "a member to take over after the expiry");
    const electedAt = leader.events.find((e) => e.type === "elected")!.at;
    t.diagnostic(`elected ${(electedAt - lastWriteAcked).toFixed(0)} ms after the holder's last write (bucket TTL ${TTL_MS} ms)`);
    assert.ok(electedAt - lastWriteAcked >= TTL_MS - 50, "elected before the holder's entry could have aged out");
  });

  it("a leader whose key is deleted from outside steps down, and a member is elected again", async () => {
    const kv = await freshBucket();
    const members = await Promise.all(["a", "b"].map((name) => member(kv, name)));
    const first = await oneLeader(members);
    const firstToken = tokensOf(first)[0]!;
    await kv.delete(KEY);
    await waitFor("the leader to step down", BOUND_MS, () => first.events.some((e) => e.type === "unelected"));
    const next = await oneLeader(members, "a leader after the delete");
    assert.ok(tokensOf(next).at(-1)! > firstToken);
  });

  it("a leader whose key another writer overwrote steps down at once, and the overwriter is named as leader", async () => {
    const kv = await freshBucket(10_000);
    const first = await member(kv, "a");
    await oneLeader([first]);
    await kv.put(KEY, "intruder");
    await waitFor("the leader to step down", BOUND_MS, () => first.events.some((e) => e.type === "unelected"));
    await waitFor("the intruder to be named", BOUND_MS, () => first.events.some((e) => e.type === "leader" && e.value === "intruder"));
    assert.equal(first.election.isLeader(), false);
  });

  it("a leader whose renewals failed for a while and then recovered keeps its term, never names itself as someone else's follower, and still sees an outside delete", async (t) => {
    const proxy = await FaultProxy.start({ upstream: `127.0.0.1:${server.port}` });
    t.after(() => proxy.close());
    // Reconnects fast after the blackhole's reset; a short request timeout
    // makes renewals fail within it, and renewals every second leave the
    // client's reconnect most of the TTL (6 s, less the 1.2 s margin) after the
    // heal, as a leader renewing at TTL/2 would have after a shorter cut.
    const connection = await connect({ servers: proxy.hostPort, reconnectTimeWait: 100, maxReconnectAttempts: -1 });
    t.after(() => connection.close());
    const bucket = `election_${++buckets}`;
    const kv = await new Kvm(connection).create(bucket, { ttl: 6_000, history: 1 });
    // The test's own reads and writes go straight to the server.
    const direct = await kvm.open(bucket);
    const election = await natsLeader(kv, KEY, "solo", { requestTimeout: 400, retryInitialDelay: 100, retryMaxDelay: 200, refreshInterval: 1000 });
    elections.add(election);
    const events: Recorded[] = [];
    election.on("elected", (token) => events.push({ type: "elected", value: token, at: performance.now() }));
    election.on("unelected", () => events.push({ type: "unelected", at: performance.now() }));
    election.on("leader", (name) => events.push({ type: "leader", value: name, at: performance.now() }));
    const errors: string[] = [];
    election.on("error", (err) => errors.push(`${Math.round(performance.now())}: ${err.message}`));
    const renewalsFailed = new Promise<void>((resolve) => election.once("error", () => resolve()));
    election.start();
    await waitFor("elected", BOUND_MS, () => election.isLeader());
    proxy.setMode("blackhole");
    await withDeadline(renewalsFailed, BOUND_MS, "a renewal to fail");
    proxy.heal();
    const healedAt = performance.now();
    // Renewals succeed again: the term goes on.
    const revision = (await direct.get(KEY))!.revision;
    await waitFor("a renewal after the heal", BOUND_MS, async () => (await direct.get(KEY))!.revision > revision);
    await sleep(500);
    assert.equal(election.isLeader(), true, "the term survived the failed renewals");
    assert.deepEqual(
      events.filter((e) => e.type !== "elected").map((e) => `${e.type} ${e.value ?? ""}`),
      [],
      `no unelected, and never a leader event naming itself (healed at ${Math.round(healedAt)}; errors: ${errors.join(" | ")})`,
    );
    // And it still watches its key: a delete from outside ends the term.
    await direct.delete(KEY);
    await waitFor("the step-down after the delete", BOUND_MS, () => events.some((e) => e.type === "unelected"));
  });

  it("whileLeading runs the routine only while leading, aborts its signal when the leader stops, and rejects with an AbortError", async () => {
    const kv = await freshBucket();
    const election = await natsLeader(kv, KEY, "solo");
    elections.add(election);
    const started = deferred<AbortSignal>();
    const done = election.whileLeading(async ({ signal }) => {
      started.resolve(signal);
      await new Promise((resolve) => signal.addEventListener("abort", resolve, { once: true }));
      return "ran";
    });
    const signal = await withDeadline(started.promise, BOUND_MS, "the routine to start");
    assert.equal(signal.aborted, false);
    assert.equal((await kv.get(KEY))?.string(), "solo");
    election.stop();
    await assert.rejects(withDeadline(done, BOUND_MS, "whileLeading to settle"), { name: "AbortError" });
    assert.equal(signal.aborted, true);
    await waitFor("the key to be deleted", BOUND_MS, async () => (await kv.get(KEY))?.operation === "DEL");
  });

  it("the observer follows the leader with its token, and nobody after it leaves; whoLeads reads it once", async () => {
    const kv = await freshBucket();
    assert.equal(await natsLeader.whoLeads(kv, KEY), undefined);
    const observer = natsLeader.observe(kv, KEY);
    const seen: Array<{ name: string | undefined; token: number | undefined }> = [];
    observer.on("leader", (name, token) => seen.push({ name, token }));
    observer.start();
    try {
      const a = await member(kv, "a");
      await oneLeader([a]);
      const token = tokensOf(a)[0]!;
      await waitFor("the observer to see a", BOUND_MS, () => observer.currentLeader() === "a");
      assert.deepEqual(await natsLeader.whoLeads(kv, KEY).then((l) => l?.name), "a");
      // Renewals are not changes of leader.
      await sleep(TTL_MS);
      assert.deepEqual(seen.filter((s) => s.name === "a"), [{ name: "a", token }]);
      await a.election.leave();
      await waitFor("the observer to see nobody", BOUND_MS, () => seen.at(-1)?.name === undefined && seen.length > 1);
      assert.equal(await natsLeader.whoLeads(kv, KEY), undefined);
    } finally {
      observer.stop();
    }
  });

  it("the observer learns of a leader's silent expiry without a watch event", async () => {
    const kv = await freshBucket();
    const crashed = goStyleMember(kv, "crashed");
    assert.ok(await crashed.tick());
    const observer = natsLeader.observe(kv, KEY).start();
    try {
      await waitFor("the observer to see the holder", BOUND_MS, () => observer.currentLeader() === "crashed");
      await waitFor("the observer to see it gone", BOUND_MS, () => observer.currentLeader() === undefined);
    } finally {
      observer.stop();
    }
  });
});

describe("a bucket deleted and made again with another TTL", () => {
  /** Makes a bucket with `ttlMs`, elects one member on it, deletes the bucket and waits for the member to step down. */
  async function leaderOfADeletedBucket(ttlMs: number): Promise<{ name: string; a: Member; errors: string[] }> {
    const name = `remade_${++buckets}`;
    const kv = await kvm.create(name, { ttl: ttlMs, history: 1 });
    const a = await member(kv, "a");
    await oneLeader([a]);
    const errors: string[] = [];
    a.election.on("error", (err) => errors.push(err.message));
    await kv.destroy();
    await waitFor("a to step down", BOUND_MS, () => a.events.some((e) => e.type === "unelected"));
    return { name, a, errors };
  }

  it("shorter: a term is counted on the TTL NATS applies now, not the one the member was made with", async () => {
    const { name, a } = await leaderOfADeletedBucket(4_000);
    // Renewing every 2 s and stepping down 0.8 s early (from the old TTL) still fits 3 s.
    await kvm.create(name, { ttl: 3_000, history: 1 });
    await waitFor("a elected again", BOUND_MS, () => a.election.isLeader());
    const remaining = a.election.leaseRemaining();
    assert.ok(remaining <= 3_000 - 800, `a term of ${remaining} ms on a key that lives 3000 ms: counted on the old TTL`);
  });

  it("too short for the members' timing: they do not take its key, and the error names the bucket and both TTLs, not an option never set", async () => {
    const { name, a, errors } = await leaderOfADeletedBucket(4_000);
    // Its defaults (renew every 2 s, step down 0.8 s early) came from the old
    // TTL: they do not fit 1 s.
    const remade = await kvm.create(name, { ttl: 1_000, history: 1 });
    const message = await waitFor("an error about the new TTL", BOUND_MS, () => errors.find((m) => /max_age 1000 ms/.test(m)));
    assert.match(message, new RegExp(`the bucket "${name}"'s TTL \\(max_age 1000 ms\\) \\(it was 4000 ms when this member was made`));
    assert.match(message, /refreshInterval 2000 ms \(the default, TTL\/2 of 4000 ms\) and stepDownMargin 800 ms \(the default, TTL\/5 of 4000 ms\)/);
    await sleep(1_500);
    assert.equal(a.election.isLeader(), false);
    const entry = await remade.get(KEY);
    assert.ok(entry === null || entry.operation !== "PUT", `the member holds a key it cannot lead on (${entry?.string()})`);
  });
});

describe("the NATS KV backend's writes", () => {
  const backendOn = (kv: KV, name: string) => new NatsKvBackend(new NatsKvAdapter(kv), KEY, name);
  const win = async (backend: NatsKvBackend) =>
    withDeadline(backend.awaitTurn(undefined, () => undefined, AbortSignal.timeout(BOUND_MS)), BOUND_MS, "a turn");

  it("leave() deletes the key only while it is still ours: a late leaver leaves its successor's key alone", async () => {
    const kv = await freshBucket(30_000);
    const old = await win(backendOn(kv, "old"));
    await kv.delete(KEY);
    const successor = await win(backendOn(kv, "new"));
    await backendOn(kv, "old").leave(old.membership, AbortSignal.timeout(5_000));
    const entry = await kv.get(KEY);
    assert.equal(entry?.string(), "new");
    assert.equal(entry?.revision, successor.token);
  });

  it("a renewal with a stale revision is a lost membership, and a renewal keeps the revision for the next one", async () => {
    const kv = await freshBucket(30_000);
    const backend = backendOn(kv, "a");
    const { membership } = await win(backend);
    await backend.renew(membership, AbortSignal.timeout(5_000));
    assert.equal(backend.lastRevision(membership), (await kv.get(KEY))!.revision);
    await kv.put(KEY, "a");
    await assert.rejects(backend.renew(membership, AbortSignal.timeout(5_000)), MembershipLostError);
  });

  it("a create that wins after its campaign was called off is given back", async () => {
    const kv = await freshBucket(30_000);
    const controller = new AbortController();
    const turn = backendOn(kv, "late").awaitTurn(undefined, () => undefined, controller.signal);
    controller.abort(new Error("called off"));
    await assert.rejects(turn);
    // Whether the create went out or not, no live entry of it is left for a TTL.
    await waitFor("no live entry", BOUND_MS, async () => {
      const entry = await kv.get(KEY);
      return entry === null || entry.operation !== "PUT";
    });
  });
});

describe("bad input is refused at once", () => {
  it("a bucket without a TTL: RangeError, before any write", async () => {
    const kv = await kvm.create(`no_ttl_${++buckets}`, { history: 1 });
    await assert.rejects(natsLeader(kv, KEY, "a"), (err: Error) => {
      assert.ok(err instanceof RangeError);
      assert.match(err.message, /no TTL \(max_age 0\)/);
      return true;
    });
    assert.equal(await kv.get(KEY), null);
  });

  it("a bucket whose TTL is too short for the member's timing: RangeError naming both", async () => {
    const kv = await freshBucket(1_000);
    await assert.rejects(natsLeader(kv, KEY, "a", { refreshInterval: 900 }), (err: Error) => {
      assert.ok(err instanceof RangeError);
      assert.match(err.message, /max_age 1000 ms/);
      assert.match(err.message, /refreshInterval 900 ms/);
      return true;
    });
    await assert.rejects(natsLeader(kv, KEY, "a", { ttl: 5 }), /ttl option \(5 s\) differs from the bucket's TTL \(max_age 1000 ms\)/);
  });

  it("a bucket whose max age does not fit a Node.js timer: RangeError naming the bucket and its max age, not a ttl option", async () => {
    const name = `long_${++buckets}`;
    const kv = await kvm.create(name, { ttl: 25 * DAY_MS, history: 1 });
    await assert.rejects(natsLeader(kv, KEY, "a"), (err: Error) => {
      assert.ok(err instanceof RangeError);
      assert.match(err.message, new RegExp(`the bucket "${name}" keeps entries for 25 days \\(max_age 2160000000 ms\\)`));
      assert.match(err.message, /shorter TTL/);
      assert.doesNotMatch(err.message, /\bttl must\b|2160000\b/);
      return true;
    });
    assert.equal(await kv.get(KEY), null);
  });

  it("an observer on a bucket whose max age is longer than a timer holds waits for it in steps (no timer overflow)", async () => {
    const kv = await kvm.create(`long_${++buckets}`, { ttl: 25 * DAY_MS, history: 1 });
    await kv.put(KEY, "holder");
    const warnings: string[] = [];
    const onWarning = (warning: Error) => warnings.push(`${warning.name}: ${warning.message}`);
    process.on("warning", onWarning);
    const observer = natsLeader.observe(kv, KEY).start();
    try {
      await waitFor("the observer to see the holder", BOUND_MS, () => observer.currentLeader() === "holder");
      await sleep(100);
      assert.deepEqual(warnings, []);
      assert.equal(observer.currentLeader(), "holder");
    } finally {
      observer.stop();
      process.off("warning", onWarning);
    }
  });

  it("timing the bucket's TTL does not fit: the message says which values are defaults, and names no option that was not set", async () => {
    const kv = await freshBucket(2_000);
    await assert.rejects(natsLeader(kv, KEY, "a", { stepDownMargin: 1_500 }), /refreshInterval 1000 ms \(the default, TTL\/2\) and stepDownMargin 1500 ms need a TTL above 2500 ms/);
    await assert.rejects(natsLeader(kv, KEY, "a", { retryInitialDelay: 2_000 }), (err: Error) => {
      assert.ok(err instanceof RangeError);
      assert.match(err.message, /^retryInitialDelay \(2000 ms\) is longer than the longest retry delay, which is by default the refresh interval \(1000 ms, half the bucket's TTL\)/);
      assert.match(err.message, /set retryMaxDelay too/);
      return true;
    });
  });

  it("a handle that is no KV bucket, and a key NATS refuses: TypeError", async () => {
    const kv = await freshBucket();
    await assert.rejects(natsLeader(kvm as never, KEY, "a"), /not a NATS KV bucket/);
    await assert.rejects(natsLeader(nc as never, KEY, "a"), /not a NATS KV bucket/);
    for (const key of ["a b", "a.*", ".a", "a.", "a..b", ">"]) {
      await assert.rejects(natsLeader(kv, key, "a"), /NATS refuses the key/, key);
    }
    assert.throws(() => natsLeader.observe(kv, "bad key"), /NATS refuses the key/);
  });
});

describe("one election with a member of the Go implementation's protocol", () => {
  it("never leads at the same time as ours, in either direction", async () => {
    const kv = await freshBucket();
    const foreign = goStyleMember(kv, "go-member");
    assert.ok(await foreign.tick());
    // Ticking every 0.75 × TTL from now on: its updates keep the key.
    foreign.start();
    const ours = await member(kv, "ours");
    await waitFor("ours to name the foreign leader", BOUND_MS, () =>
      ours.events.some((e) => e.type === "leader" && e.value === "go-member"),
    );
    await sleep(TTL_MS * 1.5);
    assert.equal(ours.election.isLeader(), false, "ours led while the foreign member renewed");
    // The foreign member crashes: ours take over once its entry aged out.
    await foreign.stop();
    await oneLeader([ours], "ours to take over");
    // Now the foreign member campaigns and must fail while ours renews.
    for (let i = 0; i < 5; i++) {
      assert.equal(await foreign.tick(), false, "the foreign member won a key ours holds");
      await sleep(TTL_MS * 0.3);
    }
    assert.equal((await kv.get(KEY))?.string(), "ours");
    // Ours stops and deletes its key: the foreign member's next create wins.
    await ours.election.leave();
    assert.ok(await foreign.tick());
  });
});

describe("a server with TLS and a password", () => {
  it("elects over TLS with client certificates and user/password auth", async (t: TestContext) => {
    const pki = makeTestPki();
    t.after(() => pki.cleanup());
    const auth = { user: "elector", password: "s3cret" };
    const secure = await startNats({
      tls: { certFile: pki.server.certFile, keyFile: pki.server.keyFile, caFile: pki.caFile, clientCertAuth: true },
      auth,
    });
    t.after(() => secure.close());
    const tls = { caFile: pki.caFile, certFile: pki.client.certFile, keyFile: pki.client.keyFile };
    const connection = await connect({ servers: secure.url, user: auth.user, pass: auth.password, tls });
    t.after(() => connection.close());
    const kv = await freshBucket(TTL_MS, new Kvm(connection));
    const members = await Promise.all(["a", "b"].map((name) => member(kv, name)));
    const leader = await oneLeader(members);
    assert.equal((await kv.get(KEY))?.string(), leader.name);
    await Promise.all(members.map((m) => m.election.leave()));
  });
});

// Types: the real handle fits what the backend asks for.
export const kvFits = (kv: KV): Parameters<typeof natsLeader>[0] => kv;
void (null as unknown as NatsMembership);
