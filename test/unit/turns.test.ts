// nextTurn(): followers' re-arms wait here so that the I/O of the same turn
// (the successor's answer) is handled between them. Pure event-loop logic.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { TurnQueue } from "../../src/util/turns";

const turns = new TurnQueue();
const nextTurn = () => turns.next();

describe("nextTurn", () => {
  it("lets one waiter through per turn of the event loop, in the order they came", async () => {
    const released: number[] = [];
    const all = [1, 2, 3].map((n) => nextTurn().then(() => released.push(n)));
    // Queued after the waiters: with one waiter per turn, this callback of the
    // same turn runs after the first and before the second.
    const seenByTheTurn = await new Promise<number[]>((resolve) => setImmediate(() => resolve([...released])));
    assert.deepEqual(seenByTheTurn, [1]);
    await Promise.all(all);
    assert.deepEqual(released, [1, 2, 3]);
  });

  it("starts draining again after it ran dry", async () => {
    await nextTurn();
    const released: string[] = [];
    await Promise.all([nextTurn().then(() => released.push("a")), nextTurn().then(() => released.push("b"))]);
    assert.deepEqual(released, ["a", "b"]);
  });
});
