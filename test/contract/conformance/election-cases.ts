// Elections of several members on the target, through the public API: one
// leader, growing tokens, hand-overs, and what members do when the store
// drops a membership (deleted, expired) or stops answering one member.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { Leader } from "../../../src/contract/backend";
import etcdLeader = require("../../../src/index");
import { EXTERNAL_DELETE_OVERLAP_MS } from "../../faults/store-faults";
import { checkHistories, formatReport } from "../../kit/leadership-history";
import { sleep, waitFor, withDeadline } from "../../kit/waiting";
import { LIVENESS_MS, TTL_MS, type Harness, type Member } from "./harness";

const { LeaseExpiredError, MembershipRemovedError } = etcdLeader;

/**
 * How much later than its successor's election a leader may learn that its
 * membership was deleted or revoked from outside: it learns from a watch, as
 * the successor does, not before (the one exception to step-down-first).
 */
const WATCH_DELIVERY_MS = EXTERNAL_DELETE_OVERLAP_MS;

function assertOneLeaderAtATime(members: Member[], allowedOverlapMs = 0): void {
  const report = checkHistories(
    members.map((m) => m.history()),
    { allowedOverlapMs, endOfHistory: performance.now() },
  );
  assert.ok(report.overlaps.length === 0 && report.tokensIncrease.ok, formatReport("conformance", report));
}

