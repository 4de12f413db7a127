// The facts of etcd's v2 API that the v2 recipe relies on, written against
// its port (src/stores/etcd-v2/port.ts), as one set of cases that two
// targets run: a real etcd 3.4 (--enable-v2) through node-etcd 7 and the
// port's adapter, and the simulated etcd v2 of test/sim/stores/etcd-v2.ts.
// A simulated store that differs from the real server on one of these fails
// here, so that what the simulation finds is about the real code on a
// faithful store. What a case does from outside the port (an operator's
// etcdctl, writes elsewhere in etcd, time going by) goes through the
// target's Operator.
import assert from "node:assert/strict";
import type { EtcdV2Port, Found, NotFound, StoreNode, WaitAnswer } from "../../../src/stores/etcd-v2/port";

/** A write or a delete as etcd answers it: its action, the node it left, and etcd's index. */
export interface Written {
  readonly action: string;
  readonly node: StoreNode;
  readonly etcdIndex: number;
}

/** What a case may do to the store from outside the port, as an operator would. */
export interface Operator {
  /**
   * PUT <key> (etcdctl set, update, mk): with prevExist, prevIndex (a
   * compareAndSwap), refresh=true (no value) and a TTL as given. Throws
   * etcd's refusal as an error with its `errorCode`.
   */
  put(key: string, value: string | undefined, options?: { ttl?: number; prevExist?: boolean; prevIndex?: number; refresh?: boolean }): Promise<Written>;
  /** DELETE <key> (etcdctl rm; rm -r with `recursive`; with prevIndex a compareAndDelete). Throws as put does. */
  remove(key: string, options?: { recursive?: boolean; prevIndex?: number }): Promise<Written>;
  /** Lets `ms` go by: real time on a real server, virtual time on the simulated one. */
  elapse(ms: number): Promise<void>;
}

export interface FactsTarget {
  readonly name: string;
  readonly port: EtcdV2Port;
  readonly operator: Operator;
}

export interface Fact {
  readonly title: string;
  run(target: FactsTarget, dir: string): Promise<void>;
}

/** Longer than any case: a wait here is answered or cut short by the case, never abandoned. */
const NEVER_ABANDONED_MS = 120_000;

const signal = () => AbortSignal.timeout(10_000);

/** A wait through the port, whose answer can be looked at without awaiting it, and stopped. */
class PendingWait {
  private readonly controller = new AbortController();
  answer: WaitAnswer | undefined;
  readonly answered: Promise<WaitAnswer>;

  constructor(port: EtcdV2Port, key: string, fromIndex: number, recursive = false) {
    this.answered = port.wait(key, fromIndex, recursive, this.controller.signal, NEVER_ABANDONED_MS).then((answer) => (this.answer = answer));
    this.answered.catch(() => undefined);
  }

  /** The answer, failing if none comes within `ms` (time going by as the target lets it). */
  async within(operator: Operator, ms: number, what: string): Promise<WaitAnswer> {
    for (let waited = 0; this.answer === undefined && waited < ms; waited += 20) await operator.elapse(20);
    if (this.answer === undefined) assert.fail(`${what}: no answer within ${ms} ms`);
    return this.answer;
  }

  stop(): void {
    this.controller.abort(new Error("case over"));
  }
}

/** The event of a wait's answer, failing on anything else. */
function eventOf(answer: WaitAnswer, what: string): { action: string; node: StoreNode } {
  assert.equal(answer.kind, "event", `${what}: ${JSON.stringify(answer)}`);
  return answer as { action: string; node: StoreNode };
}

/** Lets a wait sent just now reach etcd (a real one registers it on its own connection). */
const registered = (operator: Operator) => operator.elapse(100);

function found(answer: Found | NotFound, what: string): StoreNode {
  assert.ok(answer.node, `${what}: etcd holds no such key`);
  return answer.node;
}

async function refused(work: Promise<unknown>, code: number): Promise<void> {
  await assert.rejects(work, (err: { errorCode?: number }) => err.errorCode === code);
}

/** Enough writes elsewhere in etcd that its history forgets everything before them. */
async function writeElsewhere(operator: Operator, dir: string, writes: number): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: 16 }, async () => {
      while (next < writes) {
        const n = next++;
        await operator.put(`${dir}/noise/k${n % 50}`, String(n));
      }
    }),
  );
}

