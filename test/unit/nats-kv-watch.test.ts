// The NATS KV recipe's watch of the election key (src/stores/nats-kv/watch.ts)
// on a bucket in memory behind the port and a hand-driven clock: a wait for
// the next entry or a moment, the arrival times it stamps, and what it can
// say of the values written before an entry.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { RequestTimeoutError } from "../../src/contract/errors";
import type { KvWatch } from "../../src/stores/nats-kv/port";
import { KeyWatch } from "../../src/stores/nats-kv/watch";
import { MAX_TIMER_MS } from "../../src/util/clock";
import type { KeyState } from "../../src/stores/nats-kv/key-state";
import { FakeClock, settle } from "../kit/fake-clock";
import { NatsKvStore } from "../sim/stores/nats-kv";

const KEY = "leader";

async function watching(): Promise<{ kv: NatsKvStore; clock: FakeClock; watch: KeyWatch; openedAt: number }> {
  const clock = new FakeClock();
  const kv = new NatsKvStore({ now: () => clock.now() });
  const watch = await KeyWatch.open(kv, KEY, clock, AbortSignal.timeout(5_000), 1_000);
  return { kv, clock, watch, openedAt: clock.now() };
}

describe("the NATS KV key watch", () => {
  it("gives the next entry, stamped with its arrival on the clock, or nothing once the moment came first", async () => {
    const { kv, clock, watch } = await watching();
    let got: KeyState | undefined | "waiting" = "waiting";
    void watch.next(clock.now() + 100, AbortSignal.timeout(5_000)).then((entry) => (got = entry));
    await clock.advance(40);
    kv.put(KEY, "a");
    await settle();
    assert.deepEqual(got, { name: "a", revision: 1, seenAt: clock.now() });
    assert.equal(clock.pendingTimers, 0, "the wait's timer outlived it");
    got = "waiting";
    const dueAt = clock.now() + 100;
    void watch.next(dueAt, AbortSignal.timeout(5_000)).then((entry) => (got = entry));
    await clock.advance(99);
    assert.equal(got, "waiting");
    await clock.advance(1);
    assert.equal(got, undefined);
    assert.equal(clock.pendingTimers, 0);
  });

  it("waits longer than a timer can hold in steps a timer can hold", async () => {
    const { clock, watch } = await watching();
    const asked: number[] = [];
    const setTimer = clock.setTimeout.bind(clock);
    clock.setTimeout = (callback, ms) => {
      asked.push(ms);
      return setTimer(callback, ms);
    };
    let settled = false;
    void watch.next(clock.now() + MAX_TIMER_MS + 10, AbortSignal.timeout(5_000)).then(() => (settled = true));
    await clock.advance(MAX_TIMER_MS);
    assert.equal(settled, false);
    await clock.advance(10);
    assert.equal(settled, true);
    assert.deepEqual(asked, [MAX_TIMER_MS, 10], "a Node.js timer fires a longer delay after 1 ms");
  });

  it("tells by when every value before an entry was written: the arrival of the entry before it, a marker too, or the opening", async () => {
    const { kv, clock, watch, openedAt } = await watching();
    const first = kv.put(KEY, "a");
    assert.equal(watch.valueWrittenBefore(first), "pending");
    await settle();
    assert.equal(watch.valueWrittenBefore(first), openedAt, "no value came before it: one not delivered was written before the opening");
    await clock.advance(500);
    const aArrived = clock.now() - 500;
    const marker = kv.remove(KEY);
    await settle();
    const markerArrived = clock.now();
    await clock.advance(500);
    // A write to another key of the bucket: a revision this watch never sees.
    const elsewhere = kv.put("other", "x");
    const second = kv.put(KEY, "b");
    await settle();
    assert.equal(watch.valueWrittenBefore(marker), aArrived);
    // The bucket keeps one entry per key: a value written just before the
    // marker can be gone before it is delivered, and only the marker bounds it.
    assert.equal(watch.valueWrittenBefore(second), markerArrived, "the marker's arrival bounds a value it replaced");
    assert.equal(watch.valueWrittenBefore(elsewhere), "unknown", "the watch went past it");
    watch.close();
    assert.equal(watch.valueWrittenBefore(second + 1), "unknown", "a closed watch will not see it");
  });

  describe("opening", () => {
    /**
     * The store, with its first `unanswered` watch requests held back (a
     * consumer placed on a server that is down): `answer(i)` lets request i
     * through late.
     */
    function holdingBack(unanswered: number) {
      const clock = new FakeClock();
      const kv = new NatsKvStore({ now: () => clock.now() });
      const held: Array<() => void> = [];
      const watchNow = kv.watch.bind(kv);
      let asked = 0;
      kv.watch = (key: string) => {
        asked++;
        if (held.length >= unanswered) return watchNow(key);
        return new Promise<KvWatch>((resolve) => held.push(() => resolve(watchNow(key))));
      };
      return { clock, kv, asked: () => asked, answer: (i: number) => held[i]!() };
    }

    it("asks again after attemptMs when the server does not answer, and stops a watch that opens after it was given up", async () => {
      const { clock, kv, asked, answer } = holdingBack(1);
      let opened: KeyWatch | undefined;
      void KeyWatch.open(kv, KEY, clock, AbortSignal.timeout(5_000), 1_000).then((watch) => (opened = watch));
      await clock.advance(999);
      assert.equal(asked(), 1);
      await clock.advance(1);
      assert.equal(asked(), 2, "asked again once the first try's time was up");
      assert.ok(opened, "the second try was answered");
      assert.equal(kv.openWatches, 1);
      answer(0);
      await settle();
      assert.equal(kv.openWatches, 1, "the first try's watch, answered late, was stopped");
      kv.put(KEY, "a");
      await settle();
      assert.equal(opened.newest(1)?.name, "a", "the watch it gave sees writes");
      opened.close();
      assert.equal(clock.pendingTimers, 0);
    });

    it("gives up with a RequestTimeoutError after three tries go unanswered, and stops them if they open later", async () => {
      const { clock, kv, asked, answer } = holdingBack(3);
      const outcome: { error?: unknown } = {};
      void KeyWatch.open(kv, KEY, clock, AbortSignal.timeout(5_000), 1_000).catch((err: unknown) => (outcome.error = err));
      await clock.advance(2_999);
      assert.ok(!("error" in outcome), "gave up before the third try's time was up");
      assert.equal(asked(), 3);
      await clock.advance(1);
      const error = outcome.error;
      assert.ok(error instanceof RequestTimeoutError, `got ${String(error)}`);
      assert.match(error.message, /watch of the election key \(asked 3 times, 1000 ms each\)/);
      assert.equal(asked(), 3, "no fourth try");
      for (const i of [0, 1, 2]) answer(i);
      await settle();
      assert.equal(kv.openWatches, 0, "every try answered late was stopped");
      assert.equal(clock.pendingTimers, 0);
    });

    it("without attemptMs (one server), asks once and waits for as long as the client does", async () => {
      const { clock, kv, asked, answer } = holdingBack(1);
      let opened: KeyWatch | undefined;
      void KeyWatch.open(kv, KEY, clock, AbortSignal.timeout(5_000)).then((watch) => (opened = watch));
      await clock.advance(60_000);
      assert.equal(asked(), 1, "asked again");
      assert.equal(clock.pendingTimers, 0, "a timer bounds the wait");
      answer(0);
      await settle();
      assert.ok(opened, "the answer, however late, gives the watch");
      assert.equal(kv.openWatches, 1, "and it is not stopped");
      opened.close();
    });

    it("with a signal aborted already, rejects with its reason and asks for nothing", async () => {
      const { clock, kv, asked } = holdingBack(0);
      const reason = new Error("stopped before");
      for (const attemptMs of [1_000, undefined]) {
        await assert.rejects(KeyWatch.open(kv, KEY, clock, AbortSignal.abort(reason), attemptMs), (err) => err === reason);
      }
      assert.equal(asked(), 0);
      assert.equal(clock.pendingTimers, 0);
    });

    it("rejects with the signal's reason once it aborts, and stops the watch if it opens later", async () => {
      const { clock, kv, answer } = holdingBack(1);
      const controller = new AbortController();
      let outcome = "waiting" as unknown;
      void KeyWatch.open(kv, KEY, clock, controller.signal, 1_000).catch((err: unknown) => (outcome = err));
      await clock.advance(500);
      const reason = new Error("stopped");
      controller.abort(reason);
      await settle();
      assert.equal(outcome, reason);
      assert.equal(clock.pendingTimers, 0, "the try's timer outlived the abort");
      answer(0);
      await settle();
      assert.equal(kv.openWatches, 0);
    });
  });
});
