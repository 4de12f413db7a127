// What a backend of the user's own answers is checked where it crosses into
// the election: a claim that breaks the contract is an `error` event naming
// the backend and the field and is never led on, a join that never settles
// does not hold up leave(), and a leader reported to a member that leads is
// not news. The backends are the README's in-memory example, broken on
// purpose, and small ones written here: the subject is the state machine's
// boundary, not a store.
import assert from "node:assert/strict";
import { afterEach, describe, it } from "node:test";
import etcdLeader = require("../../src/index");
import { MemoryBackend, MemoryStore } from "../../examples/in-memory-backend";
import { CLAIM_RULES } from "../contract/conformance/claim-cases";
import { sleep, waitFor, withDeadline } from "../kit/waiting";

type Claim = etcdLeader.Claim;
type Backend = etcdLeader.ElectionBackend;

const TTL_MS = 2_000;
/** Long enough for a healthy member of the toy store to be elected many times over. */
const NOT_ELECTED_MS = 400;

/** A wait that ends only when its signal aborts: a watch that never sees anything. */
const untilAborted = (signal: AbortSignal) => new Promise<never>((_, reject) => signal.addEventListener("abort", () => reject(signal.reason)));

/** What a toy backend written here does when the test is not about it: renews, never loses, leaves, observes nothing. */
const QUIET = {
  async renew() {},
  awaitLoss: (_membership: unknown, signal: AbortSignal) => untilAborted(signal),
  async leave() {},
  observe: (_onLeader: unknown, signal: AbortSignal) => untilAborted(signal),
  async readLeader() {
    return undefined;
  },
} satisfies Partial<Backend>;

const elections = new Set<etcdLeader.Election>();
afterEach(async () => {
  await withDeadline(Promise.all([...elections].map((e) => e.leave())), 10_000, "the members to leave");
  elections.clear();
});

/**
 * The example backend, with what its winning awaitTurn answers passed
 * through `breakClaim`, and what it answers when handed a claim back through
 * `breakHeld`.
 */
function brokenToy(
  description: string,
  breakClaim: (claim: Claim) => unknown,
  breakHeld: (claim: Claim) => unknown = (claim) => claim,
  breakRenewal: (sentAt: number) => unknown = () => undefined,
): { backend: Backend; store: MemoryStore } {
  const store = new MemoryStore();
  const toy = new MemoryBackend(store, "a", TTL_MS);
  const backend: Backend = {
    description,
    async awaitTurn(held, onLeader, signal) {
      const claim = await toy.awaitTurn(held as never, onLeader, signal);
      return (held ? breakHeld(claim) : breakClaim(claim)) as Claim;
    },
    async renew(membership) {
      const sentAt = performance.now();
      await toy.renew(membership as never);
      return breakRenewal(sentAt) as etcdLeader.Renewed | undefined;
    },
    awaitLoss: (membership, signal) => toy.awaitLoss(membership as never, signal),
    leave: (membership) => toy.leave(membership as never),
    observe: (onLeader, signal) => toy.observe(onLeader, signal),
    readLeader: () => toy.readLeader(),
  };
  return { backend, store };
}

function member(backend: Backend, name = "a", options: etcdLeader.ElectionOptions = { ttl: TTL_MS / 1000 }) {
  const election = etcdLeader.withBackend(backend, name, options);
  elections.add(election);
  const errors: etcdLeader.ElectionError[] = [];
  const elected: number[] = [];
  const leaders: string[] = [];
  election.on("error", (error) => errors.push(error));
  election.on("elected", (token) => elected.push(token));
  election.on("leader", (leader) => leaders.push(leader));
  return { election, errors, elected, leaders };
}

/** Records process warnings (a TimeoutOverflowWarning, a MaxListenersExceededWarning) while a case runs. */
function recordWarnings(): { warnings: Error[]; stop(): void } {
  const warnings: Error[] = [];
  const onWarning = (warning: Error) => warnings.push(warning);
  process.on("warning", onWarning);
  return { warnings, stop: () => process.off("warning", onWarning) };
}

