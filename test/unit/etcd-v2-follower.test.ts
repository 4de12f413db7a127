// A v2 member's wait for its turn (src/stores/etcd-v2/follower.ts), driven
// through a port double: which member it watches, from which index, what each
// answer makes of the line and of the leader it names, and when its turn
// comes, proven or to be read.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { Leader } from "../../src/contract/backend";
import { MembershipLostError } from "../../src/contract/errors";
import { TurnQueue } from "../../src/util/turns";
import { Follower, type Turn } from "../../src/stores/etcd-v2/follower";
import { EventHistory } from "../../src/stores/etcd-v2/history";
import { OlderMembers } from "../../src/stores/etcd-v2/line";
import { MembershipState } from "../../src/stores/etcd-v2/membership-state";
import { event, node, PortDouble, settle } from "./etcd-v2-port-double";

const DIR = "/election";
const key = (createdIndex: number) => `${DIR}/${String(createdIndex).padStart(20, "0")}`;
const LISTED_AT = 100;

/**
 * A member created at `ours` waiting behind the members created at `older`
 * (oldest first; m<index> by name), as its listing at LISTED_AT showed them.
 * Its turn queue moves only when the test lets one through.
 */
function waiting(older: number[], ours: number, permanent: number[] = []) {
  const port = new PortDouble();
  const queued: Array<() => void> = [];
  const turns = new TurnQueue((callback) => queued.push(callback));
  const members = older.map((createdIndex) => ({ key: key(createdIndex), name: `m${createdIndex}`, createdIndex, permanent: permanent.includes(createdIndex) }));
  const state = new MembershipState(LISTED_AT);
  const leaders: Array<Leader | undefined> = [];
  const controller = new AbortController();
  const follower = new Follower(
    { id: key(ours), token: ours },
    state,
    new OlderMembers(DIR, members, LISTED_AT),
    (leader) => leaders.push(leader),
    new EventHistory(port, 30_000),
    DIR,
    turns,
    controller.signal,
  );
  let outcome: { turn: Turn } | { error: unknown } | undefined;
  follower.wait().then(
    (turn) => (outcome = { turn }),
    (error: unknown) => (outcome = { error }),
  );
  return {
    port,
    state,
    follower,
    leaders,
    controller,
    outcome: () => outcome,
    /** Lets the next queued piece of work through its turn, and what it sets off run. */
    async letOneTurnThrough() {
      assert.ok(queued.length > 0, "nothing waits for its turn");
      queued.shift()!();
      await settle();
    },
    queuedTurns: () => queued.length,
  };
}

