// Watches on one Watch stream per etcd3 client with their creations
// pipelined (watch-stream.ts), and single-key reads batched into read-only
// transactions (key-reads.ts), against a real etcd: etcd answers the creates
// in the order they were written, each watch gets its own events only, a
// watch cancelled before its create was answered hears nothing, a compacted
// start is reported, namespaces are applied both ways, and each batched read
// answers as its own Range would.
import assert from "node:assert/strict";
import { after, afterEach, before, describe, it } from "node:test";
import { Etcd3 } from "etcd3";
import etcdLeader from "../../../src/index";
import { etcd3Port } from "../../../src/stores/etcd-v3/etcd3/port";
import { watchStreamOf } from "../../../src/stores/etcd-v3/etcd3/watch-stream";
import { WatchCancelledError, type WatchEvent, type WatchSet } from "../../../src/stores/etcd-v3/port";
import { startEtcd, type EtcdCluster } from "../../kit/etcd-server";
import { waitFor } from "../../kit/waiting";

let cluster: EtcdCluster;
const clients = new Set<Etcd3>();
let runs = 0;

before(async () => {
  cluster = await startEtcd({ enableV2: false });
});

afterEach(() => {
  for (const c of clients) c.close();
  clients.clear();
});

after(async () => {
  await cluster?.close();
});

function newClient(): Etcd3 {
  const c = new Etcd3(etcdLeader.etcd3Options({ hosts: cluster.hostPorts }));
  clients.add(c);
  return c;
}

/** The next event of `set`, or a failure if none comes within `ms`. */
async function nextWithin<N extends string>(set: WatchSet<N>, ms = 5_000): Promise<WatchEvent<N>> {
  return Promise.race([set.next(), new Promise<never>((_, reject) => setTimeout(() => reject(new Error(`no event within ${ms} ms`)), ms).unref())]);
}