describe("claims that break the contract are reported and never led on", () => {
  const cases: Array<{ field: string; title: string; breakClaim: (claim: Claim) => unknown; message: RegExp }> = [
    {
      field: "sentAt",
      title: "sentAt taken from Date.now() (another clock)",
      breakClaim: (claim) => ({ ...claim, sentAt: Date.now() }),
      message: /toy store answered with a claim whose sentAt .* is later than now .*Date\.now\(\) is another clock/,
    },
    {
      field: "sentAt",
      title: "sentAt older than the TTL",
      breakClaim: (claim) => ({ ...claim, sentAt: claim.sentAt - 2 * TTL_MS }),
      message: /claim whose sentAt is \d+ ms ago, at least the ttlMs of 2000 ms/,
    },
    {
      field: "token",
      title: 'token "abc"',
      breakClaim: (claim) => ({ ...claim, token: "abc" }),
      message: /claim whose token is "abc", not a finite number/,
    },
    { field: "token", title: "token NaN", breakClaim: (claim) => ({ ...claim, token: NaN }), message: /claim whose token is NaN/ },
    {
      field: "token",
      title: "token missing",
      breakClaim: (claim) => ({ ...claim, token: undefined }),
      message: /claim whose token is undefined/,
    },
    {
      field: "membership.id",
      title: "a membership without an id",
      breakClaim: (claim) => ({ ...claim, membership: { revision: (claim.membership as unknown as { revision: number }).revision } }),
      message: /claim whose membership\.id is undefined, not a non-empty string/,
    },
    {
      field: "membership",
      title: "no membership",
      breakClaim: (claim) => ({ ...claim, membership: undefined }),
      message: /claim whose membership is undefined, not an object with an id/,
    },
    { field: "ttlMs", title: "ttlMs 0", breakClaim: (claim) => ({ ...claim, ttlMs: 0 }), message: /claim whose ttlMs is 0/ },
    {
      field: "ttlMs",
      title: "ttlMs Infinity",
      breakClaim: (claim) => ({ ...claim, ttlMs: Infinity }),
      message: /claim whose ttlMs is Infinity, not a positive finite number/,
    },
    { field: "claim", title: "no claim at all", breakClaim: () => undefined, message: /claim whose claim itself is undefined/ },
  ];

  for (const { field, title, breakClaim, message } of cases) {
    it(`${title}: an error event names the backend and ${field}, no term begins, and stop() is clean`, async () => {
      const warnings = recordWarnings();
      const unhandled: unknown[] = [];
      const onUnhandled = (reason: unknown) => unhandled.push(reason);
      process.on("unhandledRejection", onUnhandled);
      try {
        const { backend, store } = brokenToy("toy store", breakClaim);
        const a = member(backend);
        a.election.start();
        await waitFor("an error event", 5_000, () => a.errors.length > 0);
        await sleep(NOT_ELECTED_MS);
        assert.deepEqual(a.elected, [], "a term began on a claim that breaks the contract");
        assert.equal(a.election.isLeader(), false);
        const error = a.errors[0]!;
        assert.equal(error.phase, "wait");
        assert.match(error.message, message);
        assert.equal((error.cause as etcdLeader.InvalidClaimError).name, "InvalidClaimError");
        assert.equal((error.cause as etcdLeader.InvalidClaimError).field, field);
        await a.election.leave();
        // What the bad claim held on the store was given back, where it named something to give back.
        if (field !== "membership" && field !== "claim") assert.equal(store.current(), undefined);
        await sleep(50);
        assert.deepEqual(unhandled, []);
        assert.deepEqual(
          warnings.warnings.map((w) => w.name),
          [],
        );
      } finally {
        warnings.stop();
        process.off("unhandledRejection", onUnhandled);
      }
    });
  }

  it("a queue-style join whose claim breaks a rule is given back, reported in the join phase, and retried", async () => {
    let joins = 0;
    const left: string[] = [];
    const backend: Backend = {
      description: "queue toy",
      async join() {
        joins++;
        // The first join comes back on the wrong clock; the second is right.
        return { membership: { id: `m${joins}` }, token: joins, sentAt: joins === 1 ? Date.now() : performance.now(), ttlMs: TTL_MS };
      },
      async awaitTurn(held) {
        return held!;
      },
      ...QUIET,
      async leave(membership) {
        left.push(membership.id);
      },
    };
    const a = member(backend);
    a.election.start();
    await waitFor("a to lead", 5_000, () => a.election.isLeader());
    assert.deepEqual(a.elected, [2]);
    assert.equal(a.errors[0]?.phase, "join");
    assert.match(a.errors[0]!.message, /queue toy answered with a claim whose sentAt/);
    assert.ok(left.includes("m1"), "the membership of the refused claim was not given back");
  });

  it("awaitTurn handed a place in line must resolve with that membership and token", async () => {
    const backend: Backend = {
      description: "queue toy",
      async join() {
        return { membership: { id: "mine" }, token: 7, sentAt: performance.now(), ttlMs: TTL_MS };
      },
      async awaitTurn() {
        return { membership: { id: "someone-else" }, token: 3, sentAt: performance.now(), ttlMs: TTL_MS };
      },
      ...QUIET,
    };
    const a = member(backend);
    a.election.start();
    await waitFor("an error event", 5_000, () => a.errors.length > 0);
    await sleep(NOT_ELECTED_MS);
    assert.deepEqual(a.elected, []);
    assert.match(a.errors[0]!.message, /claim whose membership\.id is "someone-else", but awaitTurn was handed "mine"/);
  });
});

