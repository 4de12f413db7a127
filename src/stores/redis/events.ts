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
import { DeadlineQueue } from "../../util/deadline-queue";
import { parseAnnouncement } from "./scripts";
import type { ElectionKeys, RedisMessageListener, RedisPort, RedisSubscription } from "./port";

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
  /** What was heard and not taken yet; it ends when the subscription ends by itself. */
  private readonly arrivals: DeadlineQueue<KeyEvent>;
  private subscription: RedisSubscription | undefined;
  private closed = false;

  private constructor(
    private readonly keys: ElectionKeys,
    private readonly keyspaceChannel: string | undefined,
    private readonly clock: Clock,
  ) {
    this.arrivals = new DeadlineQueue(clock);
  }

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
  next(dueAt: number, signal: AbortSignal): Promise<KeyEvent | undefined> {
    return this.arrivals.next(dueAt, signal);
  }

  /** Takes every event queued so far and gives the newest acquire among them with a token above `above`, if any. */
  newestAcquire(above: number): (KeyEvent & { kind: "acquired" }) | undefined {
    let newest: (KeyEvent & { kind: "acquired" }) | undefined;
    for (const event of this.arrivals.items.splice(0)) {
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
    if (event) this.arrivals.push(event);
  }

  onEnd(error: Error): void {
    if (!this.closed) this.arrivals.end(error);
  }
}
