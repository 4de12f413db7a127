// UnaryCalls (src/stores/etcd-v3/etcd3/unary-calls.ts): how many unary calls
// one etcd3 client has in flight, the rest waiting in order. Pure logic.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { UnaryCalls } from "../../src/stores/etcd-v3/etcd3/unary-calls";

/** A call that settles when told. */
function pending() {
  let resolve!: (value: string) => void;
  let reject!: (err: Error) => void;
  const promise = new Promise<string>((res, rej) => ((resolve = res), (reject = rej)));
  return { promise, resolve, reject };
}

const settle = () => new Promise((resolve) => setImmediate(resolve));

describe("unary calls on one etcd3 client", () => {
  it("makes up to the limit at once and the rest in order as earlier ones settle, whether they succeed or fail", async () => {
    const calls = new UnaryCalls(2);
    const made: number[] = [];
    const answers = [pending(), pending(), pending(), pending()];
    const results = answers.map((answer, i) => calls.run(() => (made.push(i), answer.promise)));
    await settle();
    assert.deepEqual(made, [0, 1]);
    assert.deepEqual(calls.load, { inFlight: 2, waiting: 2 });
    answers[1]!.reject(new Error("no"));
    await assert.rejects(results[1]!, /no/);
    await settle();
    assert.deepEqual(made, [0, 1, 2]);
    answers[0]!.resolve("a");
    assert.equal(await results[0], "a");
    await settle();
    assert.deepEqual(made, [0, 1, 2, 3]);
    answers[2]!.resolve("c");
    answers[3]!.resolve("d");
    assert.deepEqual(await Promise.all(results.slice(2)), ["c", "d"]);
    assert.deepEqual(calls.load, { inFlight: 0, waiting: 0 });
  });

  it("drops a waiting call whose signal aborts: never made, rejected with the signal's reason", async () => {
    const calls = new UnaryCalls(1);
    const first = pending();
    const made: string[] = [];
    void calls.run(() => (made.push("first"), first.promise));
    const stop = new AbortController();
    const dropped = calls.run(() => (made.push("dropped"), Promise.resolve("x")), stop.signal);
    const after = calls.run(() => (made.push("after"), Promise.resolve("y")));
    stop.abort(new Error("gave up"));
    await assert.rejects(dropped, /gave up/);
    first.resolve("1");
    assert.equal(await after, "y");
    assert.deepEqual(made, ["first", "after"]);
    await assert.rejects(calls.run(() => Promise.resolve("z"), stop.signal), /gave up/);
  });

  it("a call that throws instead of returning a promise rejects, and frees its place", async () => {
    const calls = new UnaryCalls(1);
    await assert.rejects(calls.run(() => { throw new Error("bad request"); }), /bad request/);
    assert.equal(await calls.run(() => Promise.resolve("next")), "next");
  });
});