describe("renewals that answer with a send time that breaks the contract", () => {
  const cases: Array<{ title: string; breakRenewal: (sentAt: number) => unknown; message: RegExp }> = [
    {
      title: "a sentAt from Date.now() (another clock)",
      breakRenewal: () => ({ sentAt: Date.now() }),
      message: /toy store answered a renewal with a sentAt that \(\d+\) is later than now .*Date\.now\(\) is another clock\); it extends no term/,
    },
    {
      title: "a sentAt before the claim's",
      breakRenewal: (sentAt) => ({ sentAt: sentAt - 10 * TTL_MS }),
      message: /toy store answered a renewal with a sentAt that \(-?[\d.]+\) is earlier than the send time of the membership's newest write confirmed before/,
    },
    {
      title: "a sentAt that is NaN",
      breakRenewal: () => ({ sentAt: NaN }),
      message: /toy store answered a renewal with a sentAt that is NaN, not a finite performance\.now\(\) time/,
    },
    {
      title: "an answer that is a number",
      breakRenewal: (sentAt) => sentAt,
      message: /toy store answered a renewal with [\d.]+, not undefined or \{ sentAt \}; it extends no term/,
    },
  ];

  for (const { title, breakRenewal, message } of cases) {
    it(`${title}: an error event names sentAt, and the leader steps down by the deadline of its last good write`, async () => {
      const { backend } = brokenToy("toy store", (claim) => claim, (claim) => claim, breakRenewal);
      const a = member(backend, "a", { ttl: TTL_MS / 1000, refreshInterval: 300 });
      let electedAt = 0;
      let unelectedAt = 0;
      a.election.on("elected", () => (electedAt = performance.now()));
      a.election.on("unelected", () => (unelectedAt = performance.now()));
      a.election.start();
      await waitFor("a renewal to be reported", 5_000, () => a.errors.some((e) => e.phase === "renew"));
      const error = a.errors.find((e) => e.phase === "renew")!;
      assert.match(error.message, message);
      const cause = error.cause as etcdLeader.InvalidClaimError;
      assert.equal(cause.name, "InvalidClaimError");
      assert.equal(cause.answer, "renewal");
      // Renewals keep failing the check: none extends the term, which ends at
      // the claim's send time plus the TTL less the step-down margin.
      await waitFor("a to step down", 5_000, () => unelectedAt > 0);
      assert.ok(electedAt > 0, "a was never elected");
      assert.ok(unelectedAt - electedAt < TTL_MS, `a led for ${Math.round(unelectedAt - electedAt)} ms, beyond the TTL its claim gave`);
    });
  }
});

describe("a join that never settles", () => {
  function hangingJoin(): Backend {
    return {
      description: "hanging toy",
      // Ignores its signal: never settles.
      join: () => new Promise<Claim>(() => undefined),
      awaitTurn: async (held) => held!,
      ...QUIET,
    };
  }

  it("is reported as a request timeout, and leave() settles within the request timeout", async () => {
    const a = member(hangingJoin(), "a", { ttl: 2, requestTimeout: 300 });
    a.election.start();
    await waitFor("an error event", 5_000, () => a.errors.length > 0);
    assert.equal(a.errors[0]!.phase, "join");
    assert.match(a.errors[0]!.message, /join: the store did not answer within the request timeout/);
    const leaving = a.election.leave();
    await withDeadline(leaving, 2_000, "leave() while the join hangs");
  });

  it("whenElected() with a signal that times out rejects, and the election it joined is left", async () => {
    const a = member(hangingJoin(), "a", { ttl: 2, requestTimeout: 300 });
    await withDeadline(
      assert.rejects(a.election.whenElected({ signal: AbortSignal.timeout(200) }), { name: "AbortError" }),
      3_000,
      "whenElected() while the join hangs",
    );
    assert.equal(a.election.isRunning(), false);
    await withDeadline(a.election[Symbol.asyncDispose](), 2_000, "asyncDispose while the join hangs");
  });

  it("a join answered after the timeout is given back", async () => {
    const left: string[] = [];
    let answer: ((claim: Claim) => void) | undefined;
    const backend: Backend = {
      ...hangingJoin(),
      join: () => new Promise<Claim>((resolve) => (answer = resolve)),
      async leave(membership) {
        left.push(membership.id);
      },
    };
    const a = member(backend, "a", { ttl: 2, requestTimeout: 200 });
    a.election.start();
    await waitFor("the join to time out", 5_000, () => a.errors.length > 0);
    answer!({ membership: { id: "late" }, token: 1, sentAt: performance.now(), ttlMs: TTL_MS });
    await waitFor("the late membership to be given back", 2_000, () => left.includes("late"));
  });
});

