// One NATS KV election shared with members of the Go nats-kv-leader-elect,
// against a real nats-server, with a member on the raw bucket that behaves as
// the Go library does (test/kit/go-style-member.ts): no watch, so after its key
// is deleted or purged from outside it goes on saying it leads until its next
// tick's update fails. Without the goMembers option one of ours, elected
// over the marker at once, leads beside it; with it, ours says `elected`
// only once the Go member must have found out.
import assert from "node:assert/strict";
import { after, afterEach, before, describe, it, type TestContext } from "node:test";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { Kvm, type KV } from "@nats-io/kv";
import { Etcd3 } from "etcd3";
import etcdLeader = require("../../../src/index");
import { goLeaderBelief } from "../../../src/stores/nats-kv/go-members";
import type { Election } from "../../../src/election/election";
import { natsLeader, type NatsElectionOptions } from "../../../src/nats";
import { GoStyleMember } from "../../kit/go-style-member";
import { startNats, type NatsServer } from "../../kit/nats-server";
import { exitOrFail, sleep, waitFor } from "../../kit/waiting";

/** Short, so that a test takes seconds: the Go member ticks every 2.25 s. (The Go library itself refuses under 30 s.) */
const TTL_MS = 3_000;
/** How long a Go member may say it leads after its last successful write: 0.75 × TTL + 5 s + 200 ms. */
const BELIEF_MS = goLeaderBelief(TTL_MS);
const BOUND_MS = 30_000;
const KEY = "leader";

let server: NatsServer;
let nc: NatsConnection;
let kvm: Kvm;
let buckets = 0;
const elections = new Set<Election>();
const goMembers = new Set<GoStyleMember>();

before(async () => {
  server = await startNats();
  nc = await connect({ servers: server.url });
  kvm = new Kvm(nc);
});

afterEach(async () => {
  await Promise.all([...elections].map((e) => e.leave()));
  elections.clear();
  await Promise.all([...goMembers].map((m) => m.stop()));
  goMembers.clear();
});

after(async () => {
  await nc?.close().catch(() => undefined);
  await server?.close();
  exitOrFail();
});

function freshBucket(ttlMs = TTL_MS): Promise<KV> {
  return kvm.create(`go_members_${++buckets}`, { ttl: ttlMs, history: 1 });
}

interface Ours {
  election: Election;
  events: Array<{ type: "elected" | "unelected" | "leader"; value?: unknown; at: number }>;
}

async function ours(kv: KV | Parameters<typeof natsLeader>[0], name: string, options: NatsElectionOptions = {}): Promise<Ours> {
  const election = await natsLeader(kv, KEY, name, options);
  const events: Ours["events"] = [];
  election.on("elected", (token) => events.push({ type: "elected", value: token, at: performance.now() }));
  election.on("unelected", () => events.push({ type: "unelected", at: performance.now() }));
  election.on("leader", (leader) => events.push({ type: "leader", value: leader, at: performance.now() }));
  elections.add(election);
  election.start();
  return { election, events };
}

function goMember(kv: KV, name = "go-member"): GoStyleMember {
  const member = new GoStyleMember(kv, KEY, name, TTL_MS);
  goMembers.add(member);
  return member.start();
}

/** Resolves just after the key's revision moves past `revision`: the Go leader's update, seen at once. */
async function nextWrite(kv: KV, revision: number): Promise<number> {
  const entry = await waitFor("the next write to the key", BOUND_MS, async () => {
    const now = await kv.get(KEY);
    return now && now.revision > revision ? now : undefined;
  });
  return entry.revision;
}

/**
 * A Go-style member leads and one of ours follows; just after the Go
 * member's update (so that its next tick is as far off as it gets), the key
 * is removed from outside. Samples both every few ms until ours is elected
 * and the Go member has stood down, and reports when each happened.
 */
