// The circuit breaker etcdLeader.etcd3Options() gives each etcd3 host: three
// bursts of failures in a row open it, where failures within 100 ms of a
// burst's first are that burst. Pure counting, on an injected clock; the
// real-server side (a partition's heal leaves it closed) is in
// silent-connections.test.ts.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { BURST_MS, ConsecutiveBurstsBreaker } from "../../src/stores/etcd-v3/etcd3/burst-breaker";

function breakerAt(): { breaker: ConsecutiveBurstsBreaker; advance: (ms: number) => void } {
  let t = 1_000;
  return { breaker: new ConsecutiveBurstsBreaker(3, BURST_MS, () => t), advance: (ms) => void (t += ms) };
}

describe("ConsecutiveBurstsBreaker", () => {
  it("any number of failures at once (a connection reset, etcd3's immediate retries) is one burst and leaves it closed", () => {
    const { breaker, advance } = breakerAt();
    for (let i = 0; i < 10; i++) {
      assert.equal(breaker.failure(), false);
      advance(BURST_MS / 20);
    }
    assert.equal(breaker.state.bursts, 1);
  });

  it("opens at the third burst in a row, bursts being at least 100 ms apart", () => {
    const { breaker, advance } = breakerAt();
    assert.equal(breaker.failure(), false);
    advance(BURST_MS - 1);
    assert.equal(breaker.failure(), false, "still the first burst");
    advance(1);
    assert.equal(breaker.failure(), false, "second burst");
    advance(BURST_MS);
    assert.equal(breaker.failure(), true, "third burst");
  });

  it("a success in between starts the count again", () => {
    const { breaker, advance } = breakerAt();
    breaker.failure();
    advance(BURST_MS);
    breaker.failure();
    breaker.success();
    advance(BURST_MS);
    assert.equal(breaker.failure(), false);
    advance(BURST_MS);
    assert.equal(breaker.failure(), false);
    advance(BURST_MS);
    assert.equal(breaker.failure(), true);
  });

  it("keeps its count in `state`, which cockatiel saves and restores", () => {
    const { breaker, advance } = breakerAt();
    breaker.failure();
    advance(BURST_MS);
    breaker.failure();
    const { breaker: restored, advance: advanceRestored } = breakerAt();
    restored.state = { ...breaker.state };
    advanceRestored(2 * BURST_MS);
    assert.equal(restored.failure(), true);
  });
});
