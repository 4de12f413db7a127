// What a member hears about the election key, read one event at a time with
// a deadline: a follower waits for the next announcement *or* for the moment
// the holder's key must have expired, whichever comes first. Expiry is
// silent on the election's channel (Redis publishes nothing when a key's PX
// runs out), so that moment is how a follower without keyspace
// notifications learns of a crashed leader.
//
// Two sources, on one subscription (its own connection):
// - the election's channel, on which the scripts announce every acquire
//   and release with the token and name (scripts.ts);
// - the key's keyspace channel, where the server has notifications on: an
//   expiry or an outside DEL ("gone"), a renewal's PEXPIRE ("renewed").
import { untilAborted } from "../../util/abort";
import type { Clock } from "../../util/clock";
import { parseAnnouncement } from "./scripts";
import type { ElectionKeys, RedisMessageListener, RedisPort, RedisSubscription } from "./port";

/**
 * The longest delay a Node.js timer holds (2^31 - 1 ms); a longer wait (a key
 * with no expiry) goes in steps of this.
 */
const MAX_TIMER_MS = 2 ** 31 - 1;

/** One thing heard about the key, stamped on the member's clock when it arrived. */
export type KeyEvent = { readonly seenAt: number } & (
  | { readonly kind: "acquired"; readonly name: string; readonly token: number; readonly ttlMs: number }
  | { readonly kind: "released"; readonly name: string; readonly token: number }
  /** A keyspace notification that the key expired or was deleted. */
  | { readonly kind: "gone" }
  /** A keyspace notification that the key's expiry was set again (a renewal). */
  | { readonly kind: "renewed" }
);

export class KeyEvents implements RedisMessageListener {
  private readonly queue: KeyEvent[] = [];
  private ended: Error | undefined;
  private wake: (() => void) | undefined;
  private subscription: RedisSubscription | undefined;
  private closed = false;

  private constructor(
    private readonly keys: ElectionKeys,
    private readonly keyspaceChannel: string | undefined,
    private readonly clock: Clock,
  ) {}

  /**
   * Subscribes to the election's channel (and the key's keyspace channel, if
   * given) before the caller's first read or acquire, so that nothing
   * announced after that read goes unheard.
   */
  static async open(port: RedisPort, keys: ElectionKeys, keyspaceChannel: string | undefined, clock: Clock, signal: AbortSignal): Promise<KeyEvents> {
    const events = new KeyEvents(keys, keyspaceChannel, clock);
    const channels = keyspaceChannel ? [keys.channel, keyspaceChannel] : [keys.channel];
    const opening = port.subscribe(channels, events);
    // A subscription that opens after we stopped waiting would hold a connection: close it.
    opening.then(
      (subscription) => {
        if (signal.aborted) subscription.stop();
      },
      () => undefined,
    );
    events.subscription = await untilAborted("subscribe", opening, signal);
    return events;
  }

  /** Whether the key's expiries and deletions are heard (keyspace notifications). */
  get hearsExpiry(): boolean {
    return this.keyspaceChannel !== undefined;
  }

  /** The next event, or undefined once `dueAt` (a time on the clock) has passed first. Throws if the subscription ended, or with the signal's reason. */
  async next(dueAt: number, signal: AbortSignal): Promise<KeyEvent | undefined> {
    for (;;) {
      const event = this.queue.shift();
      if (event) return event;
      if (this.ended) throw this.ended;
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
        const timer = wait === Infinity ? undefined : this.clock.setTimeout(done, Math.min(wait, MAX_TIMER_MS));
        signal.addEventListener("abort", done, { once: true });
        this.wake = done;
      });
    }
  }

  /** Takes every event queued so far and gives the newest acquire among them with a token above `above`, if any. */
  newestAcquire(above: number): (KeyEvent & { kind: "acquired" }) | undefined {
    let newest: (KeyEvent & { kind: "acquired" }) | undefined;
    for (const event of this.queue.splice(0)) {
      if (event.kind === "acquired" && event.token > (newest?.token ?? above)) newest = event;
    }
    return newest;
  }

  /** Checks that the subscription's connection still answers (a follower does, each time it checks the key itself). */
  probe(): void {
    this.subscription?.probe?.();
  }

  close(): void {
    this.closed = true;
    this.subscription?.stop();
  }

  onMessage(channel: string, message: string): void {
    if (this.closed) return;
    const seenAt = this.clock.now();
    let event: KeyEvent | undefined;
    if (channel === this.keys.channel) {
      const announced = parseAnnouncement(message);
      if (announced) event = { ...announced, seenAt };
    } else if (channel === this.keyspaceChannel) {
      if (message === "expired" || message === "del" || message === "evicted") event = { kind: "gone", seenAt };
      else if (message === "expire" || message === "pexpire") event = { kind: "renewed", seenAt };
    }
    if (!event) return;
    this.queue.push(event);
    this.wake?.();
  }

  onEnd(error: Error): void {
    if (this.closed) return;
    this.ended = error;
    this.wake?.();
  }
}
