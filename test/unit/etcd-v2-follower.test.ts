// A v2 member's wait for its turn (src/stores/etcd-v2/follower.ts), on the
// simulated etcd v2 (test/sim/stores/etcd-v2.ts) as the port: which member it
// watches, from which index, what each change in etcd makes of the line and
// of the leader it names, and when its turn comes, proven or to be read.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { Leader } from "../../src/contract/backend";
import { MembershipLostError } from "../../src/contract/errors";
import { TurnQueue } from "../../src/util/turns";
import { Follower, type Turn } from "../../src/stores/etcd-v2/follower";
import { EventHistory } from "../../src/stores/etcd-v2/history";
import { OlderMembers } from "../../src/stores/etcd-v2/line";
import { MembershipState } from "../../src/stores/etcd-v2/membership-state";
import type { StoreNode } from "../../src/stores/etcd-v2/port";
import { FakeClock, settle } from "../kit/fake-clock";
import { EtcdV2Store, HISTORY_CAPACITY } from "../sim/stores/etcd-v2";

const DIR = "/election";
const TTL = 10;

/**
 * A member waiting behind `olderCount` members (m1 the oldest; those at
 * the positions in `permanent` written without a TTL, as by hand), as its
 * listing showed them. Its turn queue moves only when the test lets one
 * through. `beforeWait` acts on the store between the listing and the wait.
 */
function waiting(olderCount: number, options: { permanent?: number[]; beforeWait?: (store: EtcdV2Store) => void } = {}) {
  const clock = new FakeClock();
  const store = new EtcdV2Store(clock);
  const older: Array<StoreNode & { name: string }> = [];
  for (let i = 0; i < olderCount; i++) {
    const name = `m${i + 1}`;
    const { node } = store.createInOrderNow(DIR, name, options.permanent?.includes(i) ? undefined : TTL);
    older.push({ ...node, name });
  }
  const ours = store.createInOrderNow(DIR, "me", TTL).node;
  const listedAt = store.index;
  options.beforeWait?.(store);
  const queued: Array<() => void> = [];
  const turns = new TurnQueue((callback) => queued.push(callback));
  const members = older.map((m) => ({ key: m.key, name: m.name, createdIndex: m.createdIndex, permanent: m.ttl === undefined }));
  const state = new MembershipState(listedAt);
  const leaders: Array<Leader | undefined> = [];
  const controller = new AbortController();
  const follower = new Follower(
    { id: ours.key, token: ours.createdIndex },
    state,
    new OlderMembers(DIR, members, listedAt),
    (leader) => leaders.push(leader),
    new EventHistory(store, 30_000, TTL * 1000),
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
    clock,
    store,
    older,
    ours,
    listedAt,
    state,
    follower,
    leaders,
    controller,
    outcome: () => outcome,
    /** The waits it holds, as [key, from index, recursive]. */
    waits: () => store.pendingWaits.map((w) => [w.key, w.fromIndex, w.recursive]),
    /** Lets the next queued piece of work through its turn, and what it sets off run. */
    async letOneTurnThrough() {
      assert.ok(queued.length > 0, "nothing waits for its turn");
      queued.shift()!();
      await settle();
    },
    queuedTurns: () => queued.length,
  };
}

/** Writes elsewhere in etcd until the history has forgotten every index up to now. */
function pushHistoryPast(store: EtcdV2Store): void {
  for (let i = 0; i <= HISTORY_CAPACITY; i++) store.put(`/elsewhere/k${i % 10}`, String(i));
}

/** The member's announcement that it leads: a write of its value with prevExist (an `update`). */
const announce = (store: EtcdV2Store, key: string, name: string) => store.put(key, name, { ttl: TTL, prevExist: true }).node;

