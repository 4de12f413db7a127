// A caller's options and AbortSignals, as the promise-shaped API takes them:
// a signal aborted at any moment (before the call, inside the callback that
// starts the work, after it) ends what it was given to, a bad one is refused
// before anything changes, and a scope run many times in one term leaves no
// listener behind. The elections run on the README's in-memory example
// backend: the subject is the API's handling of signals, not a store.
import assert from "node:assert/strict";
import { getEventListeners } from "node:events";
import { afterEach, describe, it } from "node:test";
import etcdLeader = require("../../src/index");
import { MemoryBackend, MemoryStore } from "../../examples/in-memory-backend";
import { sleep, waitFor, withDeadline } from "../kit/waiting";

const BOUND_MS = 5_000;

const elections = new Set<etcdLeader.Election>();
const observers = new Set<etcdLeader.LeaderObserver>();
afterEach(async () => {
  for (const observer of observers) observer.stop();
  observers.clear();
  await withDeadline(Promise.all([...elections].map((e) => e.leave())), BOUND_MS, "the members to leave");
  elections.clear();
});

function member(store: MemoryStore, name: string): etcdLeader.Election {
  const election = etcdLeader.withBackend(new MemoryBackend(store, name, 2_000) as etcdLeader.ElectionBackend, name, { ttl: 2 });
  elections.add(election);
  return election;
}

function isAbortError(err: unknown): boolean {
  assert.ok(err instanceof Error || err instanceof DOMException, `not an error: ${String(err)}`);
  assert.equal((err as Error).name, "AbortError");
  return true;
}

describe("a caller's signal aborted in the turn a term begins", () => {
  it("whileLeading(): aborted inside an `elected` listener, the routine does not run and the call rejects with an AbortError", async () => {
    const a = member(new MemoryStore(), "a");
    const caller = new AbortController();
    a.once("elected", () => caller.abort(new Error("shutting down")));
    let ran = false;
    const scope = a.whileLeading(async ({ signal }) => {
      ran = true;
      await new Promise((resolve) => signal.addEventListener("abort", resolve, { once: true }));
    }, { signal: caller.signal });
    await withDeadline(assert.rejects(scope, isAbortError), BOUND_MS, "whileLeading() to settle");
    assert.equal(ran, false);
    // It joined for itself, so it left.
    assert.equal(a.isRunning(), false);
  });

  it("whileLeading(): aborted by the routine's first synchronous step, its signal aborts and the call settles", async () => {
    const a = member(new MemoryStore(), "a");
    a.start();
    await waitFor("a to lead", BOUND_MS, () => a.isLeader());
    const caller = new AbortController();
    const scope = a.whileLeading(async ({ signal }) => {
      caller.abort(new Error("changed my mind"));
      assert.equal(signal.aborted, true);
    }, { signal: caller.signal });
    await withDeadline(assert.rejects(scope, isAbortError), BOUND_MS, "whileLeading() to settle");
    assert.ok(a.isLeader(), "the election it did not start goes on");
  });

  it("whenElected(): aborted inside an `elected` listener, it still settles", async () => {
    const a = member(new MemoryStore(), "a");
    const caller = new AbortController();
    a.once("elected", () => caller.abort());
    const token = await withDeadline(a.whenElected({ signal: caller.signal }).catch((err: unknown) => err), BOUND_MS, "whenElected()");
    // Elected first, then aborted: either outcome is a settled promise; it must not hang.
    assert.ok(typeof token === "number" || isAbortError(token));
  });

  it("leaderChanges(): aborted inside an `elected` listener, the next read rejects with an AbortError", async () => {
    const a = member(new MemoryStore(), "a");
    const caller = new AbortController();
    const changes = a.leaderChanges({ signal: caller.signal });
    a.once("elected", () => caller.abort());
    a.start();
    const seen: unknown[] = [];
    await withDeadline(
      assert.rejects(
        (async () => {
          for await (const leader of changes) seen.push(leader);
        })(),
        isAbortError,
      ),
      BOUND_MS,
      "the iteration to end",
    );
  });
});

