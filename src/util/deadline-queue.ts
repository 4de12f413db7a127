// What a store's listener has heard, read one item at a time with a
// deadline: a follower waits for the next event *or* for the moment the
// holder's lease must have run out, whichever comes first. A race-style
// store says nothing when a lease expires (a NATS KV entry ageing out, a
// PostgreSQL row past its expiry, a Redis key without keyspace
// notifications), so the deadline is how a follower learns of a crashed
// leader; what the store does announce arrives as items.
import { MAX_TIMER_MS, type Clock } from "./clock";

export class DeadlineQueue<T> {
  /** What arrived and was not taken yet, oldest first; a reader may look, or take several at once. */
  readonly items: T[] = [];
  /** Why the source ended by itself (a connection lost); a wait throws it from then on. */
  private endedWith: Error | undefined;
  private wake: (() => void) | undefined;

  constructor(private readonly clock: Clock) {}

  /** Whether the source ended by itself. */
  get ended(): boolean {
    return this.endedWith !== undefined;
  }

  push(item: T): void {
    this.items.push(item);
    this.wake?.();
  }

  /** The source ended by itself: a wait throws `error` from now on, once the items queued before are taken. */
  end(error: Error): void {
    this.endedWith = error;
    this.wake?.();
  }

  /**
   * The next item, or undefined once `dueAt` (a time on the clock; Infinity
   * for none) has passed first. Throws if the source ended, or with the
   * signal's reason.
   */
  async next(dueAt: number, signal: AbortSignal): Promise<T | undefined> {
    for (;;) {
      if (this.items.length > 0) return this.items.shift();
      if (this.endedWith) throw this.endedWith;
      signal.throwIfAborted();
      const wait = dueAt - this.clock.now();
      if (wait <= 0) return undefined;
      await new Promise<void>((resolve) => {
        const done = () => {
          if (timer !== undefined) this.clock.clearTimeout(timer);
          signal.removeEventListener("abort", done);
          this.wake = undefined;
          resolve();
        };
        // A longer wait in steps a timer can hold: the loop looks again.
        const timer = wait === Infinity ? undefined : this.clock.setTimeout(done, Math.min(wait, MAX_TIMER_MS));
        signal.addEventListener("abort", done, { once: true });
        this.wake = done;
      });
    }
  }
}
