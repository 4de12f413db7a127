// A NATS KV follower's wait (src/stores/nats-kv/follower.ts), through the
// backend's awaitTurn on a bucket in memory behind the recipe's port, on a
// hand-driven clock and turn queue: when it races and with which write, whom
// it names, and what it sends while a holder renews.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { Claim, Leader } from "../../src/contract/backend";
import { TurnQueue } from "../../src/util/turns";
import { NatsKvBackend, type NatsMembership, type NatsTiming } from "../../src/stores/nats-kv/recipe";
import { FakeClock, settle } from "../kit/fake-clock";
import { NatsKvStore } from "../sim/stores/nats-kv";

const KEY = "leader";
const TTL_MS = 2_000;

interface Following {
  kv: NatsKvStore;
  clock: FakeClock;
  backend: NatsKvBackend;
  /** Each leader the follower named, by name (undefined: nobody). */
  named: Array<string | undefined>;
  /** The turn queue's waiters, let through one per turnCame(). */
  turn: () => Promise<void>;
  /** What awaitTurn resolved with, once it did. */
  won: () => Claim<NatsMembership> | undefined;
  turnOver: Promise<Claim<NatsMembership>>;
  controller: AbortController;
}

/** Our member, "ours", waiting for its turn on `kv` (a key held by `holder`, if given). */
async function following(options: { holder?: string; random?: number; kv?: NatsKvStore; clock?: FakeClock } = {}): Promise<Following> {
  const clock = options.clock ?? new FakeClock();
  const kv = options.kv ?? new NatsKvStore({ now: () => clock.now() });
  if (options.holder) kv.put(KEY, options.holder);
  const waiting: Array<() => void> = [];
  const turns = new TurnQueue((callback) => waiting.push(callback));
  const random = options.random ?? 0;
  const backend = new NatsKvBackend(kv, KEY, "ours", turns, clock, () => random);
  const named: Array<string | undefined> = [];
  const controller = new AbortController();
  let won: Claim<NatsMembership> | undefined;
  const turnOver = backend.awaitTurn(undefined, (leader: Leader | undefined) => named.push(leader?.name), controller.signal);
  turnOver.then((claim) => (won = claim), () => undefined);
  await settle();
  return {
    kv,
    clock,
    backend,
    named,
    turn: async () => {
      waiting.shift()?.();
      await settle();
    },
    won: () => won,
    turnOver,
    controller,
  };
}

/** The times at which creates, or updates over a marker, were sent. */
const campaignTimes = (kv: NatsKvStore) => kv.requests.filter((r) => r.kind === "create" || r.kind === "update").map((r) => r.at);

