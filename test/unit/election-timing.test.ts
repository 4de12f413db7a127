// The state machine's timer logic on a hand-driven clock: when a leader must
// step down, what it counts from, and that nothing is left running after stop.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { Election } from "../../src/election/election";
import { resolveOptions } from "../../src/election/options";
import { FakeClock, settle } from "../kit/fake-clock";
import { ScriptedBackend } from "../kit/scripted-backend";

// TTL 10 s: renewals every 5 s, margin 2 s, so a lease horizon of 8 s.
const options = resolveOptions(10, { retryInitialDelay: 100, retryMaxDelay: 1000 });

// `random` places the first renewal in its interval; 0 (no spread) unless a test is about that.
function setup(style: "queue" | "race" = "queue", random = () => 0) {
  const clock = new FakeClock();
  const backend = new ScriptedBackend(style);
  backend.clock = clock;
  const election = new Election(backend, "me", options, clock, random);
  const events: string[] = [];
  election.on("elected", (token) => events.push(`elected ${token} @${clock.now()}`));
  election.on("unelected", () => events.push(`unelected @${clock.now()}`));
  election.on("leader", (name) => events.push(`leader ${name}`));
  election.on("error", () => undefined);
  return { clock, backend, election, events };
}

/** A member waiting for its turn is stopped, and the turn comes before the event loop's next turn; then it leaves. */
async function turnJustAfterStop(style: "queue" | "race") {
  const member = setup(style);
  const { clock, backend, election } = member;
  backend.firstInLine = false;
  election.start();
  await clock.advance(0);
  election.stop();
  backend.grantTurn();
  await election.leave();
  return member;
}

async function elect(clock: FakeClock, election: Election): Promise<number> {
  election.start();
  await settle();
  await clock.advance(0);
  assert.equal(election.isLeader(), true, "expected the member to lead");
  return clock.now();
}

