// election.health() on a hand-driven clock: when a member counts as wedged
// (failing with no success in between for longer than the bound), what makes
// it live again, readiness in both modes, and bad options refused. The
// probes against real stores, over HTTP, are in test/election/health.test.ts.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { Election } from "../../src/election/election";
import { resolveOptions } from "../../src/election/options";
import { FakeClock, settle } from "../kit/fake-clock";
import { ScriptedBackend } from "../kit/scripted-backend";

// TTL 10 s: the default bound is 60 s (three TTLs are 30 s).
const options = resolveOptions(10, { retryInitialDelay: 100, retryMaxDelay: 1000 });

function setup(style: "queue" | "race" = "queue") {
  const clock = new FakeClock();
  const backend = new ScriptedBackend(style);
  backend.clock = clock;
  const election = new Election(backend, "me", options, clock, () => 0);
  election.on("error", () => undefined);
  return { clock, backend, election };
}

describe("election.health()", () => {
  it("a stopped member is live (nothing to be wedged) and not ready", () => {
    const { election } = setup();
    const health = election.health();
    assert.deepEqual([health.running, health.state, health.live.ok, health.ready.ok], [false, "stopped", true, false]);
    assert.match(health.ready.reason, /stopped/);
  });

  it("a follower is ready by default, and not with readiness \"leader\", whose reason names the leader", async () => {
    const { clock, backend, election } = setup();
    backend.firstInLine = false;
    election.start();
    await settle();
    await clock.advance(0);
    const member = election.health();
    assert.deepEqual([member.state, member.leading, member.live.ok, member.ready.ok, member.leader], ["following", false, true, true, "someone-else"]);
    assert.equal(member.failingForMs, 0);
    assert.equal(typeof member.sinceConfirmedMs, "number");
    const leaderOnly = election.health({ readiness: "leader" });
    assert.equal(leaderOnly.ready.ok, false);
    assert.match(leaderOnly.ready.reason, /someone-else leads/);
    backend.grantTurn();
    await clock.advance(0);
    const leading = election.health({ readiness: "leader" });
    assert.deepEqual([leading.leading, leading.ready.ok, leading.fencingToken], [true, true, 10]);
    election.stop();
  });

  it("turns not live once joins have failed for longer than the bound, and live again at the first success", async () => {
    const { clock, backend, election } = setup();
    const join = backend.join!;
    backend.join = async () => {
      throw new Error("connection refused");
    };
    election.start();
    await settle();
    await clock.advance(0);
    let health = election.health({ unhealthyAfter: 5_000 });
    assert.equal(health.state, "backing-off");
    assert.equal(health.live.ok, true, "one failure is not a wedge");
    assert.match(health.live.reason, /connection refused/);
    await clock.advance(4_000);
    assert.equal(election.health({ unhealthyAfter: 5_000 }).live.ok, true);
    await clock.advance(1_500);
    health = election.health({ unhealthyAfter: 5_000 });
    assert.equal(health.live.ok, false);
    assert.ok(health.failingForMs >= 5_000, `failing for ${health.failingForMs} ms`);
    assert.match(health.live.reason, /failing for 5\.\d s .*connection refused.*past the 5\.0 s bound/);
    assert.equal(election.health().live.ok, true, "the default bound (60 s) is not passed yet");
    backend.join = join;
    await clock.advance(1_000);
    health = election.health({ unhealthyAfter: 5_000 });
    assert.deepEqual([health.live.ok, health.failingForMs, health.lastError, health.state], [true, 0, undefined, "leading"]);
    election.stop();
  });

  it("a leader whose renewals fail is failing from the first failure; a confirmed renewal ends it", async () => {
    const { clock, backend, election } = setup();
    election.start();
    await settle();
    await clock.advance(0);
    backend.renewAnswer = "fail";
    await clock.advance(5_500);
    const failing = election.health({ unhealthyAfter: 1_000 });
    assert.ok(failing.failingForMs > 0, "a renewal failed");
    backend.renewAnswer = "ok";
    await clock.advance(1_500);
    assert.equal(election.health({ unhealthyAfter: 1_000 }).failingForMs, 0);
    election.stop();
  });

  it("on a race-style store, a follower's leader report counts as the store answering", async () => {
    const { clock, backend, election } = setup("race");
    backend.turnAnswer = "fail";
    election.start();
    await settle();
    await clock.advance(0);
    assert.ok(election.health().failingForMs >= 0 && election.health().lastError !== undefined);
    backend.turnAnswer = "ok";
    backend.firstInLine = false;
    await clock.advance(2_000);
    const health = election.health();
    assert.deepEqual([health.lastError, health.failingForMs, health.leader], [undefined, 0, "someone-else"]);
    election.stop();
  });

  it("refuses bad options with an error naming the value, and changes nothing", () => {
    const { election } = setup();
    assert.throws(() => election.health({ readiness: "follower" as "leader" }), { name: "RangeError", message: /readiness must be "member" or "leader", got "follower"/ });
    assert.throws(() => election.health({ unhealthyAfter: -1 }), { name: "RangeError", message: /unhealthyAfter .* got -1/ });
    assert.throws(() => election.health({ unhealthyAfter: Number.NaN }), RangeError);
    assert.throws(() => election.health({ readyness: "leader" } as object), { name: "TypeError", message: /unknown option "readyness"/ });
    assert.throws(() => election.health("leader" as unknown as object), { name: "TypeError", message: /options must be an object/ });
    assert.equal(election.isRunning(), false);
  });
});