describe("a NATS KV follower", () => {
  it("names the holder a read finds after its create lost, and sends nothing while the holder renews", async () => {
    const { kv, clock, named, won, controller } = await following({ holder: "x" });
    assert.deepEqual(named, ["x"]);
    assert.equal(kv.count("create"), 1);
    assert.equal(kv.count("get"), 1);
    // The holder renews every TTL/2 for three TTLs; each renewal on the
    // watch pushes the moment its entry ages out back.
    for (let i = 0; i < 6; i++) {
      await clock.advance(TTL_MS / 2);
      kv.put(KEY, "x");
      await settle();
    }
    assert.equal(kv.count("create"), 1, "a follower raced while the holder renewed");
    assert.equal(kv.count("get"), 1);
    assert.deepEqual(named, ["x"], "a renewal is no change of leader");
    assert.equal(won(), undefined);
    controller.abort(new Error("done"));
  });

  it("races once the holder's last write must have aged out (its arrival + TTL + jitter), and not before", async () => {
    const { kv, clock, won } = await following({ holder: "x", random: 0.5 });
    const arrival = clock.now();
    kv.expire(KEY);
    // The jitter: random() × min(50, TTL/20) = 0.5 × 50.
    const dueAt = arrival + TTL_MS + 25;
    await clock.advance(dueAt - clock.now() - 1);
    assert.equal(kv.count("create"), 1, "raced before the holder's entry could have aged out");
    await clock.advance(1);
    assert.deepEqual(campaignTimes(kv), [arrival, dueAt]);
    const claim = won();
    assert.ok(claim, "the create over the aged-out key won");
    assert.equal(claim.token, kv.entry(KEY)!.revision);
    assert.equal(claim.sentAt, dueAt);
    assert.equal(claim.ttlMs, TTL_MS);
  });

  it("looks again 25, 50 and 100 ms later while the server has yet to age the holder's entry out, and does not name it again", async () => {
    const { kv, clock, named, won } = await following({ holder: "x" });
    const dueAt = clock.now() + TTL_MS;
    await clock.advance(TTL_MS);
    await clock.advance(25 + 50 + 100);
    assert.deepEqual(campaignTimes(kv).slice(1), [dueAt, dueAt + 25, dueAt + 75, dueAt + 175]);
    assert.deepEqual(named, ["x"]);
    kv.expire(KEY);
    await clock.advance(200);
    assert.ok(won(), "won once the entry was gone");
    assert.equal(campaignTimes(kv).at(-1), dueAt + 375);
  });

  it("after a delete marker names nobody, waits for its turn, then races with the write conditioned on the marker's revision", async () => {
    const { kv, named, turn, won } = await following({ holder: "x" });
    const marker = kv.remove(KEY);
    await settle();
    assert.deepEqual(named, ["x", undefined]);
    assert.deepEqual(campaignTimes(kv).length, 1, "raced before its turn");
    await turn();
    const [, campaign] = kv.requests.filter((r) => r.kind === "create" || r.kind === "update");
    assert.deepEqual({ kind: campaign?.kind, revision: campaign?.revision }, { kind: "update", revision: marker });
    assert.equal(won()?.token, marker + 1);
  });

  it("on a replicated bucket, after a delete marker names nobody and sends nothing until the marker has aged out, then creates the key and confirms it with a second create", async () => {
    const clock = new FakeClock();
    const kv = new NatsKvStore({ now: () => clock.now(), replicas: 3 });
    const { named, won } = await following({ holder: "x", kv, clock });
    const sent = () => kv.requests.filter((r) => r.kind !== "get" && r.kind !== "status" && r.kind !== "watch").map((r) => r.kind);
    assert.deepEqual(sent(), ["createIfAbsent"], "the first campaign is a create of the absent key");
    const marker = kv.remove(KEY);
    await settle();
    assert.deepEqual(named, ["x", undefined]);
    await clock.advance(TTL_MS - 1);
    assert.deepEqual(sent(), ["createIfAbsent"], "raced over the marker before it could have aged out");
    // The server ages the marker out a little late: the create finds it, and looks again shortly.
    await clock.advance(1);
    assert.deepEqual(sent(), ["createIfAbsent", "createIfAbsent"]);
    assert.equal(won(), undefined);
    kv.expire(KEY);
    await clock.advance(25);
    assert.deepEqual(sent(), ["createIfAbsent", "createIfAbsent", "createIfAbsent", "createIfAbsent"]);
    assert.equal(won()?.token, marker + 1, "led on the first create, which the second found as the key's last write");
    assert.equal(kv.entry(KEY)?.revision, marker + 1);
  });

  it("whose turn comes after the winning write arrived follows that write and sends no create", async () => {
    const { kv, clock, named, turn, won } = await following({ holder: "x" });
    kv.remove(KEY);
    kv.put(KEY, "y");
    await settle();
    const arrival = clock.now();
    await turn();
    assert.deepEqual(named, ["x", undefined, "y"]);
    assert.equal(campaignTimes(kv).length, 1, "a follower raced for a key already won");
    assert.equal(kv.count("get"), 1);
    // y is followed from its write's arrival: due a TTL later.
    await clock.advance(TTL_MS - 1);
    assert.equal(campaignTimes(kv).length, 1);
    kv.expire(KEY);
    await clock.advance(1);
    assert.equal(campaignTimes(kv)[1], arrival + TTL_MS);
    assert.ok(won());
  });

  it("forgets the marker once a newer value shows, and races with a plain create, never conditioned on the marker's revision (which a bucket made again since may give a live value)", async () => {
    const { kv, clock, named, turn, won } = await following({ holder: "x" });
    const marker = kv.remove(KEY);
    kv.put(KEY, "y");
    await settle();
    await turn();
    assert.deepEqual(named, ["x", undefined, "y"]);
    // The bucket is deleted and made again (our watch of it goes silent), and z's writes there reach the marker's revision.
    kv.deleteBucket();
    kv.makeBucket();
    let revision = kv.put(KEY, "z");
    while (revision < marker) revision = kv.put(KEY, "z");
    assert.equal(revision, marker);
    // y's last write is due: y is gone, as far as we can tell.
    await clock.advance(TTL_MS + 50);
    const campaigns = kv.requests.filter((r) => r.kind === "create" || r.kind === "update").slice(1);
    assert.ok(campaigns.length > 0, "it did not race once y was due");
    assert.ok(!campaigns.some((r) => r.kind === "update" && r.revision === marker), "it raced with the revision of a marker older than a value it saw");
    assert.equal(kv.entry(KEY)?.value, "z", "it overwrote z's live entry");
    assert.equal(won(), undefined);
    assert.equal(named.at(-1), "z");
  });

  it("names the member that won while its own create is on its way, but never itself", async () => {
    const clock = new FakeClock();
    const kv = new NatsKvStore({ now: () => clock.now() });
    // Our create is held back, unapplied, until let go.
    let letGo: () => void = () => undefined;
    const held = new Promise<void>((resolve) => (letGo = resolve));
    const create = kv.create.bind(kv);
    kv.create = async (key, value) => {
      await held;
      return create(key, value);
    };
    const { named, won } = await following({ kv, clock });
    // y's create is applied first; ours, held back, then fails.
    kv.put(KEY, "y");
    await settle();
    assert.deepEqual(named, ["y"], "y was not named before the answer to our create");
    letGo();
    await settle();
    assert.equal(named.at(-1), "y");
    assert.equal(won(), undefined);
    assert.equal(kv.count("get"), 0, "the write that beat ours was on the watch: no read");
  });

  it("does not name its own create's entry, which arrives before the create's answer", async () => {
    const clock = new FakeClock();
    const kv = new NatsKvStore({ now: () => clock.now() });
    let answered = false;
    const original = kv.create.bind(kv);
    // Applied (and on the watch) at once; answered only after a while.
    kv.create = (key, value) => original(key, value).then(async (revision) => {
      await settle();
      answered = true;
      return revision;
    });
    const { named, won } = await following({ kv, clock });
    await settle();
    assert.ok(answered);
    assert.deepEqual(named, []);
    assert.ok(won());
  });

  it("leads on the TTL the bucket has now, read beside the winning create, and gives a win back whose TTL the timing does not fit", async () => {
    const clock = new FakeClock();
    const kv = new NatsKvStore({ now: () => clock.now(), ttlMs: 1_000 });
    const timing: NatsTiming = {
      refreshInterval: 300,
      stepDownMargin: 100,
      requestTimeout: 300,
      retryInitialDelay: 50,
      retryMaxDelay: 100,
      ttlProblem: (ttlMs) => (ttlMs < 500 ? new RangeError(`too short: ${ttlMs}`) : undefined),
    };
    const backend = new NatsKvBackend(kv, KEY, "ours", new TurnQueue(), clock, () => 0);
    backend.useTiming(timing, { goMembers: false });
    const claim = await backend.awaitTurn(undefined, () => undefined, AbortSignal.timeout(1_000));
    assert.equal(claim.ttlMs, 1_000);
    assert.equal(kv.count("status"), 2, "the status is read beside the create");

    const short = new NatsKvStore({ now: () => clock.now(), ttlMs: 400 });
    const other = new NatsKvBackend(short, KEY, "ours", new TurnQueue(), clock, () => 0);
    other.useTiming({ ...timing, ttlProblem: (ttlMs) => (ttlMs < 500 && short.count("create") > 0 ? new RangeError(`too short: ${ttlMs}`) : undefined) }, { goMembers: false });
    await assert.rejects(other.awaitTurn(undefined, () => undefined, AbortSignal.timeout(1_000)), /too short: 400/);
    await settle();
    assert.equal(short.entry(KEY)?.value, undefined, "the win was not given back");
  });

  it("ends its wait with the signal's reason, and closes its watch", async () => {
    const { kv, controller, turnOver } = await following({ holder: "x" });
    assert.equal(kv.openWatches, 1);
    const reason = new Error("given up");
    controller.abort(reason);
    await assert.rejects(turnOver, (err) => err === reason);
    assert.equal(kv.openWatches, 0);
  });

  it("rejects when its watch ends by itself, and closes it", async () => {
    const { kv, turnOver } = await following({ holder: "x" });
    kv.endWatches(new Error("connection closed"));
    await assert.rejects(turnOver, /connection closed/);
    assert.equal(kv.openWatches, 0);
  });
});

