// The backend on its own, called as the state machine calls it: what renew,
// awaitLoss and leave promise, and that every wait ends at its signal.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { ElectionBackend, Membership } from "../../../src/contract/backend";
import { MembershipLostError } from "../../../src/contract/errors";
import { sleep, waitFor, withDeadline } from "../../kit/waiting";
import { LIVENESS_MS, TTL_MS, noLeader, type Harness } from "./harness";

const timeout = () => AbortSignal.timeout(LIVENESS_MS);

/** How long a count of the store's watches must hold before a case takes it as where it stands. */
const STEADY_MS = 200;

/** True once `renew` reports the membership lost; any other failure fails the case. */
async function renewalReportsLoss(backend: ElectionBackend, membership: Membership): Promise<boolean> {
  try {
    // Each try is bounded well within the wait, so that one lost on a connection
    // still coming back from a cut leaves time for the next.
    await backend.renew(membership, AbortSignal.timeout(TTL_MS / 2));
    return false;
  } catch (err) {
    if (err instanceof MembershipLostError) return true;
    // A timeout or a reconnecting client is a transient failure an election retries: try again.
    return false;
  }
}

export function backendCases(harness: Harness): void {
  /** A leads on its bare backend; b waits for its turn, an observer follows, a waits for its loss: all on one signal. */
  /** `count()` once two readings STEADY_MS apart agree (within LIVENESS_MS). */
  async function steadyCount(count: () => Promise<number>): Promise<number> {
    let last = await count();
    const steady = await waitFor("the store's watches to hold steady", LIVENESS_MS, async () => {
      await sleep(STEADY_MS);
      const now = await count();
      const held = now === last;
      last = now;
      // An object: a count of 0 is an answer too.
      return held ? { now } : undefined;
    });
    return steady.now;
  }

  async function waitsOnOneSignal(label: string) {
    await harness.election(label);
    const a = (await harness.backend("a")).backend;
    const claim = await harness.claim(a);
    const b = (await harness.backend("b")).backend;
    const observer = (await harness.backend("observer")).backend;
    // The claim's own wait may still be closing its watch on the store (a
    // backend may close it in the background): count once the figure holds.
    const before = harness.store.openWatches ? await steadyCount(harness.store.openWatches) : undefined;
    const controller = new AbortController();
    const joined = await harness.join(b);
    const waits: Array<Promise<unknown>> = [
      b.awaitTurn(joined, noLeader, controller.signal),
      a.awaitLoss(claim.membership, controller.signal),
      observer.observe(noLeader, controller.signal),
    ];
    for (const wait of waits) wait.catch(() => undefined);
    return { controller, waits, before };
  }

  describe("the backend on its own", () => {
    // Only an expiry: a renewal may confirm a time to live kept apart from the
    // membership itself (an etcd v3 lease outlives a key deleted from outside),
    // and a deletion is reported by awaitLoss and awaitTurn instead (below).
    it("renew confirms a live membership, and throws MembershipLostError once it expired", harness.needs("expireMember"), async () => {
      await harness.election("renew-expired");
      const { backend } = await harness.backend("a");
      const claim = await harness.claim(backend);
      await backend.renew(claim.membership, timeout());

      await harness.store.expireMember!("a");
      await waitFor("renew to report the loss", 2 * TTL_MS, () => renewalReportsLoss(backend, claim.membership));
      await withDeadline(backend.awaitLoss(claim.membership, timeout()), LIVENESS_MS, "awaitLoss after the expiry");
    });

    it("leave gives the membership up, and succeeds again when it is already gone", async () => {
      await harness.election("leave-twice");
      const { backend } = await harness.backend("a");
      const claim = await harness.claim(backend);
      assert.deepEqual(await harness.store.members(), ["a"]);
      await backend.leave(claim.membership, timeout());
      await backend.leave(claim.membership, timeout());
      assert.deepEqual(await harness.store.members(), []);
      await assert.rejects(backend.renew(claim.membership, timeout()), MembershipLostError);
    });

    it("readCandidates, where a backend has it, lists the members in the order they would lead, each with its token", async (t) => {
      await harness.election("candidates");
      const { backend: a } = await harness.backend("a");
      if (!a.readCandidates) return t.skip("this backend has no readCandidates: its candidates are the leader alone");
      const { backend: b } = await harness.backend("b");
      const first = await harness.claim(a);
      const second = await harness.join(b);
      assert.ok(second, "a backend with a line joins");
      const line = await a.readCandidates(timeout());
      assert.deepEqual(line.map((m) => m.name), ["a", "b"]);
      assert.deepEqual(line.map((m) => m.token), [first.token, second.token]);
      await a.leave(first.membership, timeout());
      assert.deepEqual((await b.readCandidates!(timeout())).map((m) => m.name), ["b"]);
      await b.leave(second.membership, timeout());
      assert.deepEqual(await b.readCandidates!(timeout()), []);
    });

    it("awaitLoss sees a deletion made before it started waiting", harness.needs("deleteMember"), async () => {
      await harness.election("loss-before");
      const { backend } = await harness.backend("a");
      const claim = await harness.claim(backend);
      await harness.store.deleteMember!("a");
      await withDeadline(backend.awaitLoss(claim.membership, timeout()), LIVENESS_MS, "awaitLoss");
    });

    it("awaitLoss does not resolve while the membership lives on through renewals", async () => {
      await harness.election("loss-renewed");
      const { backend } = await harness.backend("a");
      const claim = await harness.claim(backend);
      const controller = new AbortController();
      let settled: string | undefined;
      const loss = backend.awaitLoss(claim.membership, controller.signal).then(
        () => (settled = "resolved"),
        (err: unknown) => (settled ??= `rejected: ${String(err)}`),
      );
      for (let i = 0; i < 3; i++) {
        await sleep(TTL_MS / 3);
        await backend.renew(claim.membership, timeout());
      }
      assert.equal(settled, undefined, "awaitLoss settled while the membership was held");
      controller.abort(new Error("done"));
      await loss;
    });

    it("every wait (awaitTurn, awaitLoss, observe) rejects with the signal's reason as soon as it aborts", async () => {
      const { controller, waits } = await waitsOnOneSignal("abort");
      await sleep(200);
      const reason = new Error("given up");
      controller.abort(reason);
      for (const wait of waits) {
        await assert.rejects(withDeadline(wait, 1_000, "the wait to end"), (err) => err === reason);
      }
    });

    it("aborted waits leave no watch open on the store", harness.needs("openWatches"), async () => {
      const { controller, waits, before } = await waitsOnOneSignal("abort-watches");
      await waitFor("the waits' watches", LIVENESS_MS, async () => (await harness.store.openWatches!()) > before!);
      controller.abort(new Error("given up"));
      await Promise.allSettled(waits);
      await waitFor("the watches to be cancelled", LIVENESS_MS, async () => (await harness.store.openWatches!()) === before);
    });
  });
}