describe("an etcd v2 follower", () => {
  it("watches the heir from the listing's index, on a later turn, and moves to the member behind it when the heir goes", async () => {
    const w = waiting([10, 11, 12], 13);
    await settle();
    assert.equal(w.port.pending("wait").length, 0, "the first watch waits its turn");
    await w.letOneTurnThrough();
    const onHeir = w.port.waitOn(key(11));
    assert.equal(onHeir.fromIndex, LISTED_AT + 1);
    onHeir.answer(event("delete", node(key(11), 11, 120)));
    await settle();
    assert.equal(w.port.pending("wait").length, 0, "the next watch waits its turn");
    await w.letOneTurnThrough();
    // m12 was seen alive by the listing: its removal since would be replayed.
    assert.equal(w.port.waitOn(key(12)).fromIndex, LISTED_AT + 1);
    assert.equal(w.leaders.length, 0, "a heir that goes changes no leader");
    assert.equal(w.outcome(), undefined);
  });

  it("names the heir the leader on its announcement, and then watches the member behind it", async () => {
    const w = waiting([10, 11, 12], 13);
    await w.letOneTurnThrough();
    w.port.waitOn(key(11)).answer(event("update", node(key(11), 11, 130, "heir")));
    await settle();
    assert.deepEqual(w.leaders, [{ name: "heir", token: 11 }]);
    await w.letOneTurnThrough();
    // Ours is next after m12 now: it watches the leader, m12, from where the listing saw it.
    w.port.waitOn(key(12)).answer(event("update", node(key(12), 12, 140, "third")));
    await settle();
    assert.deepEqual(w.leaders.at(-1), { name: "third", token: 12 });
    assert.equal(w.queuedTurns(), 0, "the member next in line watches the leader at once, not on a later turn");
    assert.equal(w.port.waitOn(key(12)).fromIndex, 141, "the leader is watched from its announcement on");
  });

  it("as the member next in line, takes its turn when the leader goes, and asks for a read when nothing proved its key outlived it", async () => {
    const w = waiting([10], 11);
    await settle();
    const onLeader = w.port.waitOn(key(10));
    assert.equal(onLeader.fromIndex, LISTED_AT + 1);
    // The listing showed it next: its witness watches the directory from there.
    const witness = w.port.waitOn(DIR, true);
    assert.equal(witness.fromIndex, LISTED_AT + 1);
    witness.answer({ kind: "history-gone", historyStart: 500 });
    await settle();
    assert.equal(w.outcome(), undefined, "a witness that gives up is no turn");
    onLeader.answer(event("expire", node(key(10), 10, 150)));
    await settle();
    assert.deepEqual(w.outcome(), { turn: { turnAt: 150, proven: false } });
  });

  it("as the member next in line, names the leader by what it writes and watches it on from that write", async () => {
    const w = waiting([10], 11);
    await settle();
    // A 0.0.1 leader renews by writing its value; the name may be a new one.
    w.port.waitOn(key(10)).answer(event("compareAndSwap", node(key(10), 10, 120, "renamed")));
    await settle();
    assert.deepEqual(w.leaders, [{ name: "renamed", token: 10 }]);
    assert.equal(w.port.waitOn(key(10)).fromIndex, 121);
    assert.equal(w.outcome(), undefined);
  });

  it("takes its turn as proven when its witness sees the leader go before any removal of its own key", async () => {
    const w = waiting([10], 11);
    await settle();
    const onLeader = w.port.waitOn(key(10));
    const witness = w.port.waitOn(DIR, true);
    // Another member's key written, then the leader's removal, as the directory's events come.
    witness.answer(event("set", node(`${DIR}/other`, 140, 140, "x")));
    await settle();
    const next = w.port.waitOn(DIR, true);
    assert.equal(next.fromIndex, 141, "the witness goes on from just after the event it saw");
    next.answer(event("delete", node(key(10), 10, 150)));
    await settle();
    assert.deepEqual(w.outcome(), { turn: { turnAt: 150, proven: true } });
    assert.equal(onLeader.signal?.aborted, true, "the watch on the leader ends with the wait");
  });

  it("waits for the witness when the leader's removal comes first, and fails when its own key went before it", async () => {
    const w = waiting([10], 11);
    await settle();
    w.port.waitOn(key(10)).answer(event("delete", node(key(10), 10, 150)));
    await settle();
    assert.equal(w.outcome(), undefined, "the witness watches from before the removal: it has the last word");
    w.port.waitOn(DIR, true).answer(event("delete", node(DIR, 5, 149)));
    await settle();
    const outcome = w.outcome();
    assert.ok(outcome && "error" in outcome && outcome.error instanceof MembershipLostError, `outcome: ${String(outcome)}`);
  });

  it("arms its witness at a renewal once it has become next in line, from the index the renewal saw", async () => {
    const w = waiting([10, 11], 12);
    await w.letOneTurnThrough();
    w.port.waitOn(key(11)).answer(event("delete", node(key(11), 11, 120)));
    await settle();
    assert.equal(w.port.pending("wait").length, 1, "ours is next in line now: it watches the leader");
    assert.equal(w.port.waitOn(key(10)).fromIndex, LISTED_AT + 1);
    w.state.aliveAt(130);
    w.follower.ownKeyRenewed();
    assert.equal(w.port.waitOn(DIR, true).fromIndex, 131);
    w.follower.ownKeyRenewed();
    assert.equal(w.port.pending("wait").length, 2, "one witness at a time");
    // A renewal after the removal proves our key outlived it without the witness.
    w.state.aliveAt(160);
    w.port.waitOn(key(10)).answer(event("delete", node(key(10), 10, 150)));
    await settle();
    assert.deepEqual(w.outcome(), { turn: { turnAt: 150, proven: true } });
  });

  it("names a 0.0.1 heir from memory when the leader goes: such a heir renews by writing and never announces", async () => {
    const w = waiting([10, 11, 12], 13);
    await w.letOneTurnThrough();
    w.port.waitOn(key(11)).answer(event("compareAndSwap", node(key(11), 11, 120, "old-style")));
    await settle();
    assert.deepEqual(w.leaders, [], "a renewal is no leadership");
    await w.letOneTurnThrough();
    const onLeader = w.port.waitOn(key(10));
    assert.equal(onLeader.fromIndex, LISTED_AT + 1, "the leader, from where it was last seen");
    onLeader.answer(event("delete", node(key(10), 10, 150)));
    await settle();
    assert.deepEqual(w.leaders, [{ name: "old-style", token: 11 }]);
    await w.letOneTurnThrough();
    assert.equal(w.port.waitOn(key(12)).fromIndex, LISTED_AT + 1);
  });

  it("watches the leader, not a heir written by hand without a TTL, which never writes again", async () => {
    const w = waiting([10, 11, 12], 13, [11]);
    await w.letOneTurnThrough();
    w.port.waitOn(key(10)).answer(event("delete", node(key(10), 10, 150)));
    await settle();
    assert.deepEqual(w.leaders, [{ name: "m11", token: 11 }]);
  });

  it("where etcd forgot the heir's history and a read finds it, watches it again from where the leader was last seen", async () => {
    const w = waiting([10, 11, 12], 13);
    await w.letOneTurnThrough();
    w.port.waitOn(key(11)).answer({ kind: "history-gone", historyStart: 90 });
    await settle();
    const read = w.port.pending("get");
    assert.equal(read.length, 1);
    assert.equal(read[0]!.key, key(11));
    read[0]!.answer({ node: node(key(11), 11, 11, "heir"), etcdIndex: 300 });
    await settle();
    // etcd still holds the history from where the listing saw the leader (90 < 101):
    // a watch from there replays an announcement made since.
    assert.equal(w.port.waitOn(key(11)).fromIndex, LISTED_AT + 1);
    assert.deepEqual(w.leaders, []);
  });

  it("where etcd forgot the heir's history and the leader's too, names the heir once a read finds the leader gone", async () => {
    const w = waiting([10, 11, 12], 13);
    await w.letOneTurnThrough();
    w.port.waitOn(key(11)).answer({ kind: "history-gone", historyStart: 200 });
    await settle();
    w.port.pending("get")[0]!.answer({ node: node(key(11), 11, 11, "heir"), etcdIndex: 300 });
    await settle();
    const leaderRead = w.port.pending("get");
    assert.equal(leaderRead[0]?.key, key(10), "the leader is read: a watch from where it was last seen would be refused");
    leaderRead[0]!.answer({ node: undefined, etcdIndex: 301 });
    await settle();
    assert.deepEqual(w.leaders, [{ name: "heir", token: 11 }]);
  });

  it("leaves no watch behind when its signal aborts", async () => {
    const w = waiting([10], 11);
    await settle();
    const watches = w.port.pending("wait");
    assert.equal(watches.length, 2);
    w.controller.abort(new Error("stopped"));
    await settle();
    assert.ok(watches.every((c) => c.signal?.aborted));
    const outcome = w.outcome();
    assert.ok(outcome && "error" in outcome, "the wait rejects");
  });
});
