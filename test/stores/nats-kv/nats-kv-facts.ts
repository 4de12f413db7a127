// The facts of JetStream KV (nats-server 2.9) that the NATS KV recipe relies
// on, written against its port (src/stores/nats-kv/port.ts), as one set of
// cases that two targets run: a real nats-server through the @nats-io/kv
// adapter, on a bucket handle opened as a user opens one (Kvm.open), and the
// simulated bucket of test/sim/stores/nats-kv.ts. A simulated bucket that
// differs from the real server on one of these fails here, so that what the
// simulation finds is about the real code on a faithful store.
import assert from "node:assert/strict";
import type { KvWatch, NatsKvPort } from "../../../src/stores/nats-kv/port";
import { EXPIRY_LAG_MS } from "../../sim/stores/nats-kv";

/** What a case may do to the bucket from outside the port, as an operator would, and time. */
export interface Operator {
  /** A write with no revision check (nats kv put); answers its revision. */
  put(key: string, value: string): Promise<number>;
  /** Deletes the key (nats kv del): a delete marker; answers its revision. */
  remove(key: string): Promise<number>;
  /** Purges the key (nats kv purge): a purge marker; answers its revision. */
  purge(key: string): Promise<number>;
  /** The stream's last sequence (nats stream info). */
  lastSequence(): Promise<number>;
  /** How many entries the stream holds, markers included. */
  entries(): Promise<number>;
  /** Deletes the bucket (nats kv rm). */
  deleteBucket(): Promise<void>;
  /** Makes the bucket again, with this TTL (nats kv add). */
  makeBucket(ttlMs: number): Promise<void>;
  /** Restarts the server on its store dir, and resolves once the client is back (the simulated bucket keeps everything: a no-op). */
  restart(): Promise<void>;
  /** Lets `ms` go by: real time on a real server, virtual time on the simulated one. */
  elapse(ms: number): Promise<void>;
  /** The time on the same clock, in ms. */
  now(): number;
}

/** A bucket a case runs on: the port of a member, and the operator's hands. */
export interface FactsBucket {
  readonly port: NatsKvPort;
  readonly operator: Operator;
}

/** What a target gives each case: a fresh bucket (history 1) with max_age `ttlMs`. */
export type BucketMaker = (ttlMs: number) => Promise<FactsBucket>;

export interface Fact {
  readonly title: string;
  run(bucket: BucketMaker): Promise<void>;
}

/** A case's TTL when it waits for nothing to age out. */
const LONG_TTL_MS = 60_000;

/** Whatever `promise` rejects with; fails if it resolves. */
async function rejection(what: string, promise: Promise<unknown>): Promise<unknown> {
  try {
    const value = await promise;
    assert.fail(`${what} should have failed, but gave ${JSON.stringify(value)}`);
  } catch (err) {
    if (err instanceof assert.AssertionError) throw err;
    return err;
  }
}

/** The revision a failed revision check names, asserting that it was one. */
async function wrongLastSequence(port: NatsKvPort, what: string, promise: Promise<unknown>): Promise<number> {
  const err = await rejection(what, promise);
  const current = port.wrongLastSequence(err);
  assert.notEqual(current, undefined, `${what} failed with ${String(err)}, not a failed revision check`);
  assert.equal(port.isBucketMissing(err), false);
  return current!;
}

/** A watch whose entries are collected as they come. */
interface Collected {
  readonly entries: Array<[string | undefined, number]>;
  readonly ended: Error | undefined;
  stop(): void;
}

async function collect(port: NatsKvPort, key: string): Promise<Collected> {
  const watch: KvWatch = await port.watch(key);
  const entries: Array<[string | undefined, number]> = [];
  let ended: Error | undefined;
  watch.listen({ onEntry: (value, revision) => entries.push([value, revision]), onEnd: (error) => (ended = error) });
  return {
    entries,
    get ended() {
      return ended;
    },
    stop: () => watch.stop(),
  };
}

/** Looks at `probe` every `every` ms of the operator's time until it is true, for at most `within` ms. */
async function until(operator: Operator, what: string, within: number, probe: () => boolean | Promise<boolean>, every = 10): Promise<void> {
  const deadline = operator.now() + within;
  while (!(await probe())) {
    if (operator.now() >= deadline) assert.fail(`${what}: not within ${within} ms`);
    await operator.elapse(every);
  }
}