describe("leader step-down timing", () => {
  it("a healthy leader keeps leading across many renewal periods", async () => {
    const { clock, election, events } = setup();
    await elect(clock, election);
    await clock.advance(60_000);
    assert.equal(election.isLeader(), true);
    assert.deepEqual(events.filter((e) => e.startsWith("unelected")), []);
    election.stop();
  });

  it("steps down at the last confirmed renewal's send time + TTL - margin when renewals fail", async () => {
    const { clock, backend, election, events } = setup();
    const electedAt = await elect(clock, election);
    backend.renewAnswer = "fail";
    await clock.advance(7_999);
    assert.equal(election.isLeader(), true, "still within the horizon");
    await clock.advance(1);
    assert.equal(election.isLeader(), false);
    assert.deepEqual(events, [`elected 10 @${electedAt}`, `unelected @${electedAt + 8_000}`]);
    election.stop();
  });

  it("counts the deadline from when a renewal was sent, not when it was confirmed", async () => {
    const { clock, backend, election } = setup();
    const electedAt = await elect(clock, election);
    // The renewal sent at +5 s hangs until its request timeout; nothing extends the lease.
    backend.renewAnswer = "hang";
    await clock.advance(7_999);
    assert.equal(election.isLeader(), true);
    await clock.advance(1);
    assert.equal(election.isLeader(), false, `stepped down at ${electedAt + 8_000}`);
    election.stop();
  });

  it("answers isLeader() false past the deadline even before any timer has run (a frozen process)", async () => {
    const { clock, election, events } = setup();
    await elect(clock, election);
    clock.jump(8_000);
    assert.equal(election.isLeader(), false);
    assert.equal(election.fencingToken(), undefined);
    assert.equal(election.leaseRemaining(), 0);
    assert.equal(election.currentLeader(), undefined);
    // The step-down event comes when the timers finally run.
    await clock.advance(0);
    assert.ok(events.some((e) => e.startsWith("unelected")));
    election.stop();
  });

  it("leaseRemaining() counts down from the horizon and is refilled by each renewal", async () => {
    const { clock, election } = setup();
    await elect(clock, election);
    assert.equal(election.leaseRemaining(), 8_000);
    await clock.advance(4_000);
    assert.equal(election.leaseRemaining(), 4_000);
    await clock.advance(1_000); // renewal at +5 s
    assert.equal(election.leaseRemaining(), 8_000);
    election.stop();
  });

  it("leads again once renewals succeed after a step-down, with the same membership", async () => {
    const { clock, backend, election, events } = setup();
    await elect(clock, election);
    backend.renewAnswer = "fail";
    await clock.advance(8_000);
    assert.equal(election.isLeader(), false);
    backend.renewAnswer = "ok";
    await clock.advance(5_000);
    assert.equal(election.isLeader(), true);
    assert.equal(backend.joins, 1, "kept its place in line");
    assert.equal(events.filter((e) => e.startsWith("elected")).length, 2);
    election.stop();
  });

  it("steps down at once and rejoins when a renewal finds the membership gone", async () => {
    const { clock, backend, election, events } = setup();
    const electedAt = await elect(clock, election);
    backend.renewAnswer = "lost";
    await clock.advance(5_000);
    assert.equal(election.isLeader(), false);
    assert.deepEqual(events.slice(0, 2), [`elected 10 @${electedAt}`, `unelected @${electedAt + 5_000}`]);
    backend.renewAnswer = "ok";
    await clock.advance(1_000);
    assert.equal(backend.joins, 2, "joined again at the back of the line");
    assert.equal(election.isLeader(), true);
    assert.equal(election.fencingToken(), 20);
    election.stop();
  });

  it("rejoins after the first back-off step when a loss ends a run of failures: the store answered", async () => {
    const { clock, backend, election } = setup();
    const joinedAt: number[] = [];
    const join = backend.join!;
    backend.join = () => (joinedAt.push(clock.now()), join());
    let lostAt: number | undefined;
    election.on("error", (err) => {
      if (lostAt === undefined && /: gone$/.test(err.message)) lostAt = clock.now();
    });
    // Joined, then the store unreachable for a while: the wait fails, and its
    // retries back off to their 1 s ceiling.
    backend.firstInLine = false;
    backend.turnAnswer = "fail";
    election.start();
    await clock.advance(6_000);
    assert.equal(joinedAt.length, 1);
    // It answers again, and says the membership is gone (its TTL ran out meanwhile).
    backend.turnAnswer = "lost";
    while (lostAt === undefined && clock.now() < 20_000) await clock.advance(10);
    assert.ok(lostAt !== undefined, "the loss was never reported");
    backend.turnAnswer = "ok";
    await clock.advance(1_000);
    // retryInitialDelay is 100 ms: the next join within it, not after the 0.5
    // to 1 s the failures had reached.
    const rejoinedAt = joinedAt[1];
    assert.ok(rejoinedAt !== undefined && rejoinedAt - lostAt <= 100, `lost at ${lostAt}, joined at ${joinedAt.join(", ")}`);
    election.stop();
  });

  it("steps down and rejoins when the store shows the membership removed", async () => {
    const { clock, backend, election, events } = setup();
    await elect(clock, election);
    backend.removeMembership();
    await clock.advance(0);
    assert.ok(events.some((e) => e.startsWith("unelected")));
    await clock.advance(1_000);
    assert.equal(backend.joins, 2);
    election.stop();
  });

  it("reports every failed renewal as an error with a growing attempt count, and keeps running", async () => {
    const { clock, backend, election } = setup();
    const attempts: number[] = [];
    election.on("error", (err) => {
      if (err.phase === "renew") attempts.push(err.attempt);
    });
    await elect(clock, election);
    backend.renewAnswer = "fail";
    await clock.advance(30_000);
    assert.ok(attempts.length >= 5, `only ${attempts.length} renewal attempts`);
    assert.deepEqual(attempts.slice(0, 4), [1, 2, 3, 4]);
    assert.equal(election.isRunning(), true);
    election.stop();
  });

  it("stop() emits unelected synchronously, leaves, and leaves no timer behind", async () => {
    const { clock, backend, election, events } = setup();
    await elect(clock, election);
    election.stop();
    assert.equal(events.at(-1)?.startsWith("unelected"), true);
    assert.equal(election.isRunning(), false);
    await election.leave();
    assert.deepEqual(backend.leaves, ["member-1"]);
    assert.equal(clock.pendingTimers, 0);
  });

  it("stop() sends the deletion at once, after unelected and before it unwinds the leader's own wait", async () => {
    const { clock, backend, election, events } = setup();
    await elect(clock, election);
    const seen: string[] = [];
    backend.onLeave = () =>
      seen.push(`unelected before: ${events.at(-1)?.startsWith("unelected")}, wait unwound before: ${backend.lossSignal?.aborted}`);
    election.stop();
    assert.deepEqual(seen, ["unelected before: true, wait unwound before: false"], "leave() called within stop()");
    assert.equal(backend.lossSignal?.aborted, false, "the wait is let go after this turn, once the deletion went out");
    await new Promise((resolve) => setImmediate(resolve));
    assert.equal(backend.lossSignal?.aborted, true, "and on the next one");
    await election.leave();
    assert.deepEqual(backend.leaves, ["member-1"], "and only once");
    assert.equal(clock.pendingTimers, 0);
  });

  it("a turn that comes after stop(), before the wait is let go, is not taken: no elected, and the membership is deleted", async () => {
    const { clock, backend, election, events } = await turnJustAfterStop("queue");
    assert.equal(election.isLeader(), false);
    assert.deepEqual(events.map((e) => e.split(" @")[0]), ["leader someone-else"]);
    assert.deepEqual(backend.leaves, ["member-1"]);
    assert.equal(clock.pendingTimers, 0);
  });

  it("a follower emits leader, and becomes leader only when its turn comes", async () => {
    const { clock, backend, election, events } = setup();
    backend.firstInLine = false;
    election.start();
    await clock.advance(0);
    assert.equal(election.isLeader(), false);
    assert.equal(election.currentLeader(), "someone-else");
    backend.grantTurn();
    await clock.advance(0);
    assert.equal(election.isLeader(), true);
    assert.equal(election.currentLeader(), "me");
    assert.deepEqual(events.map((e) => e.split(" @")[0]), ["leader someone-else", "elected 10"]);
    election.stop();
  });

  it("leads at once on a recent confirmed renewal, without another round trip", async () => {
    const { clock, backend, election } = setup();
    await elect(clock, election);
    assert.equal(backend.renewals, 0, "the join itself was the confirmation");
    election.stop();
  });

  it("renews before leading when its last confirmed renewal is older than the refresh interval", async () => {
    const { clock, backend, election, events } = setup();
    backend.firstInLine = false;
    election.start();
    await clock.advance(0);
    backend.renewAnswer = "fail";
    await clock.advance(6_000);
    backend.grantTurn();
    await clock.advance(0);
    assert.equal(election.isLeader(), false, "led on a membership it could not prove alive");
    backend.renewAnswer = "ok";
    await clock.advance(1_000);
    assert.equal(election.isLeader(), true);
    assert.ok(events.some((e) => e.startsWith("elected")));
    election.stop();
  });

  it("spreads the first renewal over the interval's second half, then keeps that phase", async () => {
    for (const [random, firstAt] of [[0, 5_000], [0.5, 3_750], [1, 2_500]] as const) {
      const { clock, backend, election } = setup("queue", () => random);
      const electedAt = await elect(clock, election);
      const renewedAt: number[] = [];
      for (let t = 0; t < 13_000; t += 250) {
        const before = backend.renewals;
        await clock.advance(250);
        if (backend.renewals > before) renewedAt.push(clock.now() - electedAt);
      }
      assert.deepEqual(renewedAt, [firstAt, firstAt + 5_000, firstAt + 10_000].filter((t) => t <= 13_000), `random ${random}`);
      election.stop();
    }
  });

  it("renews on a fixed schedule from each send, so a slow link does not push renewals past the deadline", async () => {
    const { clock, backend, election, events } = setup();
    // Answered 2 s after being sent: renewals sent every 5 s still land well
    // within the 8 s horizon.
    backend.renewLatency = 2_000;
    await elect(clock, election);
    await clock.advance(60_000);
    assert.equal(election.isLeader(), true);
    assert.deepEqual(events.filter((e) => e.startsWith("unelected")), []);
    assert.ok(backend.renewals >= 11, `${backend.renewals} renewals in 60 s`);
    election.stop();
  });

  it("steps down by the TTL the store applies when it is shorter than the one asked for", async () => {
    const { clock, backend, election, events } = setup();
    backend.ttlMs = 8_000; // horizon 8 s - 2 s margin = 6 s, not the 8 s a 10 s TTL gives
    const electedAt = await elect(clock, election);
    backend.renewAnswer = "hang";
    await clock.advance(5_999);
    assert.equal(election.isLeader(), true);
    await clock.advance(1);
    assert.equal(election.isLeader(), false);
    assert.deepEqual(events.filter((e) => e.startsWith("unelected")), [`unelected @${electedAt + 6_000}`]);
    election.stop();
  });

  it("never leads when the store keeps memberships too briefly for the options, and says why", async () => {
    const { clock, backend, election } = setup();
    backend.ttlMs = 6_000; // 6 s - 2 s margin is not longer than the 5 s refresh interval
    const errors: Error[] = [];
    election.on("error", (error) => errors.push(error));
    election.start();
    await clock.advance(0);
    assert.equal(election.isLeader(), false);
    assert.match(errors[0]?.message ?? "", /keeps member-1 for 6000 ms, too short for a refreshInterval of 5000 ms/);
    election.stop();
  });
});

