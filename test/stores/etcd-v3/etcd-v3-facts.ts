// The facts of etcd's v3 API that the v3 recipe relies on, written against
// its port (src/stores/etcd-v3/port.ts), as one set of cases that two
// targets run: a real etcd through the etcd3 client's adapter, and the
// simulated etcd of test/sim/stores/etcd-v3.ts. A simulated store that
// differs from the real server on one of these fails here, so that what the
// simulation finds is about the real code on a faithful store.
import assert from "node:assert/strict";
import type { EtcdV3Port, KeyValue, WatchEvent, WatchSet } from "../../../src/stores/etcd-v3/port";

/** What a case may do to the store from outside the port, as an operator would. */
export interface Operator {
  /** Puts a key (etcdctl put), in a revision of its own; answers that revision. */
  put(key: string, value: string): Promise<number>;
  /** Deletes keys in one revision (etcdctl del --prefix); answers it. */
  deletePrefix(prefix: string): Promise<number>;
  /** Compacts the history up to the current revision (etcdctl compact). */
  compact(): Promise<void>;
  /** Lets `ms` go by: real time on a real server, virtual time on the simulated one. */
  elapse(ms: number): Promise<void>;
}

export interface FactsTarget {
  readonly name: string;
  port: EtcdV3Port;
  operator: Operator;
}

export interface Fact {
  readonly title: string;
  run(target: FactsTarget, prefix: string): Promise<void>;
}

const signal = () => AbortSignal.timeout(10_000);