export function electionCases(harness: Harness): void {
  describe("elections", () => {
    it("elects exactly one of three members; the others name it as their leader", async () => {
      const store = await harness.election("one-leader");
      const a = await harness.leader("a");
      const b = await harness.follower("b", "a");
      const c = await harness.follower("c", "a");
      await sleep(300);

      assert.deepEqual([a, b, c].filter((m) => m.election.isLeader()), [a]);
      assert.deepEqual(a.elected, [a.election.fencingToken()]);
      assert.deepEqual(a.leaders, [], "a leader does not name another");
      for (const follower of [b, c]) {
        assert.deepEqual(follower.elected, []);
        assert.deepEqual(follower.leaders, ["a"]);
        assert.equal(follower.election.fencingToken(), undefined);
      }
      for (const m of [a, b, c]) assert.deepEqual(m.errors.map((e) => e.message), [], `${m.name} reported errors`);
      assert.equal(await store.readLeader(), "a");
      assert.equal((await store.members())[0], "a");
    });

    it("hands over on leave() without waiting for the TTL; the old leader steps down first and every follower learns the successor", async (t) => {
      await harness.election("leave");
      const a = await harness.leader("a");
      const b = await harness.follower("b", "a");
      const c = await harness.follower("c", "a");
      const firstToken = a.election.fencingToken()!;

      const leftAt = performance.now();
      await a.election.leave();
      const successor = await waitFor("a successor", LIVENESS_MS, () => [b, c].find((m) => m.election.isLeader()));
      const other = successor === b ? c : b;
      await waitFor(`${other.name} to follow ${successor.name}`, LIVENESS_MS, () => other.election.currentLeader() === successor.name);

      const slowly = harness.target.handsOverAfterTtl;
      if (slowly === undefined) assert.ok(successor.lastAt("elected") - leftAt < TTL_MS, "the successor did not wait for a's membership to expire");
      else t.diagnostic(`the successor was elected ${Math.round(successor.lastAt("elected") - leftAt)} ms after leave(): ${slowly}`);
      assert.ok(a.lastAt("unelected") <= successor.lastAt("elected"), "a stepped down before its successor was elected");
      assert.ok(successor.election.fencingToken()! > firstToken, "the successor's token is larger");
      assert.deepEqual(other.leaders, ["a", successor.name]);
      assert.deepEqual(successor.leaders, ["a"], "the successor never named anyone else");
      for (const m of [b, c]) assert.deepEqual(m.errors.map((e) => e.message), [], `${m.name} reported errors`);
      assertOneLeaderAtATime([a, b, c]);
    });

    it("fencing tokens strictly increase from term to term, one leader at a time", async () => {
      await harness.election("tokens");
      const a = await harness.leader("a");
      const b = await harness.follower("b", "a");
      const c = await harness.follower("c", "a");
      const members = [a, b, c];

      const termsSoFar = () => members.reduce((sum, m) => sum + m.count("elected"), 0);
      let leader = a;
      for (let round = 1; round <= 3; round++) {
        // The leader leaves and joins again at once: whoever wins next, it is a new term.
        await leader.election.leave();
        leader.election.start();
        leader = await waitFor(`term ${round + 1}`, LIVENESS_MS, () =>
          termsSoFar() === round + 1 ? members.find((m) => m.election.isLeader()) : undefined,
        );
      }
      const terms = members
        .flatMap((m) => m.all("elected"))
        .sort((x, y) => x.at - y.at);
      assert.equal(terms.length, 4);
      for (let i = 1; i < terms.length; i++) {
        assert.ok(terms[i]!.value > terms[i - 1]!.value, `term ${i + 1}'s token ${terms[i]!.value} follows ${terms[i - 1]!.value}`);
      }
      assertOneLeaderAtATime(members);
    });

    /**
     * a leads and b follows; `fault` strikes a. Returns once b leads, having
     * checked that a stepped down exactly once, within a TTL of the fault.
     */
    async function failOver(label: string, fault: (name: string) => Promise<void>) {
      const store = await harness.election(label);
      const a = await harness.leader("a");
      const b = await harness.follower("b", "a");
      const faultAt = performance.now();
      await fault("a");
      await waitFor("b to lead", LIVENESS_MS, () => b.election.isLeader());
      // When a learns of the fault from a watch, it may hear a moment after b.
      await waitFor("a to step down", LIVENESS_MS, () => a.count("unelected") > 0);
      assert.equal(a.count("unelected"), 1);
      assert.ok(a.lastAt("unelected") - faultAt <= TTL_MS, "a stepped down within a TTL of the fault");
      return { store, a, b };
    }

    it(
      "a leader whose membership is deleted from outside steps down no later than its successor is elected, and campaigns again",
      harness.needs("deleteMember"),
      async () => {
        const { a, b } = await failOver("deleted-leader", (name) => harness.store.deleteMember!(name));
        await waitFor("a to follow b", LIVENESS_MS, () => a.election.currentLeader() === "b");
        assert.ok(a.lastAt("unelected") <= b.lastAt("elected") + WATCH_DELIVERY_MS, "a stepped down with b's election at the latest");
        assert.ok(a.election.isRunning(), "a lost membership is not fatal");
        await b.election.leave();
        await waitFor("a to lead again", LIVENESS_MS, () => a.election.isLeader());
        assert.ok(a.election.fencingToken()! > b.elected[0]!, "a's new term has a larger token than b's");
        assertOneLeaderAtATime([a, b], WATCH_DELIVERY_MS);
      },
    );

    it(
      "a follower whose membership is deleted from outside takes a new one at once; the leader is undisturbed",
      harness.needs("deleteMember"),
      async (t) => {
        const store = await harness.election("deleted-follower");
        const a = await harness.leader("a");
        const b = await harness.follower("b", "a");
        if (!(await store.members()).includes("b")) return t.skip("the store holds nothing for a follower (a race-style store)");

        await store.deleteMember!("b");
        await waitFor("b's new membership", LIVENESS_MS, async () => (await store.members()).includes("b"));
        assert.ok(a.election.isLeader());
        assert.equal(a.count("unelected"), 0);
        assert.equal(b.count("elected"), 0);

        await a.election.leave();
        await waitFor("b to lead on its new membership", LIVENESS_MS, () => b.election.isLeader());
      },
    );

    it(
      "a leader whose membership expires steps down by its deadline, no later than its successor is elected",
      harness.needs("expireMember"),
      async () => {
        const { a, b } = await failOver("expired-leader", (name) => harness.store.expireMember!(name));
        assert.ok(a.lastAt("unelected") <= b.lastAt("elected") + WATCH_DELIVERY_MS, "a stepped down with b's election at the latest");
        await waitFor("a to follow b", LIVENESS_MS, () => a.election.currentLeader() === "b");
        assertOneLeaderAtATime([a, b], WATCH_DELIVERY_MS);
      },
    );

    it(
      "a leader cut off from the store steps down before its successor is elected, and keeps running",
      harness.needs("cutConnection"),
      async () => {
        const { store, a, b } = await failOver("cut-leader", (name) => harness.store.cutConnection!(name));
        assert.ok(a.lastAt("unelected") < b.lastAt("elected"), "a stepped down before b was elected");
        assert.ok(a.election.isRunning());
        await waitFor("a to report the requests that went unanswered", LIVENESS_MS, () => a.count("error") > 0);
        assert.equal(await store.readLeader(), "b");
        assertOneLeaderAtATime([a, b]);
      },
    );

    it("an observer, a one-shot read and the store itself agree with the members on who leads", async () => {
      const store = await harness.election("observe");
      const observer = etcdLeader.observeBackend((await harness.backend("observer")).backend);
      const seen: Array<string | undefined> = [];
      observer.on("leader", (name) => seen.push(name));
      observer.on("error", (error) => seen.push(`error: ${error.message}`));
      observer.start();
      harness.onCleanup(() => observer.stop());
      const reader = (await harness.backend("reader")).backend;
      const agree = async (leader: Member | undefined) => {
        const name = leader?.name;
        await waitFor(`the observer to report ${name}`, LIVENESS_MS, () => seen.length > 0 && seen.at(-1) === name);
        assert.equal(observer.currentLeader(), name);
        assert.equal(await store.readLeader(), name);
        const read = await reader.readLeader(AbortSignal.timeout(LIVENESS_MS));
        assert.equal(read?.name, name);
        // On a race-style store the token may be that of the leader's latest renewal.
        if (leader) assert.ok(read!.token >= leader.election.fencingToken()!, "the read token is the leader's or newer");
      };

      await agree(undefined);
      const a = await harness.leader("a");
      await agree(a);
      const b = await harness.follower("b", "a");
      await a.election.leave();
      await waitFor("b to lead", LIVENESS_MS, () => b.election.isLeader());
      await agree(b);
      await b.election.leave();
      await agree(undefined);

      const named = seen.filter((name) => name !== undefined);
      assert.deepEqual(named, ["a", "b"], `the observer saw ${JSON.stringify(seen)}`);
      assert.ok(seen.every((name, i) => i === 0 || name !== seen[i - 1]), `no repeated report in ${JSON.stringify(seen)}`);
    });

    it("a follower's leader changes name each leader in turn, itself included, with growing tokens", async () => {
      await harness.election("changes");
      const a = await harness.leader("a");
      const b = await harness.follower("b", "a");
      const changes: Array<Leader | undefined> = [];
      const controller = new AbortController();
      harness.onCleanup(() => controller.abort());
      const reading = (async () => {
        for await (const leader of b.election.leaderChanges({ signal: controller.signal })) {
          changes.push(leader);
          if (leader?.name === "b") break;
        }
      })();

      await a.election.leave();
      await withDeadline(reading, LIVENESS_MS, "b's leader changes to reach b");
      const named = changes.filter((leader) => leader !== undefined);
      assert.deepEqual(named.map((leader) => leader.name), ["a", "b"]);
      assert.equal(named[0]!.token, a.elected[0]);
      assert.equal(named[1]!.token, b.election.fencingToken());
      assert.ok(named[1]!.token > named[0]!.token);
    });

    /** Runs a routine under whileLeading() on a, applies `fault` to a, and returns how the scope ended. */
    async function scopeUnderFault(label: string, fault: (name: string) => Promise<void>) {
      await harness.election(label);
      const a = await harness.member("a");
      let abortedAt: number | undefined;
      const scope = a.election.whileLeading(
        async (term) => {
          await new Promise((resolve) => term.signal.addEventListener("abort", resolve, { once: true }));
          abortedAt = performance.now();
        },
        { onLoss: "reject" },
      );
      scope.catch(() => undefined);
      await waitFor("a to lead", LIVENESS_MS, () => a.election.isLeader());
      const b = await harness.follower("b", "a");
      await fault("a");
      await waitFor("b to lead", LIVENESS_MS, () => b.election.isLeader());
      const reason = await withDeadline(scope.then(() => "resolved", (error: unknown) => error), LIVENESS_MS, "whileLeading() to settle");
      return { abortedAt: abortedAt!, electedAt: b.lastAt("elected"), reason };
    }

    it(
      "whileLeading()'s signal aborts with MembershipRemovedError when the membership is deleted, with the successor's election at the latest",
      harness.needs("deleteMember"),
      async () => {
        const { abortedAt, electedAt, reason } = await scopeUnderFault("scope-deleted", (name) => harness.store.deleteMember!(name));
        assert.ok(reason instanceof MembershipRemovedError, `whileLeading() settled with ${String(reason)}`);
        assert.ok(abortedAt <= electedAt + WATCH_DELIVERY_MS, "the routine's signal aborted with b's election at the latest");
      },
    );

    it(
      "whileLeading()'s signal aborts with LeaseExpiredError when the store stops answering, before the successor is elected",
      harness.needs("cutConnection"),
      async () => {
        const { abortedAt, electedAt, reason } = await scopeUnderFault("scope-cut", (name) => harness.store.cutConnection!(name));
        assert.ok(reason instanceof LeaseExpiredError, `whileLeading() settled with ${String(reason)}`);
        assert.ok(abortedAt < electedAt, "the routine's signal aborted before b was elected");
      },
    );
  });
}