describe("a race-style store", () => {
  it("renews only once the member has won, and counts the deadline from the winning write", async () => {
    const { clock, backend, election, events } = setup("race");
    backend.firstInLine = false;
    election.start();
    await clock.advance(20_000);
    assert.equal(backend.renewals, 0, "a member that has not won holds nothing to renew");
    backend.grantTurn();
    await clock.advance(0);
    const wonAt = clock.now();
    assert.equal(election.isLeader(), true);
    assert.equal(backend.renewals, 0, "the winning write itself was the confirmation");
    assert.equal(election.fencingToken(), 10);

    backend.renewAnswer = "hang";
    await clock.advance(7_999);
    assert.equal(election.isLeader(), true);
    await clock.advance(1);
    assert.equal(election.isLeader(), false);
    assert.deepEqual(events.filter((e) => /^(elected|unelected)/.test(e)), [`elected 10 @${wonAt}`, `unelected @${wonAt + 8_000}`]);
    election.stop();
  });

  it("gives back what it wins just after stop(), and does not lead on it", async () => {
    const { clock, backend, events } = await turnJustAfterStop("race");
    assert.equal(backend.wins, 1);
    assert.deepEqual(backend.leaves, ["won-1"]);
    assert.deepEqual(events.filter((e) => e.startsWith("elected")), []);
    assert.equal(clock.pendingTimers, 0);
  });

  it("competes again after losing, and leads on what it wins next", async () => {
    const { clock, backend, election } = setup("race");
    await elect(clock, election);
    backend.removeMembership();
    await clock.advance(1_000);
    assert.equal(backend.wins, 2);
    assert.equal(election.fencingToken(), 20);
    await election.leave();
    assert.deepEqual(backend.leaves, ["won-1", "won-2"]);
    assert.equal(clock.pendingTimers, 0);
  });
});
