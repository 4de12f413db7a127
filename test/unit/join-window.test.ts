// The join window (src/election/join-window.ts): how many joins a process
// sends at once, first come first served, grown by quick answers and halved
// by slow ones. Pure logic: no store, no timers.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { systemClock, type Clock } from "../../src/util/clock";
import {
  INITIAL_JOIN_WINDOW,
  JoinWindow,
  joinWindowFor,
  MIN_JOIN_WINDOW,
  type JoinSlot,
} from "../../src/election/join-window";

const TIMEOUT = 1000;
const never = new AbortController().signal;

/** Enters `count` joins; returns the slots handed out and the promises of those still waiting. */
function enterMany(window: JoinWindow, count: number, signal = never) {
  const slots: JoinSlot[] = [];
  const pending = Array.from({ length: count }, () => window.enter(TIMEOUT, signal).then((slot) => (slots.push(slot), slot)));
  return { slots, pending };
}

const settle = () => new Promise((resolve) => setImmediate(resolve));

describe("join window", () => {
  it("lets the first joins through at once and queues the rest in order", async () => {
    const window = new JoinWindow();
    const order: number[] = [];
    const entries = Array.from({ length: INITIAL_JOIN_WINDOW + 3 }, (_, i) =>
      window.enter(TIMEOUT, never).then((slot) => (order.push(i), slot)),
    );
    await settle();
    assert.equal(window.joinsInFlight, INITIAL_JOIN_WINDOW);
    assert.equal(window.joinsWaiting, 3);
    const first = await entries[0]!;
    first.answered(10);
    await settle();
    // A quick answer frees its place and grows the window by one: two of the three get in.
    assert.deepEqual(order.slice(INITIAL_JOIN_WINDOW), [INITIAL_JOIN_WINDOW, INITIAL_JOIN_WINDOW + 1]);
    assert.equal(window.joinsWaiting, 1);
  });

  it("halves once for a round of slow answers, not once per answer", async () => {
    const window = new JoinWindow();
    const { slots } = enterMany(window, INITIAL_JOIN_WINDOW);
    await settle();
    for (const slot of slots) slot.answered(TIMEOUT * 0.9);
    assert.equal(window.size, INITIAL_JOIN_WINDOW / 2);
    // The next round, admitted after the closing, halves it again.
    const next = enterMany(window, 2);
    await settle();
    next.slots[0]!.timedOut();
    next.slots[1]!.timedOut();
    assert.equal(window.size, INITIAL_JOIN_WINDOW / 4);
  });

  it("never closes below its floor, and a failure that says nothing of load changes nothing", async () => {
    const window = new JoinWindow();
    for (let round = 0; round < 20; round++) {
      (await window.enter(TIMEOUT, never)).timedOut();
    }
    assert.equal(window.size, MIN_JOIN_WINDOW);
    const slot = await window.enter(TIMEOUT, never);
    slot.released();
    assert.equal(window.size, MIN_JOIN_WINDOW);
    assert.equal(window.joinsInFlight, 0);
  });

  it("grows again: doubling per round until the last closing, then by one per round", async () => {
    const window = new JoinWindow();
    // One slow round: 32 → 16, and growth past 16 is one per round.
    (await window.enter(TIMEOUT, never)).timedOut();
    assert.equal(window.size, 16);
    for (let i = 0; i < 16; i++) (await window.enter(TIMEOUT, never)).answered(1);
    assert.equal(window.size, 16, "sixteen quick answers add 1/16 + 1/16.06 + ...: just under one");
    (await window.enter(TIMEOUT, never)).answered(1);
    assert.equal(window.size, 17);
  });

  it("a join whose signal aborts while it waits leaves the queue and takes no place", async () => {
    const window = new JoinWindow();
    const { slots } = enterMany(window, INITIAL_JOIN_WINDOW);
    const stop = new AbortController();
    const waiting = window.enter(TIMEOUT, stop.signal);
    const behind = window.enter(TIMEOUT, never);
    await settle();
    assert.equal(window.joinsWaiting, 2);
    stop.abort(new Error("stopped"));
    await assert.rejects(waiting, /stopped/);
    assert.equal(window.joinsWaiting, 1);
    slots[0]!.released();
    await behind;
    assert.equal(window.joinsInFlight, INITIAL_JOIN_WINDOW);
    await assert.rejects(window.enter(TIMEOUT, stop.signal), /stopped/);
  });

  it("a slot ends once, however often it is handed back", async () => {
    const window = new JoinWindow();
    const slot = await window.enter(TIMEOUT, never);
    slot.answered(1);
    slot.timedOut();
    slot.released();
    assert.equal(window.joinsInFlight, 0);
    assert.equal(window.size, INITIAL_JOIN_WINDOW + 1);
  });

  it("is shared by the backends of one class on one clock, and by nothing else", () => {
    class StoreA {}
    class StoreB {}
    const otherClock: Clock = { ...systemClock };
    const a1 = joinWindowFor(new StoreA(), systemClock);
    assert.equal(joinWindowFor(new StoreA(), systemClock), a1);
    assert.notEqual(joinWindowFor(new StoreB(), systemClock), a1);
    assert.notEqual(joinWindowFor(new StoreA(), otherClock), a1);
    // Backends written as plain objects have no class in common.
    assert.notEqual(joinWindowFor({}, systemClock), joinWindowFor({}, systemClock));
  });
});