describe("signals that have aborted already", () => {
  it("leaderChanges() returns an iterator whose first read rejects with an AbortError", async () => {
    const a = member(new MemoryStore(), "a");
    const changes = a.leaderChanges({ signal: AbortSignal.abort(new Error("before")) });
    await assert.rejects(changes.next(), isAbortError);
    assert.deepEqual(await changes.next(), { value: undefined, done: true });
  });

  it("observer.changes() returns an iterator whose first read rejects with an AbortError, and starts nothing", async () => {
    const observer = etcdLeader.observeBackend(new MemoryBackend(new MemoryStore(), "o") as etcdLeader.ElectionBackend);
    observers.add(observer);
    const changes = observer.changes({ signal: AbortSignal.abort() });
    await assert.rejects(changes.next(), isAbortError);
    assert.equal(observer.isRunning(), false);
  });

  it("observer.changes() on an observer an earlier iterator started: the early end lets it stop when that one ends", async () => {
    const observer = etcdLeader.observeBackend(new MemoryBackend(new MemoryStore(), "o") as etcdLeader.ElectionBackend);
    observers.add(observer);
    const first = observer.changes();
    assert.equal(observer.isRunning(), true);
    const second = observer.changes({ signal: AbortSignal.abort() });
    await assert.rejects(second.next(), isAbortError);
    await first.return();
    assert.equal(observer.isRunning(), false);
  });
});

describe("options and signals that are not what they claim to be", () => {
  const notSignals: Array<[string, unknown]> = [
    ["an empty object", {}],
    ["a string", "abort"],
    ["null", null],
    ["an AbortController instead of its signal", new AbortController()],
  ];

  for (const [what, signal] of notSignals) {
    it(`start({ signal: ${what} }) throws a TypeError and changes nothing; start() then joins`, async () => {
      const a = member(new MemoryStore(), "a");
      assert.throws(() => a.start({ signal } as never), { name: "TypeError", message: /start\(\): signal must be an AbortSignal/ });
      assert.equal(a.isRunning(), false);
      assert.equal(a.state, "stopped");
      a.start();
      await waitFor("a to lead", BOUND_MS, () => a.isLeader());
    });
  }

  it("start(options) with options that are not an object throws a TypeError and changes nothing", () => {
    const a = member(new MemoryStore(), "a");
    assert.throws(() => a.start("now" as never), { name: "TypeError", message: /start\(\): options must be an object, got the string "now"/ });
    assert.equal(a.isRunning(), false);
  });

  it("whileLeading(), whenElected(), leaderChanges() and the observer refuse a bad signal before they start anything", async () => {
    const a = member(new MemoryStore(), "a");
    await assert.rejects(a.whileLeading(() => 1, { signal: {} as never }), { name: "TypeError", message: /whileLeading\(\): signal must be an AbortSignal/ });
    await assert.rejects(a.whenElected({ signal: 5 as never }), { name: "TypeError", message: /whenElected\(\): signal must be an AbortSignal, got number 5/ });
    assert.throws(() => a.leaderChanges({ signal: {} as never }), { name: "TypeError", message: /leaderChanges\(\): signal must be an AbortSignal/ });
    assert.equal(a.isRunning(), false);
    const observer = etcdLeader.observeBackend(new MemoryBackend(new MemoryStore(), "o") as etcdLeader.ElectionBackend);
    observers.add(observer);
    assert.throws(() => observer.start({ signal: {} as never }), /observer\.start\(\): signal must be an AbortSignal/);
    assert.throws(() => observer.changes({ signal: {} as never }), /observer\.changes\(\): signal must be an AbortSignal/);
    assert.equal(observer.isRunning(), false);
  });
});

describe("whileLeading() run many times in one term", () => {
  it("leaves no listener on the term's signal once each run settles", async () => {
    const warnings: Error[] = [];
    const onWarning = (warning: Error) => warnings.push(warning);
    process.on("warning", onWarning);
    try {
      const a = member(new MemoryStore(), "a");
      a.start();
      await waitFor("a to lead", BOUND_MS, () => a.isLeader());
      const termSignal = (a as unknown as { term: { signal: AbortSignal } }).term.signal;
      const before = getEventListeners(termSignal, "abort").length;
      const caller = new AbortController();
      for (let i = 0; i < 30; i++) {
        assert.equal(await a.whileLeading(() => i, { signal: caller.signal }), i);
      }
      assert.equal(getEventListeners(termSignal, "abort").length, before);
      assert.equal(getEventListeners(caller.signal, "abort").length, 0);
      await sleep(10);
      assert.deepEqual(
        warnings.filter((w) => w.name === "MaxListenersExceededWarning").map((w) => w.message),
        [],
      );
    } finally {
      process.off("warning", onWarning);
    }
  });
});
