// When the circuit breaker etcd3Options() gives each host opens: after three
// failures in a row, where failures closer together than BURST_MS count as
// one. Failures that close together have one cause. A connection reset fails
// every call and stream in flight on that connection at once (etcd3 reports
// each stream's failure to the breaker), and etcd3 retries a failed call at
// once, up to three times, on a channel that is still reconnecting. Counted
// one by one, a single reset (the one that ends a partition, when the
// connection's first packet after the heal meets an RST) opens the breaker,
// and a member that lost its lease in the partition learns so, and rejoins,
// only when it half-opens. Counted as one, it takes failures spread over some
// time, as from a host that is down, to open it: etcd3 then sends calls to the
// client's other hosts, which is what the breaker is for.
//
// The shape is cockatiel's IBreaker (cockatiel is etcd3's dependency, not ours).

/** Failures within this long of the first of a burst are that burst. */
export const BURST_MS = 100;

interface BurstState {
  /** Bursts of failures since the last success. */
  bursts: number;
  /** performance.now() when the current burst began. */
  burstBeganAt: number;
}

export class ConsecutiveBurstsBreaker {
  /** Read and restored by cockatiel's CircuitBreakerPolicy (toJSON). */
  state: BurstState = { bursts: 0, burstBeganAt: -Infinity };

  constructor(
    private readonly threshold: number,
    private readonly burstMs = BURST_MS,
    private readonly now: () => number = () => performance.now(),
  ) {}

  success(): void {
    this.state = { bursts: 0, burstBeganAt: -Infinity };
  }

  /** Counts a failure; true when the circuit should open. */
  failure(): boolean {
    const at = this.now();
    if (at - this.state.burstBeganAt >= this.burstMs) {
      this.state = { bursts: this.state.bursts + 1, burstBeganAt: at };
    }
    return this.state.bursts >= this.threshold;
  }
}