async function removedUnderGoLeader(t: TestContext, how: "delete" | "purge", options: NatsElectionOptions) {
  const kv = await freshBucket();
  const go = goMember(kv);
  await waitFor("the Go member to say it leads", BOUND_MS, () => go.isLeader());
  const member = await ours(kv, "ours", options);
  await waitFor("ours to name the Go member", BOUND_MS, () => member.events.some((e) => e.type === "leader" && e.value === "go-member"));
  await nextWrite(kv, (await kv.get(KEY))!.revision);
  const removedAt = performance.now();
  await (how === "delete" ? kv.delete(KEY) : kv.purge(KEY));
  let overlapMs = 0;
  let last = performance.now();
  await waitFor("ours elected and the Go member stood down", BOUND_MS, () => {
    const now = performance.now();
    if (member.election.isLeader() && go.isLeader()) overlapMs += now - last;
    last = now;
    return member.election.isLeader() && go.events.some((e) => e.type === "lost");
  });
  const electedAt = member.events.find((e) => e.type === "elected")!.at;
  const goLostAt = go.events.find((e) => e.type === "lost")!.at;
  t.diagnostic(
    `${how}: the Go member stood down ${(goLostAt - removedAt).toFixed(0)} ms after it, ours elected ` +
      `${(electedAt - removedAt).toFixed(0)} ms after it; sampled overlap ${overlapMs.toFixed(0)} ms`,
  );
  return { kv, go, member, removedAt, electedAt, goLostAt, overlapMs };
}

describe("a mixed election with Go members: the key deleted or purged from outside while a Go member leads", () => {
  for (const how of ["delete", "purge"] as const) {
    it(`without goMembers, ours is elected over the ${how} marker while the Go member still says it leads (the hole the option closes)`, async (t) => {
      const { electedAt, goLostAt, removedAt } = await removedUnderGoLeader(t, how, {});
      assert.ok(electedAt - removedAt < 1_000, `ours took ${(electedAt - removedAt).toFixed(0)} ms`);
      assert.ok(goLostAt > electedAt, "the Go member had stood down before ours was elected");
    });

    it(`with goMembers, ours says elected after a ${how} only once the Go member stopped saying it leads`, async (t) => {
      const { kv, go, member, removedAt, electedAt, goLostAt, overlapMs } = await removedUnderGoLeader(t, how, { goMembers: true });
      assert.equal(overlapMs, 0, "both said they led at once");
      assert.ok(electedAt > goLostAt, `elected ${(goLostAt - electedAt).toFixed(0)} ms before the Go member stood down`);
      // Counted from the Go member's last write, which came just before the
      // removal (on a loaded machine the test may notice it, and remove the
      // key, a while after: count from the write itself).
      const sinceWrite = electedAt - go.lastWriteAnsweredAt;
      assert.ok(sinceWrite >= BELIEF_MS - 100, `elected only ${sinceWrite.toFixed(0)} ms after the Go member's last write`);
      assert.ok(electedAt - removedAt < BELIEF_MS + 1_000, `elected ${(electedAt - removedAt).toFixed(0)} ms after the ${how}`);
      // It held the key meanwhile, longer than a TTL, by renewing it: the token
      // is its winning create's revision.
      const [token] = member.events.filter((e) => e.type === "elected").map((e) => e.value as number);
      const entry = (await kv.get(KEY))!;
      assert.equal(entry.string(), "ours");
      assert.ok(entry.revision > token!, "the key was not renewed while ours waited");
      assert.ok(member.election.leaseRemaining() > TTL_MS / 4, `a term of ${member.election.leaseRemaining()} ms: counted from an old write`);
    });
  }

  it("with goMembers, a win over a Go member's key that aged out waits only for what is left of 0.75 × TTL + 5.2 s since its last write", async (t) => {
    const kv = await freshBucket();
    const go = goMember(kv);
    await waitFor("the Go member to say it leads", BOUND_MS, () => go.isLeader());
    const member = await ours(kv, "ours", { goMembers: true });
    await waitFor("ours to name the Go member", BOUND_MS, () => member.events.some((e) => e.type === "leader" && e.value === "go-member"));
    const lastWrite = await nextWrite(kv, (await kv.get(KEY))!.revision);
    const lastWriteSeenAt = performance.now();
    // It dies: its key ages out a TTL later, and nobody is told.
    await go.stop();
    await waitFor("ours to win the key", BOUND_MS, async () => (await kv.get(KEY))?.string() === "ours");
    const wonAt = performance.now();
    await waitFor("ours elected", BOUND_MS, () => member.election.isLeader());
    const electedAt = member.events.find((e) => e.type === "elected")!.at;
    t.diagnostic(
      `last write (revision ${lastWrite}) seen, then: won ${(wonAt - lastWriteSeenAt).toFixed(0)} ms, elected ` +
        `${(electedAt - lastWriteSeenAt).toFixed(0)} ms later (${(electedAt - wonAt).toFixed(0)} ms after the win)`,
    );
    assert.ok(electedAt - lastWriteSeenAt >= BELIEF_MS - 100, "elected before a Go member could have found out");
    // Not a whole 0.75 × TTL + 5.2 s from the win: the TTL that passed counts.
    assert.ok(electedAt - lastWriteSeenAt < BELIEF_MS + 500, `elected ${(electedAt - lastWriteSeenAt).toFixed(0)} ms after the last write`);
  });
});

