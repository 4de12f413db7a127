// How the v2 recipe reads etcd's event history (src/stores/etcd-v2/history.ts),
// on the simulated etcd v2 (test/sim/stores/etcd-v2.ts) as the port, on a
// hand-driven clock: a long poll asked again from the same index when it goes
// unanswered, a point read where etcd has forgotten the history a watch needs,
// and a bound on that read.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { EventHistory } from "../../src/stores/etcd-v2/history";
import { UnansweredError } from "../../src/stores/etcd-v2/node-etcd/client";
import type { EtcdV2Port, WaitAnswer } from "../../src/stores/etcd-v2/port";
import { FakeClock, settle } from "../kit/fake-clock";
import { EtcdV2Store, HISTORY_CAPACITY } from "../sim/stores/etcd-v2";

const DIR = "/election";
const REARM_MS = 30_000;
const READ_BOUND_MS = 10_000;

function reading() {
  const clock = new FakeClock();
  const store = new EtcdV2Store(clock);
  return { clock, store, history: new EventHistory(store, REARM_MS, READ_BOUND_MS) };
}

/** Writes elsewhere in etcd until the history has forgotten every index up to now. */
function pushHistoryPast(store: EtcdV2Store): void {
  for (let i = 0; i <= HISTORY_CAPACITY; i++) store.put(`/elsewhere/k${i % 10}`, String(i));
}

const waits = (store: EtcdV2Store) => store.requests.filter((r) => r.method === "wait");

describe("the etcd v2 event history, as the recipe reads it", () => {
  it("asks a wait that went unanswered again, from the same index, with the same bound", async () => {
    const { clock, store, history } = reading();
    const from = store.index + 1;
    const next = history.nextEvent(DIR, from, true, new AbortController().signal);
    await settle();
    assert.deepEqual(store.pendingWaits, [{ key: DIR, fromIndex: from, recursive: true }]);
    await clock.advance(REARM_MS);
    assert.deepEqual(store.pendingWaits, [{ key: DIR, fromIndex: from, recursive: true }], "asked again, from the same index: etcd replays from there whatever the lost poll missed");
    assert.equal(waits(store).length, 2);
    const { node } = store.createInOrderNow(DIR, "m", 10);
    assert.deepEqual(await next, { kind: "event", action: "create", node });
  });

  it("reads a watched key whose history etcd forgot: gone, it was removed by the read's index", async () => {
    const { store, history } = reading();
    const { node } = store.createInOrderNow(DIR, "m", 10);
    store.deleteNow(node.key);
    pushHistoryPast(store);
    const change = await history.nextChange(node.key, node.createdIndex, node.createdIndex + 1, new AbortController().signal);
    assert.deepEqual(change, { removedAt: store.index, foundByRead: true });
    assert.deepEqual(
      store.requests.map((r) => [r.method, r.key]),
      [["wait", node.key], ["get", node.key]],
    );
  });

  it("reads a watched key whose history etcd forgot: still there, it is watched on from the read, or reported as reread", async () => {
    const { store, history } = reading();
    const signal = new AbortController().signal;
    const { node } = store.createInOrderNow(DIR, "me", 10);
    pushHistoryPast(store);
    const readAt = store.index;
    const change = history.nextChange(node.key, node.createdIndex, node.createdIndex + 1, signal);
    await settle();
    assert.deepEqual(store.pendingWaits, [{ key: node.key, fromIndex: readAt + 1, recursive: false }]);
    const written = store.put(node.key, "me", { ttl: 10, prevExist: true });
    assert.deepEqual(await change, { kind: "event", action: "update", node: written.node });

    const reported = await history.nextChange(node.key, node.createdIndex, node.createdIndex + 1, signal, true);
    assert.deepEqual(reported, { rereadAt: store.index, value: "me" });
  });

  it("once a 401 named where etcd's history starts, reads a key last seen before it at once, without the watch etcd would refuse", async () => {
    const { store, history } = reading();
    const signal = new AbortController().signal;
    const first = store.createInOrderNow(DIR, "a", 10).node;
    const second = store.createInOrderNow(DIR, "b", 10).node;
    store.deleteNow(first.key);
    store.deleteNow(second.key);
    pushHistoryPast(store);
    await history.nextChange(first.key, first.createdIndex, first.createdIndex + 1, signal);
    const start = store.historyStart;
    assert.equal(history.forgot(start - 1), true);
    assert.equal(history.forgot(start), false);
    const waitsBefore = waits(store).length;
    const change = await history.nextChange(second.key, second.createdIndex, second.createdIndex + 1, signal);
    assert.equal(waits(store).length, waitsBefore, "no watch from before the history's start");
    assert.deepEqual(change, { removedAt: store.index, foundByRead: true });
  });

  it("takes a 401 that does not say where the history starts as starting past the index asked for", async () => {
    const { store } = reading();
    store.put("/elsewhere/k", "1");
    // As a client that does not pass etcd's cause on answers it.
    const port: EtcdV2Port = Object.create(store);
    port.wait = async (...args): Promise<WaitAnswer> => {
      const answer = await store.wait(...args);
      return answer.kind === "history-gone" ? { kind: "history-gone", historyStart: undefined } : answer;
    };
    const history = new EventHistory(port, REARM_MS, READ_BOUND_MS);
    const answer = await history.nextEvent(DIR, 1, true, new AbortController().signal);
    assert.deepEqual(answer, { kind: "history-gone", historyStart: undefined });
    assert.equal(history.forgot(1), true);
    assert.equal(history.forgot(2), false);
  });

  it("gives up a point read that etcd does not answer within its bound", async () => {
    const { clock, store, history } = reading();
    const { node } = store.createInOrderNow(DIR, "m", 10);
    store.holdAnswers();
    const seen: { outcome?: unknown } = {};
    history.read(node.key, new AbortController().signal).then(
      (answer) => (seen.outcome = answer),
      (err: unknown) => (seen.outcome = err),
    );
    await clock.advance(READ_BOUND_MS - 1);
    assert.equal(seen.outcome === undefined, true, "given up before its bound");
    await clock.advance(1);
    assert.ok(seen.outcome instanceof UnansweredError, `the read gave ${String(seen.outcome)}`);
  });

  it("takes a node written in the key's place (a set without prevExist, which makes no removal event) for the key's removal", async () => {
    const { store, history } = reading();
    const signal = new AbortController().signal;
    const { node } = store.createInOrderNow(DIR, "me", 10);
    const change = history.nextChange(node.key, node.createdIndex, node.createdIndex + 1, signal);
    await settle();
    const replaced = store.put(node.key, "someone else");
    assert.deepEqual(await change, { removedAt: replaced.node.modifiedIndex });

    // And where a read stands in for the history.
    pushHistoryPast(store);
    assert.deepEqual(await history.nextChange(node.key, node.createdIndex, node.createdIndex + 1, signal), { removedAt: store.index, foundByRead: true });
  });
});