describe("an etcd v2 follower", () => {
  it("watches the heir from the listing's index, on a later turn, and moves to the member behind it when the heir goes", async () => {
    const w = waiting(3);
    const [, heir, third] = w.older;
    await settle();
    assert.deepEqual(w.waits(), [], "the first watch waits its turn");
    await w.letOneTurnThrough();
    assert.deepEqual(w.waits(), [[heir!.key, w.listedAt + 1, false]]);
    w.store.deleteNow(heir!.key);
    await settle();
    assert.deepEqual(w.waits(), [], "the next watch waits its turn");
    await w.letOneTurnThrough();
    // m3 was seen alive by the listing: its removal since would be replayed.
    assert.deepEqual(w.waits(), [[third!.key, w.listedAt + 1, false]]);
    assert.deepEqual(w.leaders, [], "a heir that goes changes no leader");
    assert.equal(w.outcome(), undefined);
  });

  it("names the heir the leader on its announcement, and then watches the member behind it", async () => {
    const w = waiting(3);
    const [, heir, third] = w.older;
    await w.letOneTurnThrough();
    announce(w.store, heir!.key, "heir");
    await settle();
    assert.deepEqual(w.leaders, [{ name: "heir", token: heir!.createdIndex }]);
    await w.letOneTurnThrough();
    // Ours is next after m3 now: it watches the leader, m3, once m3 announces.
    const announced = announce(w.store, third!.key, "third");
    await settle();
    assert.deepEqual(w.leaders.at(-1), { name: "third", token: third!.createdIndex });
    assert.equal(w.queuedTurns(), 0, "the member next in line watches the leader at once, not on a later turn");
    assert.deepEqual(w.waits(), [[third!.key, announced.modifiedIndex + 1, false]], "the leader is watched from its announcement on");
  });

  it("as the member next in line, takes its turn when the leader goes, and asks for a read when nothing proved its key outlived it", async () => {
    // etcd has forgotten the history since the listing: the witness gives up, and the leader is read.
    const w = waiting(1, {
      beforeWait: (store) => {
        // Ours stays; the leader is left to expire.
        store.setIfExistsNow(store.keysUnder(DIR).at(-1)!, null, 60);
        pushHistoryPast(store);
      },
    });
    const [leader] = w.older;
    const readAt = w.store.index;
    await settle();
    const requests = w.store.requests.map((r) => [r.method, r.key, r.fromIndex, r.recursive]);
    assert.deepEqual(requests, [
      ["wait", leader!.key, w.listedAt + 1, false],
      ["wait", DIR, w.listedAt + 1, true],
      ["get", leader!.key, undefined, undefined],
      ["wait", leader!.key, readAt + 1, false],
    ], "the leader watched, and the witness from the listing: both refused; the leader read, and watched from the read");
    assert.equal(w.outcome(), undefined, "a witness that gives up is no turn");
    await w.clock.advance(TTL * 1000 + 500);
    assert.deepEqual(w.outcome(), { turn: { turnAt: w.store.index, proven: false } }, "the leader's expiry, the last event");
  });

  it("as the member next in line, names the leader by what it writes and watches it on from that write", async () => {
    const w = waiting(1);
    const [leader] = w.older;
    await settle();
    // A 0.0.1 leader renews by writing its value (a compareAndSwap); the name may be a new one.
    const written = w.store.put(leader!.key, "renamed", { ttl: TTL, prevIndex: leader!.modifiedIndex }).node;
    await settle();
    assert.deepEqual(w.leaders, [{ name: "renamed", token: leader!.createdIndex }]);
    assert.deepEqual(w.waits().find(([key]) => key === leader!.key), [leader!.key, written.modifiedIndex + 1, false]);
    assert.equal(w.outcome(), undefined);
  });

  it("takes its turn as proven when its witness sees the leader go before any removal of its own key", async () => {
    const w = waiting(1);
    const [leader] = w.older;
    await settle();
    assert.deepEqual(w.waits(), [[leader!.key, w.listedAt + 1, false], [DIR, w.listedAt + 1, true]]);
    // Another key in the directory written, then the leader's removal, as the directory's events come.
    const other = w.store.put(`${DIR}/other`, "x").node;
    await settle();
    assert.deepEqual(w.waits().find(([key]) => key === DIR), [DIR, other.modifiedIndex + 1, true], "the witness goes on from just after the event it saw");
    const removed = w.store.deleteNow(leader!.key).node;
    await settle();
    assert.deepEqual(w.outcome(), { turn: { turnAt: removed.modifiedIndex, proven: true } });
    assert.deepEqual(w.waits(), [], "the watches end with the wait");
    assert.equal(w.store.requests.filter((r) => r.method === "get").length, 0, "no read");
  });

  it("waits for the witness when the leader's removal comes first, and fails when its own key went with it (the directory deleted)", async () => {
    const w = waiting(1);
    await settle();
    // etcd tells the watchers of each removed key first, then those of the directory.
    w.store.deleteNow(DIR, { recursive: true });
    await settle();
    const outcome = w.outcome();
    assert.ok(outcome && "error" in outcome && outcome.error instanceof MembershipLostError, `outcome: ${JSON.stringify(outcome)}`);
  });

  it("arms its witness at a renewal once it has become next in line, from the index the renewal saw", async () => {
    const w = waiting(2);
    const [leader, heir] = w.older;
    await w.letOneTurnThrough();
    w.store.deleteNow(heir!.key);
    await settle();
    assert.deepEqual(w.waits(), [[leader!.key, w.listedAt + 1, false]], "ours is next in line now: it watches the leader");
    const renewed = w.store.setIfExistsNow(w.ours.key, null, TTL) as { etcdIndex: number };
    w.state.aliveAt(renewed.etcdIndex);
    w.follower.ownKeyRenewed();
    assert.deepEqual(w.waits().at(-1), [DIR, renewed.etcdIndex + 1, true]);
    w.follower.ownKeyRenewed();
    assert.equal(w.waits().length, 2, "one witness at a time");
    // A renewal after the removal proves our key outlived it without the witness.
    const release = w.store.holdAnswers();
    const removed = w.store.deleteNow(leader!.key).node;
    w.state.aliveAt((w.store.setIfExistsNow(w.ours.key, null, TTL) as { etcdIndex: number }).etcdIndex);
    release();
    await settle();
    assert.deepEqual(w.outcome(), { turn: { turnAt: removed.modifiedIndex, proven: true } });
  });

  it("does not wait for a witness a renewal armed after the leader went, which would never see it go: a read proves the turn", async () => {
    const w = waiting(2);
    const [leader, heir] = w.older;
    await w.letOneTurnThrough();
    // The leader goes, unseen: ours watches the heir.
    w.store.deleteNow(leader!.key);
    // A renewal of ours, then the heir's removal: both answers held back.
    let release = w.store.holdAnswers();
    const renewing = w.store.setIfExists("refresh membership", w.ours.key, null, TTL, undefined);
    const heirRemoved = w.store.deleteNow(heir!.key).node;
    release();
    // The watch on the leader it sends next is answered at once (a replay): held back too.
    release = w.store.holdAnswers();
    const { etcdIndex } = await renewing;
    w.state.aliveAt(etcdIndex);
    await settle();
    // Ours is next in line now: the renewal arms the witness, from after the leader's removal.
    w.follower.ownKeyRenewed();
    release();
    await settle();
    assert.deepEqual(w.outcome(), { turn: { turnAt: heirRemoved.modifiedIndex, proven: false } });
  });

  it("names a 0.0.1 heir from memory when the leader goes: such a heir renews by writing and never announces", async () => {
    const w = waiting(3);
    const [leader, heir, third] = w.older;
    await w.letOneTurnThrough();
    w.store.put(heir!.key, "old-style", { ttl: TTL, prevIndex: heir!.modifiedIndex });
    await settle();
    assert.deepEqual(w.leaders, [], "a renewal is no leadership");
    await w.letOneTurnThrough();
    assert.deepEqual(w.waits(), [[leader!.key, w.listedAt + 1, false]], "the leader, from where it was last seen");
    w.store.deleteNow(leader!.key);
    await settle();
    assert.deepEqual(w.leaders, [{ name: "old-style", token: heir!.createdIndex }]);
    await w.letOneTurnThrough();
    assert.deepEqual(w.waits(), [[third!.key, w.listedAt + 1, false]]);
  });

  it("takes a node written in the heir's place (a set without prevExist) for the heir's removal, not for a 0.0.1 heir renewing", async () => {
    const w = waiting(3);
    const [, heir, third] = w.older;
    await w.letOneTurnThrough();
    w.store.put(heir!.key, "m2");
    await settle();
    await w.letOneTurnThrough();
    assert.deepEqual(w.waits(), [[third!.key, w.listedAt + 1, false]], "the member behind it is watched, not the leader");
    assert.deepEqual(w.leaders, []);
  });

  it("watches the leader, not a heir written by hand without a TTL, which never writes again", async () => {
    const w = waiting(3, { permanent: [1] });
    const [leader, heir] = w.older;
    await w.letOneTurnThrough();
    assert.deepEqual(w.waits(), [[leader!.key, w.listedAt + 1, false]]);
    w.store.deleteNow(leader!.key);
    await settle();
    assert.deepEqual(w.leaders, [{ name: "m2", token: heir!.createdIndex }]);
  });

  it("where etcd forgot the heir's history and a read finds it, watches it again from where the leader was last seen", async () => {
    const w = waiting(3);
    const [, heir, third] = w.older;
    await w.letOneTurnThrough();
    // The history moves past the listing while the heir is watched; then the heir announces.
    pushHistoryPast(w.store);
    const announced = announce(w.store, heir!.key, "heir");
    await settle();
    assert.deepEqual(w.leaders, [{ name: "heir", token: heir!.createdIndex }]);
    await w.letOneTurnThrough();
    // The new heir's watch from the listing is refused, a read finds it; etcd
    // still has the history from the announcement, which a watch from there replays.
    assert.deepEqual(w.store.requests.at(-1), { method: "wait", key: third!.key, fromIndex: announced.modifiedIndex + 1, recursive: false });
    assert.deepEqual(w.waits(), [[third!.key, announced.modifiedIndex + 1, false]]);
    assert.equal(w.leaders.length, 1);
  });

  it("where etcd forgot the heir's history and the leader's too, names the heir once a read finds the leader gone, and a read after finds the heir", async () => {
    const w = waiting(3, {
      beforeWait: (store) => {
        const [leader, heir] = [...store.keysUnder(DIR)];
        store.deleteNow(leader!);
        store.put(heir!, "heir", { ttl: TTL, prevExist: true });
        pushHistoryPast(store);
      },
    });
    const [leader, heir] = w.older;
    await w.letOneTurnThrough();
    const reads = w.store.requests.filter((r) => r.method === "get").map((r) => r.key);
    assert.deepEqual(reads, [heir!.key, leader!.key, heir!.key], "the heir, the leader (a watch from where it was seen would be refused), the heir again");
    assert.deepEqual(w.leaders, [{ name: "heir", token: heir!.createdIndex }]);
  });

  it("where etcd forgot the heir's history and the leader's too, does not name a heir gone by the time the leader was read", async () => {
    const w = waiting(3, {
      beforeWait: (store) => {
        const [leader] = [...store.keysUnder(DIR)];
        store.deleteNow(leader!);
        pushHistoryPast(store);
      },
    });
    const [, heir] = w.older;
    // The heir is read, and goes before the leader is: the answers held back until then.
    let release = w.store.holdAnswers();
    await w.letOneTurnThrough();
    release();
    release = w.store.holdAnswers();
    await settle();
    w.store.deleteNow(heir!.key);
    release();
    await settle();
    assert.deepEqual(w.leaders, [], "a heir found gone is no leader");
  });

  it("leaves no watch behind when its signal aborts", async () => {
    const w = waiting(1);
    await settle();
    assert.equal(w.waits().length, 2);
    w.controller.abort(new Error("stopped"));
    await settle();
    assert.deepEqual(w.waits(), []);
    assert.equal(w.store.watcherCount, 0, "no watcher left at etcd");
    const outcome = w.outcome();
    assert.ok(outcome && "error" in outcome, "the wait rejects");
  });
});
