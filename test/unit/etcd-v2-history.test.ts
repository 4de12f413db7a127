// How the v2 recipe reads etcd's event history (src/stores/etcd-v2/history.ts),
// through a port double: a long poll asked again from the same index when it
// goes unanswered (a silent connection), and a point read where etcd has
// forgotten the history a watch needs.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { EventHistory } from "../../src/stores/etcd-v2/history";
import { event, node, PortDouble, settle } from "./etcd-v2-port-double";

const KEY = "/election/00000000000000000042";
const REARM_MS = 30_000;

function reading() {
  const port = new PortDouble();
  return { port, history: new EventHistory(port, REARM_MS) };
}

describe("the etcd v2 event history, as the recipe reads it", () => {
  it("asks a wait that went unanswered again, from the same index, with the same bound", async () => {
    const { port, history } = reading();
    const signal = new AbortController().signal;
    const next = history.nextEvent("/election", 43, true, signal);
    port.waitOn("/election", true).answer({ kind: "unanswered" });
    await settle();
    const again = port.waitOn("/election", true);
    assert.equal(again.fromIndex, 43, "etcd replays from there whatever the lost poll missed");
    again.answer(event("create", node(KEY, 50)));
    assert.deepEqual(await next, event("create", node(KEY, 50)));
    assert.equal(port.calls.length, 2);
  });

  it("reads a watched key whose history etcd forgot: gone, it was removed by the read's index", async () => {
    const { port, history } = reading();
    const change = history.nextChange(KEY, 43, new AbortController().signal);
    port.waitOn(KEY).answer({ kind: "history-gone", historyStart: 1200 });
    await settle();
    const [read] = port.pending("get");
    assert.equal(read?.key, KEY);
    read!.answer({ node: undefined, etcdIndex: 2300 });
    assert.deepEqual(await change, { removedAt: 2300 });
  });

  it("reads a watched key whose history etcd forgot: still there, it is watched on from the read, or reported as reread", async () => {
    const { port, history } = reading();
    const signal = new AbortController().signal;
    const change = history.nextChange(KEY, 43, signal);
    port.waitOn(KEY).answer({ kind: "history-gone", historyStart: 1200 });
    await settle();
    port.pending("get")[0]!.answer({ node: node(KEY, 42, 42, "me"), etcdIndex: 2300 });
    await settle();
    const watch = port.waitOn(KEY);
    assert.equal(watch.fromIndex, 2301);
    watch.answer(event("update", node(KEY, 42, 2400, "me")));
    assert.deepEqual(await change, event("update", node(KEY, 42, 2400, "me")));

    const reported = history.nextChange(KEY, 43, signal, true);
    await settle();
    port.pending("get")[0]!.answer({ node: node(KEY, 42, 42, "me"), etcdIndex: 2500 });
    assert.deepEqual(await reported, { rereadAt: 2500, value: "me" });
  });

  it("once a 401 named where etcd's history starts, reads a key last seen before it at once, without the watch etcd would refuse", async () => {
    const { port, history } = reading();
    const signal = new AbortController().signal;
    const first = history.nextChange(KEY, 43, signal);
    port.waitOn(KEY).answer({ kind: "history-gone", historyStart: 1200 });
    await settle();
    port.pending("get")[0]!.answer({ node: undefined, etcdIndex: 2300 });
    await first;
    assert.equal(history.forgot(1199), true);
    assert.equal(history.forgot(1200), false);
    const waitsBefore = port.calls.filter((c) => c.method === "wait").length;
    const second = history.nextChange(`${KEY}9`, 1000, signal);
    await settle();
    assert.equal(port.calls.filter((c) => c.method === "wait").length, waitsBefore, "no watch from before the history's start");
    port.pending("get")[0]!.answer({ node: undefined, etcdIndex: 2400 });
    assert.deepEqual(await second, { removedAt: 2400 });
  });

  it("takes a 401 that does not say where the history starts as starting past the index asked for", async () => {
    const { port, history } = reading();
    const answer = history.nextEvent("/election", 43, true, new AbortController().signal);
    port.waitOn("/election", true).answer({ kind: "history-gone", historyStart: undefined });
    assert.deepEqual(await answer, { kind: "history-gone", historyStart: undefined });
    assert.equal(history.forgot(43), true);
    assert.equal(history.forgot(44), false);
  });
});
