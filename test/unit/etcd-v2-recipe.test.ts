// The v2 recipe's own steps (src/stores/etcd-v2/recipe.ts) on the simulated
// etcd v2 (test/sim/stores/etcd-v2.ts) as the port, on a hand-driven clock:
// what a join claims, how a renewal reads etcd's answer, the one
// announcement a member that waited for its turn sends, what counts as the
// loss of a membership, and the bound on the reads of the wait.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { MembershipLostError } from "../../src/contract/errors";
import { TurnQueue } from "../../src/util/turns";
import { UnansweredError } from "../../src/stores/etcd-v2/node-etcd/client";
import { EtcdV2Backend } from "../../src/stores/etcd-v2/recipe";
import { FakeClock, settle } from "../kit/fake-clock";
import { EtcdV2Store } from "../sim/stores/etcd-v2";

const DIR = "/election";
const TTL = 10;

function backend() {
  const clock = new FakeClock();
  const store = new EtcdV2Store(clock);
  const turns = new TurnQueue((callback) => setImmediate(callback));
  return { store, clock, backend: new EtcdV2Backend(store, "election/", "me", TTL, 30_000, turns, clock) };
}

const signal = () => new AbortController().signal;

/** A member of the election that is not this backend's: an in-order key under the directory. */
const other = (b: ReturnType<typeof backend>, name: string) => b.store.createInOrderNow(DIR, name, TTL).node;

const writes = (b: ReturnType<typeof backend>) => b.store.requests.filter((r) => r.method === "setIfExists");

describe("the etcd v2 recipe", () => {
  it("claims an in-order key under the directory as etcd names it, sent at the clock's time, its token the createdIndex", async () => {
    const b = backend();
    const release = b.store.holdAnswers();
    const joining = b.backend.join(signal());
    assert.deepEqual(b.store.requests, [{ method: "createInOrder", key: DIR, value: "me" }]);
    const sentAt = b.clock.now();
    await b.clock.advance(40);
    release();
    const claim = await joining;
    const [key] = b.store.keysUnder(DIR);
    const { node } = b.store.getNow(key!);
    assert.equal(node.key, `${DIR}/${String(node.createdIndex).padStart(20, "0")}`);
    assert.deepEqual(claim, { membership: { id: node.key, token: node.createdIndex }, token: node.createdIndex, sentAt, ttlMs: TTL * 1000 });
  });

  it("renews with a refresh, and counts a key etcd no longer holds, or one made again in its place, as lost", async () => {
    const b = backend();
    const { membership } = await b.backend.join(signal());
    await b.backend.renew(membership, signal());
    assert.equal(writes(b)[0]?.value, null, "a refresh, which wakes no watcher");
    b.store.deleteNow(membership.id);
    await assert.rejects(b.backend.renew(membership, signal()), MembershipLostError);
    const { node } = b.store.put(membership.id, "someone else");
    await assert.rejects(b.backend.renew(membership, signal()), (err) => err instanceof MembershipLostError && err.message.includes(`replaced by a key created at ${node.createdIndex}`));
  });

  it("leads at once when its listing shows it first, without announcing", async () => {
    const b = backend();
    const claim = await b.backend.join(signal());
    assert.equal(await b.backend.awaitTurn(claim, () => undefined, signal()), claim);
    assert.deepEqual(b.store.requests.at(-1), { method: "get", key: DIR, options: { sorted: true } });
    await settle();
    assert.equal(writes(b).length, 0);
  });

  it("after waiting for its turn, announces once with its value, each renewal announcing until one is answered", async () => {
    const b = backend();
    const first = other(b, "first");
    const claim = await b.backend.join(signal());
    const leaders: unknown[] = [];
    const turn = b.backend.awaitTurn(claim, (leader) => leaders.push(leader), signal());
    await settle();
    assert.deepEqual(leaders, [{ name: "first", token: first.createdIndex }]);
    // The witness sees the leader go, our key still there.
    b.store.deleteNow(first.key);
    const release = b.store.holdAnswers();
    assert.equal(await turn, claim);
    assert.equal(b.store.requests.filter((r) => r.method === "get").length, 1, "the listing only: the witness proved the turn, no read");
    await settle();
    const [announcement] = writes(b);
    assert.equal(announcement?.value, "me", "a write of its value: an update event for the members watching it");
    const renewing = b.backend.renew(claim.membership, signal());
    assert.deepEqual(writes(b).map((w) => w.value), ["me", "me"], "not yet answered: the renewal announces too");
    release();
    await renewing;
    await b.backend.renew(claim.membership, signal());
    assert.equal(writes(b).at(-1)?.value, null, "announced: renewals refresh again");
  });

  it("watches its own key for its loss from after the announcement, and resolves on its removal", async () => {
    const b = backend();
    const first = other(b, "first");
    const claim = await b.backend.join(signal());
    const turn = b.backend.awaitTurn(claim, () => undefined, signal());
    await settle();
    b.store.deleteNow(first.key);
    const release = b.store.holdAnswers();
    await turn;
    let lost = false;
    const loss = b.backend.awaitLoss(claim.membership, signal()).then(() => (lost = true));
    await settle();
    assert.ok(!b.store.pendingWaits.some((w) => w.key === claim.membership.id), "no watch before the announcement is answered");
    release();
    await settle();
    const announced = b.store.getNow(claim.membership.id).node;
    assert.deepEqual(b.store.pendingWaits, [{ key: claim.membership.id, fromIndex: announced.modifiedIndex + 1, recursive: false }]);
    b.store.deleteNow(claim.membership.id);
    await loss;
    assert.equal(lost, true);
  });

  it("counts a node written in its key's place (a set without prevExist, which makes no removal event) as the loss of its membership", async () => {
    const b = backend();
    const claim = await b.backend.join(signal());
    await b.backend.awaitTurn(claim, () => undefined, signal());
    let lost = false;
    const loss = b.backend.awaitLoss(claim.membership, signal()).then(() => (lost = true));
    await settle();
    b.store.put(claim.membership.id, "me");
    await settle();
    assert.equal(lost, true, "still watching a key that is no longer its own");
    await loss;
  });

  it("gives up a listing etcd does not answer within a TTL: the wait for the turn fails, and the election tries again", async () => {
    const b = backend();
    const claim = await b.backend.join(signal());
    // A request lost on a connection that died silently: never answered.
    b.store.holdAnswers();
    const seen: { outcome?: unknown } = {};
    b.backend.awaitTurn(claim, () => undefined, signal()).then(
      (turn) => (seen.outcome = turn),
      (err: unknown) => (seen.outcome = err),
    );
    await b.clock.advance(TTL * 1000 - 1);
    assert.equal(seen.outcome === undefined, true, "given up before its bound");
    await b.clock.advance(1);
    assert.ok(seen.outcome instanceof UnansweredError, `the wait gave ${String(seen.outcome)}`);
  });
});