describe("leader reports", () => {
  it("a leader reported after the turn came is not emitted by the member that leads", async () => {
    let report: etcdLeader.LeaderListener | undefined;
    const backend: Backend = {
      description: "chatty toy",
      async awaitTurn(held, onLeader) {
        report = onLeader;
        return held ?? { membership: { id: "k" }, token: 1, sentAt: performance.now(), ttlMs: TTL_MS };
      },
      ...QUIET,
    };
    const a = member(backend);
    a.election.start();
    await waitFor("a to lead", 5_000, () => a.election.isLeader());
    report!({ name: "b", token: 2 });
    await sleep(20);
    assert.deepEqual(a.leaders, []);
    assert.equal(a.election.currentLeader(), "a");
  });

  it("a malformed leader report is an error event, and is not emitted", async () => {
    const backend: Backend = {
      description: "garbled toy",
      async awaitTurn(_held, onLeader, signal) {
        onLeader({ name: 42, token: "x" } as never);
        onLeader({ name: "b", token: 2 });
        return untilAborted(signal);
      },
      ...QUIET,
    };
    const a = member(backend);
    a.election.start();
    await waitFor("b named", 5_000, () => a.leaders.length > 0);
    assert.deepEqual(a.leaders, ["b"]);
    assert.match(a.errors[0]!.message, /garbled toy reported a leader that has a name that is 42, not a string; it is ignored/);
  });
});

describe("the conformance suite's claim cases fail a backend that breaks their rule, naming the field", () => {
  const broken: Record<
    string,
    { breakClaim?: (claim: Claim) => unknown; breakHeld?: (claim: Claim) => unknown; breakRenewal?: (sentAt: number) => unknown; message: RegExp }
  > = {
    "a claim's membership is an object with a non-empty string id": {
      breakClaim: (claim) => ({ ...claim, membership: { revision: 1 } }),
      message: /the claim's membership\.id is undefined/,
    },
    "a claim's token is a finite number, larger than the token of the claim before it": {
      breakClaim: (claim) => ({ ...claim, token: "abc" }),
      message: /the claim's token is abc, not a finite number/,
    },
    "a claim's sentAt is performance.now() taken during the call that made it": {
      breakClaim: (claim) => ({ ...claim, sentAt: Date.now() }),
      message: /the claim's sentAt is \d+, outside the call that made it/,
    },
    "a claim's ttlMs is the positive, finite number of milliseconds the store keeps it": {
      breakClaim: (claim) => ({ ...claim, ttlMs: -1 }),
      message: /the claim's ttlMs is -1, not a positive finite number/,
    },
    "a new claim passes the checks the election makes before it leads on it": {
      breakClaim: (claim) => ({ ...claim, sentAt: claim.sentAt - 10 * TTL_MS }),
      message: /the claim's sentAt is \d+ ms ago, at least the ttlMs/,
    },
    "a renewal answers with nothing, or with a sentAt between the claim's and its own answer": {
      breakRenewal: () => ({ sentAt: Date.now() }),
      message: /the renewal's sentAt \(\d+\) is later than now/,
    },
    "awaitTurn handed a claim resolves with that membership and token": {
      breakHeld: (claim) => ({ ...claim, token: claim.token + 1 }),
      message: /the claim's token is \d+, but the membership awaitTurn was handed carries \d+/,
    },
  };

  it("every rule has a broken backend here", () => {
    assert.deepEqual(CLAIM_RULES.map((rule) => rule.title).sort(), Object.keys(broken).sort());
  });

  for (const rule of CLAIM_RULES) {
    it(rule.title, async () => {
      const { breakClaim = (claim: Claim) => claim, breakHeld, breakRenewal, message } = broken[rule.title]!;
      // The example backend keeps the rule: the case passes on it.
      await rule.check(brokenToy("toy store", (claim) => claim).backend);
      await assert.rejects(rule.check(brokenToy("toy store", breakClaim, breakHeld, breakRenewal).backend), message);
    });
  }
});
