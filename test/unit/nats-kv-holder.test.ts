// The leader's side of the NATS KV recipe (src/stores/nats-kv/holder.ts),
// through the backend on a bucket in memory behind the recipe's port: the
// revision our writes are conditioned on, kept by the holder and not on the
// membership, and how a write of our own is told from anyone else's.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { Claim } from "../../src/contract/backend";
import { MembershipLostError } from "../../src/contract/errors";
import { TurnQueue } from "../../src/util/turns";
import { NatsKvBackend, type NatsMembership } from "../../src/stores/nats-kv/recipe";
import { FakeClock, settle } from "../kit/fake-clock";
import { NatsKvStore } from "../sim/stores/nats-kv";

const KEY = "leader";
const signal = () => AbortSignal.timeout(5_000);

function bucket(): { kv: NatsKvStore; backendOf: (name: string) => NatsKvBackend } {
  const clock = new FakeClock();
  const kv = new NatsKvStore({ now: () => clock.now() });
  return { kv, backendOf: (name) => new NatsKvBackend(kv, KEY, name, new TurnQueue(), clock, () => 0) };
}

const win = (backend: NatsKvBackend): Promise<Claim<NatsMembership>> => backend.awaitTurn(undefined, () => undefined, signal());

describe("the NATS KV key holder", () => {
  it("conditions each renewal on the revision of the last, and reports a key written by someone else as lost", async () => {
    const { kv, backendOf } = bucket();
    const backend = backendOf("a");
    const { membership, token } = await win(backend);
    assert.deepEqual(Object.keys(membership).sort(), ["id", "token"], "the membership carries only what identifies it");
    assert.equal(backend.lastRevision(membership), token);
    await backend.renew(membership, signal());
    await backend.renew(membership, signal());
    const updates = kv.requests.filter((r) => r.kind === "update").map((r) => r.revision);
    assert.deepEqual(updates, [token, token + 1]);
    assert.equal(backend.lastRevision(membership), kv.entry(KEY)!.revision);
    kv.put(KEY, "a");
    await assert.rejects(backend.renew(membership, signal()), (err: Error) => {
      assert.ok(err instanceof MembershipLostError);
      assert.match(err.message, /its revision 3 is stale \(the key is at 4\)/);
      return true;
    });
  });

  it("leaves at our latest revision, whichever backend of the process leaves, and leaves a successor's key alone", async () => {
    const { kv, backendOf } = bucket();
    const won = await win(backendOf("a"));
    await backendOf("a").renew(won.membership, signal());
    // Another backend on the key (as after a restart of the election) leaves it.
    await backendOf("a").leave(won.membership, signal());
    assert.equal(kv.entry(KEY)?.value, undefined, "the key was not deleted");
    const successor = await win(backendOf("b"));
    await backendOf("a").leave(won.membership, signal());
    assert.equal(kv.entry(KEY)?.value, "b");
    assert.equal(kv.entry(KEY)?.revision, successor.token);
  });

  it("leaves at the revision of a renewal cut short by stop() whose write was applied, not at the one before it", async () => {
    const { kv, backendOf } = bucket();
    const backend = backendOf("a");
    const { membership } = await win(backend);
    // The renewal is applied, its answer comes after stop() gave up on it.
    const update = kv.update.bind(kv);
    let answer: () => void = () => undefined;
    kv.update = (key, value, revision) =>
      update(key, value, revision).then((next) => new Promise<number>((resolve) => (answer = () => resolve(next))));
    const stopping = new AbortController();
    const renewal = backend.renew(membership, stopping.signal);
    await settle();
    stopping.abort();
    await assert.rejects(renewal);
    const leaving = backend.leave(membership, signal());
    await settle();
    answer();
    await leaving;
    assert.equal(kv.entry(KEY)?.value, undefined, "the key was left to age out: the delete was conditioned on the revision before the renewal");
  });

  it("sees no loss in the entry of its own renewal that arrives before the renewal's answer, and sees another member's write", async () => {
    const { kv, backendOf } = bucket();
    const backend = backendOf("a");
    const { membership } = await win(backend);
    let lost = false;
    const controller = new AbortController();
    void backend.awaitLoss(membership, controller.signal).then(() => (lost = true), () => undefined);
    await settle();
    // The renewal is applied (and on the watch) at once, and answered later.
    const update = kv.update.bind(kv);
    let answer: () => void = () => undefined;
    kv.update = (key, value, revision) =>
      update(key, value, revision).then((next) => new Promise<number>((resolve) => (answer = () => resolve(next))));
    const renewal = backend.renew(membership, signal());
    await settle();
    assert.equal(lost, false, "our own renewal's entry was taken for a loss");
    answer();
    await renewal;
    await settle();
    assert.equal(lost, false);
    kv.put(KEY, "intruder");
    await settle();
    assert.equal(lost, true);
    controller.abort();
  });

  it(
    "reports the key lost when the bucket was deleted and made again, even where another member's entry there has reached our last revision",
    {
      todo:
        "revisions start over in a bucket made again, and a revision-checked update cannot tell the buckets apart: a leader that did not see the " +
        "deletion (paused, cut off) renews over another member's live entry when the numbers meet, and both lead until that member's watch tells it",
    },
    async () => {
      const { kv, backendOf } = bucket();
      const a = backendOf("a");
      const { membership } = await win(a);
      await a.renew(membership, signal());
      const ours = a.lastRevision(membership);
      kv.deleteBucket();
      kv.makeBucket();
      const b = await win(backendOf("b"));
      let revision = b.token;
      while (revision < ours) revision = kv.put(KEY, "b");
      await assert.rejects(a.renew(membership, signal()), MembershipLostError);
      assert.equal(kv.entry(KEY)?.value, "b", "a's renewal overwrote b's live entry");
    },
  );

  it("confirms a key it won before while it is still ours, and reports it lost once it is not", async () => {
    const { kv, backendOf } = bucket();
    const backend = backendOf("a");
    const held = await win(backend);
    assert.equal(await backend.awaitTurn(held, () => undefined, signal()), held);
    kv.remove(KEY);
    await assert.rejects(backend.awaitTurn(held, () => undefined, signal()), /no longer ours: the key is gone/);
  });
});