describe("etcd3 watches on one stream, created many at once", () => {
  it("creates 2000 watches at once, each confirmed and given its own key's events only; cancelled ones hear nothing", async () => {
    const client = newClient();
    const port = etcd3Port(client);
    const prefix = `/watch-stream/${++runs}/`;
    const count = 2_000;
    await Promise.all(Array.from({ length: count }, (_, i) => client.put(`${prefix}${i}`).value("v")));
    const { revision } = await port.range({ key: `${prefix}0` }, "read", AbortSignal.timeout(5_000));
    const sets = Array.from({ length: count }, () => port.watches<"k">(AbortSignal.timeout(60_000)));
    sets.forEach((set, i) => set.add("k", { key: `${prefix}${i}`, deletesOnly: i % 2 === 0 }, revision + 1));
    // Every other one cancelled in the same turn, before etcd answered its create.
    sets.forEach((set, i) => i % 4 === 1 && set.close());
    const live = sets.filter((_, i) => i % 4 !== 1);
    await waitFor("every watch confirmed", 20_000, () => live.every((set) => set.created("k")));
    assert.equal(watchStreamOf(client).size, live.length);

    // A put on every key and a deletion of every key: deletes-only watches see one event, the others two, in order.
    await Promise.all(Array.from({ length: count }, (_, i) => client.put(`${prefix}${i}`).value("w")));
    await client.delete().prefix(prefix).exec();
    for (const [i, set] of sets.entries()) {
      if (i % 4 === 1) {
        assert.equal(set.anyQueued(() => true), false, `watch ${i} was cancelled`);
        continue;
      }
      const expected = i % 2 === 0 ? ["delete"] : ["put", "delete"];
      for (const type of expected) {
        const event = await nextWithin(set);
        assert.ok(event.type === type && event.type !== "cancelled", `watch ${i}: expected a ${type}, got ${event.type}`);
        assert.equal(event.kv.key, `${prefix}${i}`);
      }
      assert.equal(set.anyQueued(() => true), false, `watch ${i} got another key's event`);
      set.close();
    }
    await waitFor("every watch gone", 5_000, () => watchStreamOf(client).size === 0);
  });

  it("reports a watch from a compacted revision as cancelled, and keeps the set's other watches when asked to", async () => {
    const client = newClient();
    const port = etcd3Port(client);
    const key = `/watch-stream/${++runs}/compacted`;
    const first = await client.put(key).value("1");
    await client.put(key).value("2");
    const last = await client.put(key).value("3");
    await client.kv.compact({ revision: last.header.revision, physical: true });
    const set = port.watches<"old" | "new">(AbortSignal.timeout(10_000));
    set.add("new", { key }, Number(last.header.revision) + 1);
    set.add("old", { key, reportCancel: true }, Number(first.header.revision));
    const event = await nextWithin(set);
    assert.ok(event.type === "cancelled" && event.watch === "old", `got ${event.type}`);
    assert.ok(event.error instanceof WatchCancelledError);
    assert.match(event.error.message, /compacted/);
    await client.delete().key(key).exec();
    const deletion = await nextWithin(set);
    assert.ok(deletion.type === "delete" && deletion.watch === "new");
    set.close();
  });

  it("applies a namespace's prefix to what it watches and takes it off the keys it delivers", async () => {
    const client = newClient();
    const namespace = client.namespace(`/ns-${++runs}/`);
    const port = etcd3Port(namespace);
    const set = port.watches<"prefix" | "range">(AbortSignal.timeout(10_000));
    const { revision } = await port.range({ key: "a" }, "read", AbortSignal.timeout(5_000));
    set.add("prefix", { prefix: "jobs/" }, revision + 1);
    set.add("range", { range: { start: "jobs/b", end: "jobs/c" } }, revision + 1);
    await waitFor("watches confirmed", 5_000, () => set.created("prefix") && set.created("range"));
    await client.put("jobs/b").value("outside the namespace");
    await namespace.put("jobs/a").value("1");
    await namespace.put("jobs/b").value("2");
    await namespace.put("other").value("3");
    const seen: string[] = [];
    for (let i = 0; i < 3; i++) {
      const event = await nextWithin(set);
      assert.ok(event.type === "put");
      seen.push(`${event.watch}:${event.kv.key}=${event.kv.value}`);
    }
    assert.deepEqual(seen.sort(), ["prefix:jobs/a=1", "prefix:jobs/b=2", "range:jobs/b=2"]);
    assert.equal(set.anyQueued(() => true), false);
    set.close();
  });
});

describe("single-key reads sent together", () => {
  it("answers 300 reads made in one turn, each as its own Range would, all at one revision; in a namespace too", async () => {
    const client = newClient();
    const namespace = client.namespace(`/reads-${++runs}/`);
    for (const target of [client, namespace]) {
      const port = etcd3Port(target);
      const keys = Array.from({ length: 300 }, (_, i) => `k/${i}`);
      const written = await Promise.all(keys.map((key, i) => (i % 3 === 0 ? undefined : target.put(key).value(`v${i}`))));
      const answers = await Promise.all(keys.map((key) => port.range({ key }, "read", AbortSignal.timeout(10_000))));
      const revisions = new Set(answers.map((answer) => answer.revision));
      assert.ok(revisions.size <= 3, `300 reads in transactions of 128: at most 3 revisions, got ${revisions.size}`);
      answers.forEach((answer, i) => {
        if (i % 3 === 0) return assert.equal(answer.kvs.length, 0, `k/${i} was never written`);
        assert.equal(answer.kvs.length, 1);
        const kv = answer.kvs[0]!;
        assert.deepEqual([kv.key, kv.value, kv.createRevision], [keys[i], `v${i}`, Number(written[i]!.header.revision)]);
      });
    }
  });

  it("drops a read whose signal aborted before it was sent, and answers the others", async () => {
    const client = newClient();
    const port = etcd3Port(client);
    await client.put("/reads/abort").value("x");
    const controller = new AbortController();
    const dropped = port.range({ key: "/reads/abort" }, "read", controller.signal);
    const kept = port.range({ key: "/reads/abort" }, "read", AbortSignal.timeout(5_000));
    controller.abort(new Error("stopped"));
    await assert.rejects(dropped, /stopped/);
    assert.equal((await kept).kvs[0]?.value, "x");
  });
});