export const NATS_KV_FACTS: readonly Fact[] = [
  {
    title: "status gives the bucket's name and its max_age in ms as its TTL",
    async run(bucket) {
      const { port } = await bucket(30_000);
      const status = await port.status();
      assert.equal(status.ttl, 30_000);
      assert.match(status.bucket, /^[-\w]+$/);
    },
  },
  {
    title: "create writes a key that has no entry and answers the write's revision; over a value it fails with a revision check naming the value's revision, and changes nothing",
    async run(bucket) {
      const { port } = await bucket(LONG_TTL_MS);
      const revision = await port.create("leader", "a");
      assert.ok(Number.isInteger(revision) && revision > 0);
      assert.equal(await wrongLastSequence(port, "a second create", port.create("leader", "b")), revision);
      assert.deepEqual(await port.get("leader"), { value: "a", revision });
    },
  },
  {
    title: "update succeeds at the key's last revision; at a stale one, or on a key with no entry, it fails with a revision check naming the current revision (0 for none); a revision that is not positive throws at once",
    async run(bucket) {
      const { port } = await bucket(LONG_TTL_MS);
      const first = await port.create("leader", "a");
      const second = await port.update("leader", "b", first);
      assert.ok(second > first);
      assert.equal(await wrongLastSequence(port, "an update at a stale revision", port.update("leader", "c", first)), second);
      assert.deepEqual(await port.get("leader"), { value: "b", revision: second });
      assert.equal(await wrongLastSequence(port, "an update of a key with no entry", port.update("nobody", "c", second)), 0);
      // A throw, not a rejected promise: nothing is sent.
      assert.throws(() => port.update("leader", "c", 0), { message: "version must be greater than 0" });
    },
  },
  {
    title: "delete at the key's last revision leaves a marker, which a read shows as no value at the marker's revision; at a stale revision it fails with a revision check and changes nothing",
    async run(bucket) {
      const { port } = await bucket(LONG_TTL_MS);
      const first = await port.create("leader", "a");
      const second = await port.update("leader", "b", first);
      assert.equal(await wrongLastSequence(port, "a delete at a stale revision", port.delete("leader", first)), second);
      assert.deepEqual(await port.get("leader"), { value: "b", revision: second });
      await port.delete("leader", second);
      const marker = await port.get("leader");
      assert.equal(marker?.value, undefined);
      assert.ok(marker!.revision > second);
    },
  },
  {
    title: "create succeeds over a delete marker and over a purge marker that an operator left",
    async run(bucket) {
      const { port, operator } = await bucket(LONG_TTL_MS);
      await port.create("leader", "a");
      const deleted = await operator.remove("leader");
      assert.deepEqual(await port.get("leader"), { value: undefined, revision: deleted });
      const overDelete = await port.create("leader", "b");
      assert.ok(overDelete > deleted);
      const purged = await operator.purge("leader");
      assert.deepEqual(await port.get("leader"), { value: undefined, revision: purged });
      const overPurge = await port.create("leader", "c");
      assert.ok(overPurge > purged);
      assert.deepEqual(await port.get("leader"), { value: "c", revision: overPurge });
    },
  },
  {
    title: "revisions are the stream's sequence: they only grow, across keys and through deletes and purges",
    async run(bucket) {
      const { port, operator } = await bucket(LONG_TTL_MS);
      const revisions: number[] = [];
      revisions.push(await port.create("a", "1"));
      revisions.push(await port.create("b", "1"));
      revisions.push(await port.update("a", "2", revisions[0]!));
      revisions.push(await operator.remove("a"));
      revisions.push(await port.create("a", "3"));
      revisions.push(await operator.purge("b"));
      revisions.push(await port.create("b", "2"));
      revisions.push(await operator.put("c", "1"));
      for (let i = 1; i < revisions.length; i++) {
        assert.ok(revisions[i]! > revisions[i - 1]!, `revisions ${revisions.join(", ")} should only grow`);
      }
      assert.equal(await operator.lastSequence(), revisions.at(-1));
    },
  },
  {
    title: "revisions keep growing after every entry aged out and the server restarted",
    async run(bucket) {
      const { port, operator } = await bucket(1_000);
      let last = 0;
      for (const key of ["a", "b", "c"]) last = await operator.put(key, "v");
      await until(operator, "every entry to age out", 10_000, async () => (await operator.entries()) === 0);
      await operator.restart();
      assert.equal(await operator.lastSequence(), last);
      assert.equal(await port.create("a", "again"), last + 1);
    },
  },
  {
    title: "an entry that ages out by max_age leaves no marker and gives a watch no event; a read then finds no entry, create succeeds, and an update at its revision fails naming 0",
    async run(bucket) {
      const ttlMs = 1_000;
      const { port, operator } = await bucket(ttlMs);
      const revision = await port.create("leader", "a");
      const watch = await collect(port, "leader");
      try {
        await until(operator, "the entry to age out", ttlMs + 5_000, async () => (await port.get("leader")) === undefined);
        // A delete reaches a watch within milliseconds (the next case); give an expiry's event far longer.
        await operator.elapse(1_000);
        assert.deepEqual(watch.entries, [], "the watch was told of the expiry");
        assert.equal(await operator.entries(), 0, "a marker was left in the stream");
        assert.equal(await wrongLastSequence(port, "an update at the aged-out revision", port.update("leader", "b", revision)), 0);
        assert.ok((await port.create("leader", "b")) > revision);
      } finally {
        watch.stop();
      }
    },
  },
  {
    title: "a marker ages out by max_age too: a read then finds no entry, and an update conditioned on the marker fails naming 0",
    async run(bucket) {
      const ttlMs = 1_000;
      const { port, operator } = await bucket(ttlMs);
      await port.create("leader", "a");
      const marker = await operator.remove("leader");
      await until(operator, "the marker to age out", ttlMs + 5_000, async () => (await port.get("leader")) === undefined);
      assert.equal(await wrongLastSequence(port, "an update over the aged-out marker", port.update("leader", "b", marker)), 0);
      assert.ok((await port.create("leader", "b")) > marker);
    },
  },
  {
    title: "a watch delivers the writes to its key made after it opened, each once, in revision order, values and markers alike, and none before it opened nor of other keys",
    async run(bucket) {
      const { port, operator } = await bucket(LONG_TTL_MS);
      const before = await port.create("leader", "before");
      const watch = await collect(port, "leader");
      try {
        const put1 = await port.update("leader", "a", before);
        await operator.put("other", "x");
        const deleted = await operator.remove("leader");
        const put2 = await port.create("leader", "b");
        const purged = await operator.purge("leader");
        const put3 = await port.create("leader", "c");
        await until(operator, "five watch entries", 5_000, () => watch.entries.length >= 5);
        await operator.elapse(200);
        assert.deepEqual(watch.entries, [
          ["a", put1],
          [undefined, deleted],
          ["b", put2],
          [undefined, purged],
          ["c", put3],
        ]);
        assert.equal(watch.ended, undefined);
      } finally {
        watch.stop();
      }
    },
  },
  {
    title: `an entry disappears max_age after its write, never before, and typically within ${EXPIRY_LAG_MS} ms after (the server's expiry timer): the median of several entries`,
    async run(bucket) {
      const ttlMs = 1_000;
      const { port, operator } = await bucket(ttlMs);
      const keys = ["a", "b", "c", "d", "e", "f", "g", "h"];
      const written = new Map<string, { sent: number; acked: number }>();
      for (const key of keys) {
        // Taken before the write is sent: the server stamps the entry later than this.
        const sent = operator.now();
        await operator.put(key, "v");
        written.set(key, { sent, acked: operator.now() });
        await operator.elapse(70);
      }
      // Per entry, the read that first found it gone: when it was sent, and when its answer came. The server
      // read somewhere in between, so the entry was gone by the answer, and may have gone just after the send.
      const gone = new Map<string, { looked: number; answered: number }>();
      await until(operator, "every entry to disappear", ttlMs + 10_000, async () => {
        for (const key of keys) {
          if (gone.has(key)) continue;
          const looked = operator.now();
          if ((await port.get(key)) === undefined) gone.set(key, { looked, answered: operator.now() });
        }
        return gone.size === keys.length;
      }, 2);
      const lateness: number[] = [];
      for (const key of keys) {
        const { sent, acked } = written.get(key)!;
        const { looked, answered } = gone.get(key)!;
        assert.ok(answered - sent >= ttlMs, `${key} was gone ${(answered - sent).toFixed(1)} ms after its write was sent, before its max_age`);
        // The read that saw it gone was sent up to one look (2 ms) and one read after it went.
        lateness.push(looked - acked - ttlMs);
      }
      // Never early is what safety rests on; how late is the simulation's model of the server's timer. One entry
      // seen late because this process or the server waited for a core (95 ms once, on a machine loaded by
      // other work) says nothing of the timer: the median does.
      const median = [...lateness].sort((a, b) => a - b)[Math.floor(lateness.length / 2)]!;
      assert.ok(median <= EXPIRY_LAG_MS + 10, `entries were still there a median ${median.toFixed(1)} ms after their max_age (counted from the acknowledgement): ${lateness.map((v) => v.toFixed(0)).join(", ")} ms`);
    },
  },
  {
    title: "an update restarts the entry's max_age: it outlives the first write's and ages out counted from the update",
    async run(bucket) {
      const ttlMs = 2_000;
      const { port, operator } = await bucket(ttlMs);
      const created = await port.create("leader", "a");
      const createdAcked = operator.now();
      await operator.elapse(ttlMs / 2);
      const updateSent = operator.now();
      const updated = await port.update("leader", "b", created);
      // Past the created entry's max_age, well short of the update's.
      await operator.elapse(Math.max(0, createdAcked + ttlMs + 200 - operator.now()));
      assert.equal((await port.get("leader"))?.revision, updated, "the updated entry did not outlive the created one's max_age");
      await until(operator, "the updated entry to age out", ttlMs + 5_000, async () => (await port.get("leader")) === undefined);
      assert.ok(operator.now() - updateSent >= ttlMs, "the updated entry went before its own max_age");
    },
  },
  {
    title: "after a restart the bucket, its TTL, keys and revisions are kept: an update at the revision from before succeeds",
    async run(bucket) {
      const { port, operator } = await bucket(LONG_TTL_MS);
      const revision = await port.create("leader", "a");
      await operator.restart();
      assert.equal((await port.status()).ttl, LONG_TTL_MS);
      assert.deepEqual(await port.get("leader"), { value: "a", revision });
      assert.ok((await port.update("leader", "b", revision)) > revision);
    },
  },
  {
    title: "a watch goes on across a restart of the server: it delivers the writes made after it, and does not end",
    async run(bucket) {
      const { port, operator } = await bucket(LONG_TTL_MS);
      const watch = await collect(port, "leader");
      try {
        const before = await port.create("leader", "a");
        await until(operator, "the first watch entry", 5_000, () => watch.entries.length === 1);
        await operator.restart();
        const after = await port.update("leader", "b", before);
        await until(operator, "the write after the restart on the watch", 10_000, () => watch.entries.length === 2);
        assert.deepEqual(watch.entries, [["a", before], ["b", after]]);
        assert.equal(watch.ended, undefined);
      } finally {
        watch.stop();
      }
    },
  },
  {
    title: "once the bucket is deleted, every request of a handle opened before fails as a missing bucket: status, get, create, update, delete and watch",
    async run(bucket) {
      const { port, operator } = await bucket(LONG_TTL_MS);
      const revision = await port.create("leader", "a");
      await operator.deleteBucket();
      const requests: Array<[string, () => Promise<unknown>]> = [
        ["status", () => port.status()],
        ["get", () => port.get("leader")],
        ["create", () => port.create("leader", "b")],
        ["update", () => port.update("leader", "b", revision)],
        ["delete", () => port.delete("leader", revision)],
        ["watch", () => port.watch("leader")],
      ];
      for (const [name, request] of requests) {
        const err = await rejection(`${name} on a deleted bucket`, request());
        assert.ok(port.isBucketMissing(err), `${name} on a deleted bucket failed with ${String(err)}, not as a missing bucket`);
        assert.equal(port.wrongLastSequence(err), undefined);
      }
    },
  },
  {
    title: "a bucket made again starts its revisions over, and a watch of the deleted one goes silent: it neither delivers nor ends",
    async run(bucket) {
      const { port, operator } = await bucket(LONG_TTL_MS);
      const watch = await collect(port, "leader");
      try {
        const first = await port.create("leader", "a");
        await port.update("leader", "b", first);
        await until(operator, "two watch entries", 5_000, () => watch.entries.length === 2);
        await operator.deleteBucket();
        await operator.makeBucket(LONG_TTL_MS);
        let revision = await port.create("leader", "again");
        assert.equal(revision, 1);
        // Past the revisions the watch saw of the deleted bucket.
        for (let i = 0; i < 3; i++) revision = await port.update("leader", "again", revision);
        await operator.elapse(2_000);
        assert.deepEqual(
          watch.entries.map(([, revision]) => revision),
          [first, first + 1],
          "the watch of the deleted bucket delivered a write to the new one",
        );
        assert.equal(watch.ended, undefined, "the watch of the deleted bucket ended");
      } finally {
        watch.stop();
      }
    },
  },
];
