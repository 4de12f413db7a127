// stop() at any moment leaves nothing behind in the store, and start() works
// again afterwards. The moments are made by holding a backend call before the
// store sees it, or its answer after the store acted (intercepted-backend.ts).
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { sleep, waitFor, withDeadline } from "../../kit/waiting";
import { LIVENESS_MS, type Harness, type Member } from "./harness";

export function stopCases(harness: Harness): void {
  /** After stop(): leave() settles, the store holds nothing for `m`, nothing appears later, and a new start() is elected. */
  async function leavesNothingAndRestarts(m: Member): Promise<void> {
    await withDeadline(m.election.leave(), LIVENESS_MS, "leave()");
    assert.equal(m.election.isLeader(), false);
    assert.deepEqual(await harness.store.members(), [], "no membership left behind");
    await sleep(300); // a request still in flight would have landed by now
    assert.deepEqual(await harness.store.members(), [], "no membership appeared later");
    m.election.start();
    await waitFor(`${m.name} to be elected after start() again`, LIVENESS_MS, () => m.election.isLeader());
  }

  describe("stop() at any moment", () => {
    it("stop() on the tick after start()", async () => {
      await harness.election("stop-next-tick");
      const m = await harness.member("m");
      m.election.start();
      process.nextTick(() => m.election.stop());
      await leavesNothingAndRestarts(m);
    });

    it("stop() before the store has taken the join: the membership it then creates is given up", async (t) => {
      await harness.election("stop-before-join");
      const m = await harness.member("m");
      if (!m.intercepted.backend.join) return t.skip("a race-style store has no join");
      const join = m.intercepted.holdCalls("join");
      m.election.start();
      await withDeadline(join.reached, LIVENESS_MS, "the join");
      m.election.stop();
      join.open();
      await leavesNothingAndRestarts(m);
    });

    it("stop() while the join's answer is on its way: the membership it created is given up", async (t) => {
      await harness.election("stop-join-answer");
      const m = await harness.member("m");
      if (!m.intercepted.backend.join) return t.skip("a race-style store has no join");
      const answer = m.intercepted.holdAnswers("join");
      m.election.start();
      await withDeadline(answer.reached, LIVENESS_MS, "the join's answer");
      m.election.stop();
      answer.open();
      await leavesNothingAndRestarts(m);
    });

    it("stop() before the turn is asked for: the backend, handed an aborted signal, takes nothing", async () => {
      await harness.election("stop-before-turn");
      const m = await harness.member("m");
      const turn = m.intercepted.holdCalls("awaitTurn");
      m.election.start();
      await withDeadline(turn.reached, LIVENESS_MS, "the wait for the turn");
      m.election.stop();
      turn.open();
      await leavesNothingAndRestarts(m);
    });

    it("stop() while a follower waits for its turn: its membership goes, the leader's stays", async () => {
      await harness.election("stop-follower");
      const leader = await harness.leader("leader");
      const m = await harness.follower("m", "leader");
      m.election.stop();
      assert.equal(m.count("unelected"), 0, "a follower has nothing to step down from");
      await withDeadline(m.election.leave(), LIVENESS_MS, "leave()");
      assert.deepEqual(await harness.store.members(), ["leader"]);
      await leader.election.leave();
      await leavesNothingAndRestarts(m);
    });

    it("stop() while a renewal's answer is on its way", async () => {
      await harness.election("stop-renewal");
      const m = await harness.leader("m");
      const renewal = m.intercepted.holdAnswers("renew");
      await withDeadline(renewal.reached, LIVENESS_MS, "a periodic renewal");
      m.election.stop();
      assert.equal(m.count("unelected"), 1);
      renewal.open();
      await leavesNothingAndRestarts(m);
    });

    it("stop() while leading", async () => {
      await harness.election("stop-leader");
      const m = await harness.leader("m");
      m.election.stop();
      assert.equal(m.election.isLeader(), false);
      assert.equal(m.count("unelected"), 1);
      await leavesNothingAndRestarts(m);
    });
  });
}
