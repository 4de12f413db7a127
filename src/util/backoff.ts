// Capped exponential back-off with jitter, so that members that failed
// together (an etcd restart) do not retry together.

export class Backoff {
  private failures = 0;

  constructor(
    private readonly initialDelay: number,
    private readonly maxDelay: number,
    private readonly random: () => number = Math.random,
  ) {}

  /** Failures since the last reset. */
  get attempts(): number {
    return this.failures;
  }

  /** Counts a failure and returns how long to wait before the next try. */
  next(): number {
    const ceiling = Math.min(this.maxDelay, this.initialDelay * 2 ** Math.min(this.failures, 30));
    this.failures++;
    // "Equal jitter": never less than half the ceiling, so retries still back off.
    return ceiling / 2 + this.random() * (ceiling / 2);
  }

  reset(): void {
    this.failures = 0;
  }
}
