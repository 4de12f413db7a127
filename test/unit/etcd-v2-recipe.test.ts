// The v2 recipe's own steps (src/stores/etcd-v2/recipe.ts) on a port double
// and a hand-driven clock: what a join claims, how a renewal reads etcd's
// answer, and the one announcement a member that waited for its turn sends.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { MembershipLostError } from "../../src/contract/errors";
import { TurnQueue } from "../../src/util/turns";
import { EtcdV2Backend } from "../../src/stores/etcd-v2/recipe";
import { FakeClock } from "../kit/fake-clock";
import { event, node, PortDouble, settle } from "./etcd-v2-port-double";

const DIR = "/election";
const key = (createdIndex: number) => `${DIR}/${String(createdIndex).padStart(20, "0")}`;

function backend() {
  const port = new PortDouble();
  const clock = new FakeClock();
  const turns = new TurnQueue((callback) => setImmediate(callback));
  return { port, clock, backend: new EtcdV2Backend(port, "election/", "me", 10, 30_000, turns, clock) };
}

/** The member created at `createdIndex`, joined, with etcd at `etcdIndex`. */
async function joined(b: ReturnType<typeof backend>, createdIndex: number, etcdIndex = createdIndex) {
  const joining = b.backend.join(new AbortController().signal);
  b.port.pending("createInOrder")[0]!.answer({ node: node(key(createdIndex), createdIndex, createdIndex, "me"), etcdIndex });
  return joining;
}

describe("the etcd v2 recipe", () => {
  it("claims an in-order key under the directory as etcd names it, sent at the clock's time, its token the createdIndex", async () => {
    const b = backend();
    const joining = b.backend.join(new AbortController().signal);
    const [create] = b.port.pending("createInOrder");
    assert.equal(create?.key, DIR);
    assert.equal(create?.value, "me");
    const sentAt = b.clock.now();
    await b.clock.advance(40);
    create!.answer({ node: node(key(11), 11, 11, "me"), etcdIndex: 12 });
    const claim = await joining;
    assert.deepEqual(claim, { membership: { id: key(11), token: 11 }, token: 11, sentAt, ttlMs: 10_000 });
  });

  it("renews with a refresh, and counts a key etcd no longer holds, or one made again in its place, as lost", async () => {
    const b = backend();
    const { membership } = await joined(b, 11);
    const signal = new AbortController().signal;
    let renewing = b.backend.renew(membership, signal);
    let [write] = b.port.pending("setIfExists");
    assert.equal(write?.value, null, "a refresh, which wakes no watcher");
    write!.answer({ node: node(key(11), 11, 40, "me"), etcdIndex: 40 });
    await renewing;
    renewing = b.backend.renew(membership, signal);
    b.port.pending("setIfExists")[0]!.answer({ node: undefined, etcdIndex: 50 });
    await assert.rejects(renewing, MembershipLostError);
    renewing = b.backend.renew(membership, signal);
    [write] = b.port.pending("setIfExists");
    write!.answer({ node: node(key(11), 60, 60, "someone else"), etcdIndex: 60 });
    await assert.rejects(renewing, (err) => err instanceof MembershipLostError && /replaced by a key created at 60/.test(err.message));
  });

  it("leads at once when its listing shows it first, without announcing", async () => {
    const b = backend();
    const claim = await joined(b, 11);
    const turn = b.backend.awaitTurn(claim, () => undefined, new AbortController().signal);
    const [listing] = b.port.pending("get");
    assert.deepEqual(listing?.options, { sorted: true });
    listing!.answer({ node: { key: DIR, dir: true, createdIndex: 5, modifiedIndex: 5, nodes: [node(key(11), 11, 11, "me")] }, etcdIndex: 20 });
    assert.equal(await turn, claim);
    await settle();
    assert.equal(b.port.pending("setIfExists").length, 0);
  });

  it("after waiting for its turn, announces once with its value, each renewal announcing until one is answered", async () => {
    const b = backend();
    const claim = await joined(b, 11);
    const leaders: unknown[] = [];
    const turn = b.backend.awaitTurn(claim, (leader) => leaders.push(leader), new AbortController().signal);
    b.port.pending("get")[0]!.answer({
      node: { key: DIR, dir: true, createdIndex: 5, modifiedIndex: 5, nodes: [node(key(10), 10, 10, "first"), node(key(11), 11, 11, "me")] },
      etcdIndex: 20,
    });
    await settle();
    assert.deepEqual(leaders, [{ name: "first", token: 10 }]);
    // The witness sees the leader go, our key still there.
    b.port.waitOn(DIR, true).answer(event("delete", node(key(10), 10, 30)));
    assert.equal(await turn, claim);
    assert.equal(b.port.pending("get").length, 0, "the witness proved the turn: no read");
    await settle();
    const [announcement] = b.port.pending("setIfExists");
    assert.equal(announcement?.value, "me", "a write of its value: an update event for the members watching it");
    const renewing = b.backend.renew(claim.membership, new AbortController().signal);
    const writes = b.port.pending("setIfExists");
    assert.equal(writes.length, 2);
    assert.equal(writes[1]!.value, "me", "not yet answered: the renewal announces too");
    announcement!.answer({ node: node(key(11), 11, 31, "me"), etcdIndex: 31 });
    writes[1]!.answer({ node: node(key(11), 11, 32, "me"), etcdIndex: 32 });
    await renewing;
    void b.backend.renew(claim.membership, new AbortController().signal);
    assert.equal(b.port.pending("setIfExists")[0]!.value, null, "announced: renewals refresh again");
  });

  it("watches its own key for its loss from after the announcement, and resolves on its removal", async () => {
    const b = backend();
    const claim = await joined(b, 11);
    const turn = b.backend.awaitTurn(claim, () => undefined, new AbortController().signal);
    b.port.pending("get")[0]!.answer({
      node: { key: DIR, dir: true, createdIndex: 5, modifiedIndex: 5, nodes: [node(key(10), 10, 10, "first"), node(key(11), 11, 11, "me")] },
      etcdIndex: 20,
    });
    await settle();
    b.port.waitOn(DIR, true).answer(event("delete", node(key(10), 10, 30)));
    await turn;
    let lost = false;
    const loss = b.backend.awaitLoss(claim.membership, new AbortController().signal).then(() => (lost = true));
    await settle();
    assert.equal(b.port.pending("wait").length, 0, "no watch before the announcement is answered");
    b.port.pending("setIfExists")[0]!.answer({ node: node(key(11), 11, 31, "me"), etcdIndex: 31 });
    await settle();
    const own = b.port.waitOn(key(11));
    assert.equal(own.fromIndex, 32);
    own.answer(event("delete", node(key(11), 11, 40)));
    await loss;
    assert.equal(lost, true);
  });
});