describe("goMembers: while the winner waits", () => {
  it("a member that starts on an empty key holds it, renewing, and leads 0.75 × TTL + 5.2 s after it began watching", async (t) => {
    const kv = await freshBucket();
    const startedAt = performance.now();
    const member = await ours(kv, "solo", { goMembers: true });
    await waitFor("the key won", BOUND_MS, async () => (await kv.get(KEY))?.string() === "solo");
    const token = (await kv.get(KEY))!.revision;
    await waitFor("elected", BOUND_MS, () => member.election.isLeader());
    const electedAt = member.events.find((e) => e.type === "elected")!.at;
    t.diagnostic(`elected ${(electedAt - startedAt).toFixed(0)} ms after natsLeader() was called`);
    assert.ok(electedAt - startedAt >= BELIEF_MS, "led before a Go member could have found out");
    assert.equal(member.events[0]!.value, token, "the token is the winning create's revision");
    assert.ok((await kv.get(KEY))!.revision > token, "not renewed while it waited");
  });

  it("renewals that fail as the wait ends: it leads on one that succeeds after them, and meanwhile waits without spinning", async (t) => {
    // TTL 10 s: renewals every 5 s from the win, the wait 12.7 s, a term 8 s
    // from the write it counts from.
    const ttlMs = 10_000;
    const kv = await freshBucket(ttlMs);
    const startedAt = performance.now();
    // The renewal due 10 s after the win fails, and every retry until 14 s:
    // the wait ends meanwhile, and the write confirmed at 5 s keeps the key until 15 s.
    const failingUntil = startedAt + 14_000;
    const failing = (at: number) => at > startedAt + 9_000 && at < failingUntil;
    let failed = 0;
    const flaky = new Proxy(kv, {
      get(target, property, receiver) {
        const value = Reflect.get(target, property, receiver);
        if (property !== "update") return typeof value === "function" ? value.bind(target) : value;
        return (...args: Parameters<KV["update"]>) => {
          if (!failing(performance.now())) return target.update(...args);
          failed++;
          return Promise.reject(new Error("simulated: no answer"));
        };
      },
    });
    let termFrom = NaN;
    // CPU time this process used while the member waited: a wait that goes round again at once
    // (as it once did, for 1.5 s, until the retry was due) uses a core throughout; a machine
    // loaded by others delays timers, but adds nothing to this process's CPU time.
    const cpuBefore = process.cpuUsage();
    const member = await ours(flaky, "flaky", { goMembers: true, retryInitialDelay: 100, retryMaxDelay: 300 });
    // When the write the term counts from was sent: its deadline less TTL - stepDownMargin.
    member.election.once("elected", () => (termFrom = performance.now() + member.election.leaseRemaining() - (ttlMs - ttlMs / 5)));
    await waitFor("elected", BOUND_MS, () => member.election.isLeader());
    const cpu = process.cpuUsage(cpuBefore);
    const cpuMs = (cpu.user + cpu.system) / 1000;
    t.diagnostic(`CPU time while waiting: ${cpuMs.toFixed(0)} ms over ${((performance.now() - startedAt) / 1000).toFixed(1)} s`);
    assert.ok(failed > 1, `${failed} renewals failed`);
    assert.ok(termFrom >= failingUntil - 5, `the term counts from a write sent ${(failingUntil - termFrom).toFixed(0)} ms before the renewals came back`);
    assert.ok(cpuMs < 1000, `${cpuMs.toFixed(0)} ms of CPU time while it waited: it went round without waiting`);
  });

  it("a stop while it waits gives the key back, and it never says elected", async () => {
    const kv = await freshBucket();
    const member = await ours(kv, "quitter", { goMembers: true });
    await waitFor("the key won", BOUND_MS, async () => (await kv.get(KEY))?.string() === "quitter");
    await sleep(TTL_MS / 2);
    await member.election.leave();
    await waitFor("the key given back", 5_000, async () => (await kv.get(KEY))?.operation === "DEL");
    assert.deepEqual(member.events, []);
  });

  it("a write from outside while it waits ends the wait: it follows the writer and is never elected on the lost key", async () => {
    const kv = await freshBucket(10_000);
    const member = await ours(kv, "waiter", { goMembers: true });
    await waitFor("the key won", BOUND_MS, async () => (await kv.get(KEY))?.string() === "waiter");
    await kv.put(KEY, "intruder");
    // From its watch: well before its next renewal (every 5 s) would have failed.
    await waitFor("the intruder named", 2_000, () => member.events.some((e) => e.type === "leader" && e.value === "intruder"));
    assert.equal(member.election.isLeader(), false);
    assert.equal((await kv.get(KEY))?.string(), "intruder");
    assert.deepEqual(member.events.map((e) => e.type), ["leader"]);
  });

  it("with a watch that shows nothing, a failed renewal ends the wait", async () => {
    const kv = await freshBucket();
    // A watch that never delivers: the loss shows only to the revision-checked update.
    const blind = new Proxy(kv, {
      get(target, property, receiver) {
        if (property === "watch") {
          return async (...args: Parameters<KV["watch"]>) => {
            const real = await target.watch(...args);
            return {
              stop: () => real.stop(),
              get _data() {
                return (real as { _data?: unknown })._data;
              },
              async *[Symbol.asyncIterator]() {
                for await (const entry of real) void entry;
              },
            };
          };
        }
        const value = Reflect.get(target, property, receiver);
        return typeof value === "function" ? value.bind(target) : value;
      },
    });
    const member = await ours(blind, "waiter", { goMembers: true });
    await waitFor("the key won", BOUND_MS, async () => (await kv.get(KEY))?.string() === "waiter");
    await kv.put(KEY, "intruder");
    // Its next renewal (within TTL/2) fails; it looks again and names the writer.
    await waitFor("the intruder named", TTL_MS * 2, () => member.events.some((e) => e.type === "leader" && e.value === "intruder"));
    assert.equal(member.election.isLeader(), false);
    assert.deepEqual(member.events.map((e) => e.type), ["leader"]);
  });
});

describe("the goMembers option", () => {
  it("is NATS-only: natsLeader takes true or false, etcd refuses it as an unknown option", async () => {
    const kv = await freshBucket();
    await assert.rejects(natsLeader(kv, KEY, "a", { goMembers: "yes" as never }), /goMembers must be true or false, got "yes"/);
    // And the etcd v2 store's own option is no option of NATS.
    await assert.rejects(natsLeader(kv, KEY, "a", { v2: { watchRearmInterval: 5_000 } }), /the v2 option is for the etcd v2 store/);
    const election = await natsLeader({ bucket: kv, key: KEY, name: "a", goMembers: false });
    assert.equal(election.isRunning(), false);
    // An observer takes the same options object, and has no use for it.
    natsLeader.observe(kv, KEY, { goMembers: true });
    const client = new Etcd3({ hosts: "127.0.0.1:1" });
    try {
      assert.throws(() => etcdLeader(client, "/k", "n", 5, { goMembers: true } as etcdLeader.ElectionOptions), /unknown option "goMembers"/);
    } finally {
      client.close();
    }
  });
});