const inOrderKey = (dir: string, createdIndex: number) => `${dir}/${String(createdIndex).padStart(20, "0")}`;

export const V2_FACTS: readonly Fact[] = [
  {
    title: "POST <dir> with a ttl creates <dir>/<createdIndex, twenty digits>, answered with etcd's index; a sorted GET lists in creation order",
    async run({ port }, dir) {
      const election = `${dir}/election`;
      const created: StoreNode[] = [];
      for (const value of ["a", "b", "c", "d"]) {
        const { node, etcdIndex } = await port.createInOrder("create membership", election, value, 30, undefined);
        assert.ok(Number.isInteger(etcdIndex) && etcdIndex >= node.createdIndex, `etcd's index ${etcdIndex}`);
        assert.equal(node.createdIndex, node.modifiedIndex);
        assert.equal(node.key, inOrderKey(election, node.createdIndex));
        assert.equal(node.value, value);
        assert.equal(node.ttl, 30);
        created.push(node);
      }
      const listing = await port.get("list members", election, { sorted: true }, signal());
      const listed = found(listing, "the listing");
      assert.equal(listed.dir, true);
      assert.ok(listing.etcdIndex >= created.at(-1)!.createdIndex);
      assert.deepEqual(listed.nodes?.map((n) => [n.key, n.value, n.createdIndex]), created.map((n) => [n.key, n.value, n.createdIndex]));
      // Zero padding makes the order of keys the order of creation.
      const keys = created.map((n) => n.key);
      assert.deepEqual([...keys].sort(), keys);
      const missing = await port.get("list members", `${dir}/nobody`, { sorted: true }, signal());
      assert.equal(missing.node, undefined);
      assert.ok(missing.etcdIndex >= listing.etcdIndex, "a key etcd does not hold is answered with etcd's index too");
    },
  },
  {
    title: "a refresh (ttl, refresh=true, prevExist=true, no value) renews the TTL, keeps the value, moves modifiedIndex and etcd's index, and wakes neither a key wait nor a recursive one, nor a wait from before it",
    async run({ port, operator }, dir) {
      const election = `${dir}/election`;
      const created = await port.createInOrder("create membership", election, "me", 20, undefined);
      const key = created.node.key;
      const keyWait = new PendingWait(port, key, created.etcdIndex + 1);
      const dirWait = new PendingWait(port, election, created.etcdIndex + 1, true);
      await registered(operator);
      const refreshed = await port.setIfExists("refresh membership", key, null, 60, undefined);
      const node = found(refreshed, "the refresh");
      assert.equal(node.value, "me");
      assert.equal(node.ttl, 60);
      assert.equal(node.createdIndex, created.node.createdIndex);
      assert.ok(node.modifiedIndex > created.node.modifiedIndex, "modifiedIndex moves");
      assert.ok(refreshed.etcdIndex >= node.modifiedIndex, "etcd's index moves with it");
      const read = found(await port.get("read member", key, {}, signal()), "the key");
      assert.deepEqual([read.value, read.modifiedIndex], ["me", node.modifiedIndex]);
      // Waits sent after the refresh from indexes at or before it: no watch sees a refresh.
      const fromRefresh = new PendingWait(port, key, node.modifiedIndex);
      const dirFromCreate = new PendingWait(port, election, created.node.createdIndex + 1, true);
      // Control: a wait from the create answers the create, from the history.
      const fromCreate = new PendingWait(port, key, created.node.createdIndex);
      assert.equal(eventOf(await fromCreate.within(operator, 2_000, "a wait from the create"), "a wait from the create").action, "create");
      await operator.elapse(500);
      for (const [what, wait] of [["key", keyWait], ["recursive", dirWait], ["key from the refresh", fromRefresh], ["recursive from the create", dirFromCreate]] as const) {
        assert.equal(wait.answer, undefined, `the ${what} wait answered a refresh: ${JSON.stringify(wait.answer)}`);
      }
      // All four answer a later delete, with the delete.
      const deleted = await operator.remove(key);
      for (const [what, wait] of [["key", keyWait], ["recursive", dirWait], ["key from the refresh", fromRefresh], ["recursive from the create", dirFromCreate]] as const) {
        const event = eventOf(await wait.within(operator, 5_000, `the ${what} wait`), `the ${what} wait`);
        assert.deepEqual([event.action, event.node.key, event.node.modifiedIndex], ["delete", key, deleted.node.modifiedIndex], `the ${what} wait`);
      }
    },
  },
  {
    title: "a refresh takes a place in etcd's 1000-event history, though no wait sees it: 1001 refreshes make a wait from before them answer 401",
    async run({ port, operator }, dir) {
      const created = await port.createInOrder("create membership", `${dir}/election`, "me", 600, undefined);
      for (let i = 0; i < 1001; i++) await port.setIfExists("refresh membership", created.node.key, null, 600, undefined);
      const wait = new PendingWait(port, `${dir}/election`, created.etcdIndex + 1, true);
      const answer = await wait.within(operator, 2_000, "a wait from before the refreshes");
      assert.deepEqual(answer, { kind: "history-gone", historyStart: created.etcdIndex + 2 });
    },
  },
  {
    title: "a refresh or a write with prevExist of a key etcd does not hold is refused with 100, answered with etcd's index; a refresh with a value is refused with 211",
    async run({ port, operator }, dir) {
      const missing = `${dir}/00000000000000000001`;
      const refreshed = await port.setIfExists("refresh membership", missing, null, 30, undefined);
      assert.equal(refreshed.node, undefined);
      assert.ok(refreshed.etcdIndex > 0, "the refusal carries etcd's index");
      const announced = await port.setIfExists("announce leadership", missing, "me", 30, undefined);
      assert.equal(announced.node, undefined);
      const { node } = await port.createInOrder("create membership", dir, "v", 30, undefined);
      await refused(operator.put(node.key, "v", { ttl: 30, refresh: true, prevExist: true }), 211);
      assert.equal(await port.delete("delete membership", missing, undefined), false, "a delete of a key etcd does not hold");
      assert.equal(await port.delete("delete membership", node.key, undefined), true);
    },
  },
  {
    title: "a write of a value with prevExist reaches a key wait as an `update`, and 0.0.1's renewal (a write with prevIndex) reaches a key wait and a recursive one as a `compareAndSwap`, the createdIndex kept",
    async run({ port, operator }, dir) {
      const election = `${dir}/election`;
      const created = await port.createInOrder("create membership", election, "me", 30, undefined);
      const key = created.node.key;
      const announcement = new PendingWait(port, key, created.etcdIndex + 1);
      await registered(operator);
      const written = found(await port.setIfExists("announce leadership", key, "me", 30, undefined), "the announcement");
      const seen = eventOf(await announcement.within(operator, 5_000, "the announcement"), "the announcement");
      assert.deepEqual([seen.action, seen.node.value, seen.node.createdIndex, seen.node.modifiedIndex], ["update", "me", created.node.createdIndex, written.modifiedIndex]);
      const keyWait = new PendingWait(port, key, written.modifiedIndex + 1);
      const dirWait = new PendingWait(port, election, written.modifiedIndex + 1, true);
      await registered(operator);
      const renewed = await operator.put(key, "me", { ttl: 30, prevIndex: written.modifiedIndex });
      assert.equal(renewed.action, "compareAndSwap");
      for (const [what, wait] of [["key", keyWait], ["recursive", dirWait]] as const) {
        const event = eventOf(await wait.within(operator, 5_000, `the ${what} wait`), `the ${what} wait`);
        assert.deepEqual([event.action, event.node.key, event.node.value, event.node.createdIndex], ["compareAndSwap", key, "me", created.node.createdIndex], `the ${what} wait`);
      }
      // prevIndex is the modifiedIndex: a stale one is refused.
      await refused(operator.put(key, "me", { ttl: 30, prevIndex: written.modifiedIndex }), 101);
    },
  },
  {
    title: "deletes and expiries reach a key wait and a recursive one (`delete`, `expire`; an expiry's node has no value, and keeps its createdIndex)",
    async run({ port, operator }, dir) {
      const deleting = await port.createInOrder("create membership", `${dir}/del`, "x", 30, undefined);
      const waits = [new PendingWait(port, deleting.node.key, deleting.etcdIndex + 1), new PendingWait(port, `${dir}/del`, deleting.etcdIndex + 1, true)];
      await registered(operator);
      await operator.remove(deleting.node.key);
      for (const wait of waits) {
        const event = eventOf(await wait.within(operator, 2_000, "a wait on a deleted key"), "a wait on a deleted key");
        assert.deepEqual([event.action, event.node.key, event.node.value], ["delete", deleting.node.key, undefined]);
      }
      const expiring = await port.createInOrder("create membership", `${dir}/exp`, "y", 1, undefined);
      const expiryWaits = [new PendingWait(port, expiring.node.key, expiring.etcdIndex + 1), new PendingWait(port, `${dir}/exp`, expiring.etcdIndex + 1, true)];
      for (const wait of expiryWaits) {
        const event = eventOf(await wait.within(operator, 6_000, "a wait on an expiring key"), "a wait on an expiring key");
        assert.equal(event.action, "expire");
        assert.equal(event.node.key, expiring.node.key);
        assert.ok(!("value" in event.node), `an expired node has no value: ${JSON.stringify(event.node)}`);
        assert.equal(event.node.createdIndex, expiring.node.createdIndex);
        assert.ok(event.node.modifiedIndex > expiring.node.modifiedIndex);
      }
    },
  },
  {
    title: "etcd keeps the last 1000 events: a wait from an older index answers 401 with where the history starts; the oldest kept is 999 before the newest; waits already waiting still answer",
    async run({ port, operator }, dir) {
      const created = await port.createInOrder("create membership", `${dir}/election`, "me", 60, undefined);
      const keyWait = new PendingWait(port, created.node.key, created.etcdIndex + 1);
      const dirWait = new PendingWait(port, `${dir}/election`, created.etcdIndex + 1, true);
      await registered(operator);
      await writeElsewhere(operator, dir, 1_100);
      assert.equal(keyWait.answer, undefined, "a key wait woken by writes elsewhere");
      assert.equal(dirWait.answer, undefined, "a recursive wait woken by writes elsewhere");
      const now = (await port.get("read member", `${dir}/noise/k0`, {}, signal())).etcdIndex;
      assert.ok(now - created.etcdIndex > 1_000);
      const old = await new PendingWait(port, created.node.key, created.etcdIndex + 1).within(operator, 2_000, "a wait from before the writes");
      assert.equal(old.kind, "history-gone");
      const start = (old as { historyStart?: number }).historyStart;
      assert.ok(start !== undefined && start > created.etcdIndex + 1 && start <= now - 999, `history from ${start}, etcd at ${now}`);
      const tooOld = await new PendingWait(port, `${dir}/noise`, now - 1_000, true).within(operator, 2_000, "a wait from 1000 before");
      assert.equal(tooOld.kind, "history-gone");
      const oldest = eventOf(await new PendingWait(port, `${dir}/noise`, now - 999, true).within(operator, 2_000, "a wait from 999 before"), "the oldest kept");
      assert.deepEqual([oldest.action, oldest.node.modifiedIndex], ["set", now - 999]);
      const deleted = await operator.remove(created.node.key);
      for (const wait of [keyWait, dirWait]) {
        const event = eventOf(await wait.within(operator, 2_000, "a wait from before the writes"), "a wait from before the writes");
        assert.deepEqual([event.action, event.node.modifiedIndex], ["delete", deleted.node.modifiedIndex]);
      }
    },
  },
  {
    title: "a key with a TTL of 1 s is there until its TTL has passed and gone within a second after",
    async run({ port, operator }, dir) {
      const { node } = await port.createInOrder("create membership", dir, "v", 1, undefined);
      await operator.elapse(900);
      assert.ok((await port.get("read member", node.key, {}, signal())).node, "gone before its TTL");
      await operator.elapse(1_100);
      assert.equal((await port.get("read member", node.key, {}, signal())).node, undefined, "there a second after its TTL");
    },
  },
  {
    title: "a key past its TTL that etcd's sync has not removed yet is answered with a ttl of 0 or less, never as a key without a TTL",
    async run({ port, operator }, dir) {
      // Created 150 ms apart, they expire at different points of the sync's 500 ms.
      const keys: string[] = [];
      for (let i = 0; i < 3; i++) {
        keys.push((await port.createInOrder("create membership", dir, `k${i}`, 1, undefined)).node.key);
        await operator.elapse(150);
      }
      let pastItsTime = 0;
      for (let waited = 0; waited < 3_000; waited += 10) {
        const listing = await port.get("list members", dir, { sorted: true }, signal());
        const nodes = listing.node?.nodes ?? [];
        if (nodes.length === 0) break;
        for (const node of nodes) {
          assert.notEqual(node.ttl, undefined, `a key with a TTL listed without one: ${JSON.stringify(node)}`);
          if (node.ttl! <= 0) pastItsTime++;
        }
        await operator.elapse(10);
      }
      assert.equal((await port.get("list members", dir, { sorted: true }, signal())).node?.nodes, undefined, "the keys outlived their TTL by 3 s");
      assert.ok(pastItsTime > 0, "no key was seen past its TTL before the sync removed it");
    },
  },
  {
    title: "a DELETE with prevIndex is a `compareAndDelete` of the key at that modifiedIndex: a refresh moves it, and the createdIndex no longer matches",
    async run({ port, operator }, dir) {
      const a = (await port.createInOrder("create membership", dir, "a", 30, undefined)).node;
      await refused(operator.remove(a.key, { prevIndex: a.createdIndex + 1_000 }), 101);
      assert.equal((await operator.remove(a.key, { prevIndex: a.createdIndex })).action, "compareAndDelete");
      assert.equal((await port.get("read member", a.key, {}, signal())).node, undefined);
      const d = (await port.createInOrder("create membership", dir, "d", 30, undefined)).node;
      const refreshed = found(await port.setIfExists("refresh membership", d.key, null, 30, undefined), "the refresh");
      await refused(operator.remove(d.key, { prevIndex: d.createdIndex }), 101);
      assert.equal((await operator.remove(d.key, { prevIndex: refreshed.modifiedIndex })).action, "compareAndDelete");
    },
  },
  {
    title: "a recursive delete of the directory reaches a wait on a key under it and a recursive one, as the directory's `delete`, and a wait from before it replays it",
    async run({ port, operator }, dir) {
      const election = `${dir}/election`;
      const created = await port.createInOrder("create membership", election, "me", 30, undefined);
      const keyWait = new PendingWait(port, created.node.key, created.etcdIndex + 1);
      const dirWait = new PendingWait(port, election, created.etcdIndex + 1, true);
      await registered(operator);
      const deleted = await operator.remove(election, { recursive: true });
      assert.equal(deleted.action, "delete");
      const replayed = new PendingWait(port, created.node.key, created.etcdIndex + 1);
      for (const [what, wait] of [["key", keyWait], ["recursive", dirWait], ["key, from before it", replayed]] as const) {
        const event = eventOf(await wait.within(operator, 2_000, `the ${what} wait`), `the ${what} wait`);
        assert.deepEqual([event.action, event.node.key, event.node.dir, event.node.modifiedIndex], ["delete", election, true, deleted.node.modifiedIndex], `the ${what} wait`);
      }
      assert.equal((await port.get("list members", election, { sorted: true }, signal())).node, undefined);
    },
  },
  {
    title: "a set without prevExist writes a new node in a key's place: a new createdIndex, a `set` event and no removal; a refresh with prevExist then renews the new node",
    async run({ port, operator }, dir) {
      const created = await port.createInOrder("create membership", dir, "me", 30, undefined);
      const wait = new PendingWait(port, created.node.key, created.etcdIndex + 1);
      await registered(operator);
      const replaced = await operator.put(created.node.key, "someone else", { ttl: 30 });
      assert.equal(replaced.action, "set");
      const event = eventOf(await wait.within(operator, 2_000, "the key wait"), "the key wait");
      assert.deepEqual([event.action, event.node.createdIndex, event.node.value], ["set", replaced.node.createdIndex, "someone else"]);
      assert.ok(replaced.node.createdIndex > created.node.createdIndex);
      const refreshed = found(await port.setIfExists("refresh membership", created.node.key, null, 30, undefined), "the refresh");
      assert.deepEqual([refreshed.createdIndex, refreshed.value], [replaced.node.createdIndex, "someone else"]);
    },
  },
];