describe("a NATS KV follower's watch that goes unanswered", () => {
  /** Our member's wait on a bucket of `replicas`, its first watch request never answered: how often it asked by `atMs`. */
  async function watchesAskedBy(replicas: number, atMs: number): Promise<number> {
    const clock = new FakeClock();
    const kv = new NatsKvStore({ now: () => clock.now(), replicas });
    const watchNow = kv.watch.bind(kv);
    let asked = 0;
    kv.watch = (key: string) => (++asked === 1 ? new Promise(() => undefined) : watchNow(key));
    const backend = new NatsKvBackend(kv, KEY, "ours", new TurnQueue(() => undefined), clock, () => 0);
    const controller = new AbortController();
    backend.awaitTurn(undefined, () => undefined, controller.signal).catch(() => undefined);
    await clock.advance(atMs);
    controller.abort();
    await settle();
    return asked;
  }

  it("is asked for again after the request timeout (TTL/2) on a replicated bucket, whose consumer may sit on a server that is down", async () => {
    assert.equal(await watchesAskedBy(3, TTL_MS / 2 - 1), 1);
    assert.equal(await watchesAskedBy(3, TTL_MS / 2), 2);
  });

  it("is waited for on one server, where asking again would only add to its load", async () => {
    assert.equal(await watchesAskedBy(1, 10 * TTL_MS), 1);
  });
});
