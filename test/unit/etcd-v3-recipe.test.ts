// The v3 recipe (src/stores/etcd-v3/recipe.ts) on an etcd in memory behind
// its port: it needs no etcd3 client, and takes its time from the clock it is
// given. What it does on a real etcd is checked in test/stores/etcd-v3/.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { Leader } from "../../src/contract/backend";
import { MembershipLostError } from "../../src/contract/errors";
import { TurnQueue } from "../../src/util/turns";
import { EtcdV3Backend } from "../../src/stores/etcd-v3/recipe";
import { FakeClock } from "../kit/fake-clock";
import { EtcdV3Store } from "../sim/stores/etcd-v3";

const timeout = () => AbortSignal.timeout(5_000);

/** A few turns of the event loop, for a follower to arm its watches or handle what they sent. */
async function settle(): Promise<void> {
  for (let i = 0; i < 5; i++) await new Promise((resolve) => setImmediate(resolve));
}

function member(etcd: EtcdV3Store, name: string, clock = new FakeClock()): EtcdV3Backend {
  return new EtcdV3Backend(etcd, "/election", name, 10, new TurnQueue(), clock, () => 0.5);
}

describe("the v3 recipe on its port", () => {
  it("joins with a key named after its lease, the put's revision as its token and its sentAt from the clock it was given", async () => {
    const etcd = new EtcdV3Store();
    const clock = new FakeClock();
    clock.jump(3_600_000); // an hour on, nowhere near performance.now()
    const claim = await member(etcd, "a", clock).join(timeout());
    assert.equal(claim.sentAt, clock.now());
    assert.equal(claim.ttlMs, 10_000);
    assert.equal(claim.membership.id, `/election/${BigInt(claim.membership.leaseId).toString(16)}`);
    assert.equal(claim.token, etcd.get(claim.membership.id)?.createRevision);
    assert.equal(etcd.get(claim.membership.id)?.value, "a");
  });

  it("waits behind the members before it, naming them, from one read of a short line, and leads once they left", async () => {
    const etcd = new EtcdV3Store();
    const [a, b, c] = [member(etcd, "a"), member(etcd, "b"), member(etcd, "c")];
    const claims = [await a.join(timeout()), await b.join(timeout()), await c.join(timeout())];
    const readsAfterJoins = etcd.requests.range;
    const named: Array<string | undefined> = [];
    const turn = c.awaitTurn(claims[2], (leader: Leader | undefined) => void named.push(leader?.name), timeout());
    let led = false;
    void turn.then(() => (led = true));
    await settle();
    await a.leave(claims[0]!.membership, timeout());
    await settle();
    assert.equal(led, false);
    await b.leave(claims[1]!.membership, timeout());
    assert.equal(await turn, claims[2]);
    assert.ok(led);
    assert.deepEqual(named, ["a", "b"]);
    assert.equal(etcd.requests.range, readsAfterJoins + 1, "one read of the line, when the wait began");
  });

  it("renews while the lease lives, and reports the membership lost once it was revoked", async () => {
    const etcd = new EtcdV3Store();
    const a = member(etcd, "a");
    const { membership } = await a.join(timeout());
    await a.renew(membership, timeout());
    await etcd.revokeLease(membership.leaseId);
    await assert.rejects(a.renew(membership, timeout()), MembershipLostError);
    assert.equal(etcd.get(membership.id), undefined);
  });

  it("a renewal with no watch of the key confirmed reads the key, and reports the membership lost if it was deleted while its lease lives", async () => {
    const etcd = new EtcdV3Store();
    const a = member(etcd, "a");
    const { membership } = await a.join(timeout());
    const reads = etcd.requests.range;
    await a.renew(membership, timeout());
    assert.equal(etcd.requests.range, reads + 1, "the key was not read beside the keep-alive");
    etcd.delete(membership.id);
    await assert.rejects(a.renew(membership, timeout()), (err: Error) => {
      assert.ok(err instanceof MembershipLostError);
      assert.match(err.message, /was deleted while its lease lived/);
      return true;
    });
  });

  it("a leader whose watch of its key etcd confirmed renews with the keep-alive alone", async () => {
    const etcd = new EtcdV3Store();
    const a = member(etcd, "a");
    const claim = await a.join(timeout());
    await a.awaitTurn(claim, () => undefined, timeout());
    const watching = new AbortController();
    const loss = a.awaitLoss(claim.membership, watching.signal).catch(() => undefined);
    await settle();
    const reads = etcd.requests.range;
    await a.renew(claim.membership, timeout());
    assert.equal(etcd.requests.range, reads, "a read beside the keep-alive while the key's watch runs");
    watching.abort();
    await loss;
    // The watch is gone: the next renewal reads the key again.
    await a.renew(claim.membership, timeout());
    assert.equal(etcd.requests.range, reads + 1);
  });

  it("a leader learns its key is gone, even when deleted before it began to watch", async () => {
    const etcd = new EtcdV3Store();
    const a = member(etcd, "a");
    const claim = await a.join(timeout());
    await a.awaitTurn(claim, () => undefined, timeout());
    etcd.delete(claim.membership.id);
    await a.awaitLoss(claim.membership, timeout());
  });

  it("an observer names the leader, skips keys that are no member, and names each next leader", async () => {
    const etcd = new EtcdV3Store();
    etcd.put({ "/election/cleanup/1": "inner" });
    const [a, b] = [member(etcd, "a"), member(etcd, "b")];
    const claims = [await a.join(timeout()), await b.join(timeout())];
    const seen: Array<string | undefined> = [];
    const stop = new AbortController();
    const observing = a.observe((leader) => void seen.push(leader?.name), stop.signal);
    observing.catch(() => undefined);
    await settle();
    await a.leave(claims[0]!.membership, timeout());
    await settle();
    await b.leave(claims[1]!.membership, timeout());
    await settle();
    // Into the empty line, a key that is no member: still nobody leads.
    etcd.put({ "/election/cleanup/2": "inner" });
    await settle();
    stop.abort();
    await observing.catch(() => undefined);
    assert.deepEqual(seen, ["a", "b", undefined]);
    assert.equal(await a.readLeader(timeout()), undefined);
  });
});