/** The next event of `watches`, within a bound. */
async function nextEvent<Name extends string>(watches: WatchSet<Name>, within = 5_000): Promise<WatchEvent<Name>> {
  const next = watches.next();
  let timer: NodeJS.Timeout | undefined;
  const bounded = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no watch event within ${within} ms`)), within);
  });
  try {
    return await Promise.race([next, bounded]);
  } finally {
    clearTimeout(timer);
  }
}

function keysOf(kvs: readonly KeyValue[]): string[] {
  return kvs.map((kv) => kv.key);
}

export const V3_FACTS: readonly Fact[] = [
  {
    title: "the campaign transaction puts the key only if it has no create revision, at the transaction's revision",
    async run({ port }, prefix) {
      const lease = await port.grantLease(5);
      const key = `${prefix}/a`;
      const first = await port.campaign({ key, value: "one", leaseId: lease.id });
      assert.equal(first.succeeded, true);
      assert.equal(first.existing, undefined);
      const read = await port.range({ key }, "read", signal());
      assert.equal(read.kvs[0]?.createRevision, first.revision);
      assert.equal(read.kvs[0]?.value, "one");
      const second = await port.campaign({ key, value: "two", leaseId: lease.id });
      assert.equal(second.succeeded, false);
      assert.equal(second.existing?.createRevision, first.revision);
      assert.equal(second.existing?.value, "one");
      await port.revokeLease(lease.id, signal());
    },
  },
  {
    title: "a range sorts by create revision either way, limits, bounds the create revision, and reads at a past revision",
    async run({ port, operator }, prefix) {
      const r1 = await operator.put(`${prefix}/c`, "1");
      const r2 = await operator.put(`${prefix}/a`, "2");
      const r3 = await operator.put(`${prefix}/b`, "3");
      const all = { prefix: `${prefix}/` };
      assert.deepEqual(keysOf((await port.range({ ...all, sortByCreate: "ascend" }, "read", signal())).kvs), [`${prefix}/c`, `${prefix}/a`, `${prefix}/b`]);
      assert.deepEqual(keysOf((await port.range({ ...all, sortByCreate: "descend", limit: 2 }, "read", signal())).kvs), [`${prefix}/b`, `${prefix}/a`]);
      assert.deepEqual(keysOf((await port.range({ ...all }, "read", signal())).kvs), [`${prefix}/a`, `${prefix}/b`, `${prefix}/c`]);
      const bounded = await port.range({ ...all, sortByCreate: "ascend", minCreateRevision: r2, maxCreateRevision: r2 }, "read", signal());
      assert.deepEqual(keysOf(bounded.kvs), [`${prefix}/a`]);
      assert.ok(bounded.revision >= r3);
      const past = await port.range({ ...all, sortByCreate: "ascend", revision: r1 }, "read", signal());
      assert.deepEqual(keysOf(past.kvs), [`${prefix}/c`]);
      // The answer's header is etcd's revision now, not the one read at.
      assert.ok(past.revision >= r3, `a read at ${r1} answered revision ${past.revision}`);
      const one = await port.range({ key: `${prefix}/a` }, "read", signal());
      assert.deepEqual(one.kvs.map((kv) => [kv.key, kv.value, kv.createRevision, kv.modRevision]), [[`${prefix}/a`, "2", r2, r2]]);
    },
  },
  {
    title: "a put on a key keeps its create revision and moves its mod revision (etcd's Proclaim)",
    async run({ port, operator }, prefix) {
      const created = await operator.put(`${prefix}/k`, "before");
      const moved = await operator.put(`${prefix}/k`, "after");
      const [kv] = (await port.range({ key: `${prefix}/k` }, "read", signal())).kvs;
      assert.deepEqual([kv?.value, kv?.createRevision, kv?.modRevision], ["after", created, moved]);
    },
  },
  {
    title: "a watch from a past revision replays what happened since, in revision order, and then what happens",
    async run(target, prefix) {
      const { port, operator } = target;
      const from = await operator.put(`${prefix}/x`, "1");
      await operator.put(`${prefix}/y`, "2");
      const controller = new AbortController();
      const watches = port.watches<"w">(controller.signal);
      try {
        watches.add("w", { prefix: `${prefix}/` }, from);
        const replayed = [await nextEvent(watches), await nextEvent(watches)];
        assert.deepEqual(replayed.map((e) => (e.type === "cancelled" ? "cancelled" : `${e.type} ${e.kv.key}`)), [`put ${prefix}/x`, `put ${prefix}/y`]);
        const deleted = await operator.deletePrefix(`${prefix}/x`);
        const event = await nextEvent(watches);
        assert.equal(event.type, "delete");
        if (event.type === "delete") {
          assert.equal(event.kv.key, `${prefix}/x`);
          // A deletion's event carries the deletion's revision, and no create revision.
          assert.equal(event.kv.modRevision, deleted);
          assert.equal(event.kv.createRevision, 0);
        }
      } finally {
        watches.close();
        controller.abort();
      }
    },
  },
  {
    title: "the events of one revision come together: when one is taken, the others are queued already",
    async run(target, prefix) {
      const { port, operator } = target;
      await operator.put(`${prefix}/1`, "a");
      const from = await operator.put(`${prefix}/2`, "b");
      const controller = new AbortController();
      const watches = port.watches<"w">(controller.signal);
      try {
        watches.add("w", { range: { start: `${prefix}/1`, end: `${prefix}/2\0` }, deletesOnly: true }, from + 1);
        await operator.elapse(200);
        await operator.deletePrefix(`${prefix}/`);
        const first = await nextEvent(watches);
        assert.equal(first.type, "delete");
        const other = first.type === "delete" && first.kv.key === `${prefix}/1` ? `${prefix}/2` : `${prefix}/1`;
        assert.ok(watches.anyQueued((e) => e.type === "delete" && e.kv.key === other), "the other deletion of that revision is not queued with the first");
      } finally {
        watches.close();
        controller.abort();
      }
    },
  },
  {
    title: "a watch that takes deletions only is not woken by puts",
    async run(target, prefix) {
      const { port, operator } = target;
      const from = await operator.put(`${prefix}/p`, "a");
      const controller = new AbortController();
      const watches = port.watches<"w">(controller.signal);
      try {
        watches.add("w", { prefix: `${prefix}/`, deletesOnly: true }, from + 1);
        await operator.put(`${prefix}/q`, "b");
        await operator.put(`${prefix}/p`, "c");
        await operator.deletePrefix(`${prefix}/q`);
        const event = await nextEvent(watches);
        assert.equal(event.type === "cancelled" ? event.type : `${event.type} ${event.kv.key}`, `delete ${prefix}/q`);
      } finally {
        watches.close();
        controller.abort();
      }
    },
  },
  {
    title: "a watch from a compacted revision is cancelled by etcd, which a watch added with reportCancel reports as an event",
    async run(target, prefix) {
      const { port, operator } = target;
      const old = await operator.put(`${prefix}/old`, "a");
      await operator.put(`${prefix}/new`, "b");
      await operator.compact();
      const controller = new AbortController();
      const watches = port.watches<"w">(controller.signal);
      try {
        watches.add("w", { prefix: `${prefix}/`, reportCancel: true }, old);
        const event = await nextEvent(watches);
        assert.equal(event.type, "cancelled");
      } finally {
        watches.close();
        controller.abort();
      }
    },
  },
  {
    title: "a lease's revocation deletes its keys, in one revision, and a keep-alive of it then answers 0 or not found",
    async run(target, prefix) {
      const { port } = target;
      const lease = await port.grantLease(10);
      assert.equal(lease.ttlSeconds, 10);
      const a = await port.campaign({ key: `${prefix}/a`, value: "a", leaseId: lease.id });
      const controller = new AbortController();
      const watches = port.watches<"w">(controller.signal);
      try {
        watches.add("w", { prefix: `${prefix}/`, deletesOnly: true }, a.revision + 1);
        assert.ok((await port.keepAlive(lease.id, signal())) > 0);
        await port.revokeLease(lease.id, signal());
        const event = await nextEvent(watches);
        assert.equal(event.type === "cancelled" ? event.type : `${event.type} ${event.kv.key}`, `delete ${prefix}/a`);
        let ttl: number | undefined;
        try {
          ttl = await port.keepAlive(lease.id, signal());
        } catch (err) {
          assert.equal((err as Error).name, "LeaseNotFoundError");
        }
        if (ttl !== undefined) assert.equal(ttl, 0);
        // Revoking it again is no failure.
        await port.revokeLease(lease.id, signal());
      } finally {
        watches.close();
        controller.abort();
      }
    },
  },
  {
    title: "a lease not kept alive expires after its TTL, its keys deleted, no sooner and within a sweep after",
    async run(target, prefix) {
      const { port, operator } = target;
      const lease = await port.grantLease(2);
      const joined = await port.campaign({ key: `${prefix}/e`, value: "e", leaseId: lease.id });
      assert.equal(joined.succeeded, true);
      await operator.elapse(lease.ttlSeconds * 1000 - 300);
      assert.equal((await port.range({ key: `${prefix}/e` }, "read", signal())).kvs.length, 1, "the key went before its TTL");
      await operator.elapse(1_300);
      assert.equal((await port.range({ key: `${prefix}/e` }, "read", signal())).kvs.length, 0, "the key outlived its TTL by a second");
    },
  },
];
