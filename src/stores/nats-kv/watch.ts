// A watch of the election key, read one entry at a time with a deadline: a
// follower waits for the next write *or* for the moment the holder's entry
// must have expired, whichever comes first. On nats-server 2.9 an entry that
// ages out gives a watch no event, so the deadline is how followers learn of
// a crashed leader; deletes and purges arrive as entries.
//
// The watch also remembers, for its latest entries, when the newest value
// written before each arrived (valueWrittenBefore): a member that leads
// beside Go members counts its wait from there (go-members.ts).
import { untilAborted } from "../../util/abort";
import { keyState, type KeyState, type NatsKvBucket, type NatsKvWatch } from "./nats/client";

/**
 * The longest delay a Node.js timer holds (2^31 - 1 ms, about 24.8 days); a
 * longer one fires after 1 ms instead. An observer on a bucket whose max age
 * is longer waits in steps of this.
 */
export const MAX_TIMER_MS = 2 ** 31 - 1;

/** How many of the latest entries valueWrittenBefore() can answer for: a won write is looked up within milliseconds. */
const REMEMBERED_ENTRIES = 32;

export class KeyWatch {
  private readonly queue: KeyState[] = [];
  private peeker: ((entry: KeyState) => void) | undefined;
  /** Why the watch ended by itself (the connection closed, the consumer went). */
  private ended: Error | undefined;
  private wake: (() => void) | undefined;
  private closed = false;
  /**
   * performance.now() by which the newest value entry delivered so far was
   * written (its arrival); until one arrives, when the watch opened: it
   * delivers every write after that, so any value it did not deliver was
   * written before then.
   */
  private valueWrittenBy: number;
  /** For the latest entries: the revision, and valueWrittenBy as it was just before that entry arrived. */
  private readonly recent: Array<{ revision: number; valueBefore: number }> = [];

  private constructor(
    private readonly iterator: NatsKvWatch,
    openedAt: number,
  ) {
    this.valueWrittenBy = openedAt;
    void this.pump();
  }

  /** Opens a watch of new writes to `key` (not its current value: read that after opening, so nothing falls between). */
  static async open(bucket: NatsKvBucket, key: string, signal: AbortSignal): Promise<KeyWatch> {
    const opening = bucket.watch({ key, include: "updates" });
    // A watch that opens after we stopped waiting would hold a consumer on the server: stop it.
    opening.then(
      (iterator) => {
        if (signal.aborted) stopWatch(iterator);
      },
      () => undefined,
    );
    const iterator = await untilAborted("watch", opening, signal);
    return new KeyWatch(iterator, performance.now());
  }

  /**
   * The next entry, or undefined once `dueAt` (performance.now() time) has
   * passed first. Throws if the watch ended, or with the signal's reason.
   */
  async next(dueAt: number, signal: AbortSignal): Promise<KeyState | undefined> {
    for (;;) {
      const entry = this.queue.shift();
      if (entry) return entry;
      if (this.ended) throw this.ended;
      signal.throwIfAborted();
      const wait = dueAt - performance.now();
      if (wait <= 0) return undefined;
      await new Promise<void>((resolve) => {
        const done = () => {
          clearTimeout(timer);
          signal.removeEventListener("abort", done);
          this.wake = undefined;
          resolve();
        };
        // A longer wait (a bucket whose max age is weeks) in steps a timer can
        // hold: the loop looks again.
        const timer = wait === Infinity ? undefined : setTimeout(done, Math.min(wait, MAX_TIMER_MS));
        signal.addEventListener("abort", done, { once: true });
        this.wake = done;
      });
    }
  }

  /**
   * Takes every entry queued so far and gives the newest, if it is at
   * revision `atLeast` or later; undefined (and nothing kept) if not.
   */
  newest(atLeast: number): KeyState | undefined {
    const newest = this.queue.at(-1);
    this.queue.length = 0;
    return newest && newest.revision >= atLeast ? newest : undefined;
  }

  /**
   * Shows `listener` each entry as it arrives, until the returned function is
   * called; the entries stay queued for next() and newest(). One at a time.
   */
  peek(listener: (entry: KeyState) => void): () => void {
    this.peeker = listener;
    return () => {
      if (this.peeker === listener) this.peeker = undefined;
    };
  }

  /**
   * For the entry at `revision`, once it has arrived: a performance.now()
   * time by which every value written to the key before it had been written
   * (the arrival of the newest one, or when the watch opened if none came
   * before it). "pending" until it arrives; "unknown" if the watch went past
   * it without it, ended, or no longer remembers it.
   */
  valueWrittenBefore(revision: number): number | "pending" | "unknown" {
    const seen = this.recent.find((entry) => entry.revision === revision);
    if (seen) return seen.valueBefore;
    // Entries come in order: one past `revision` means it will not come (or is forgotten).
    const passed = (this.recent.at(-1)?.revision ?? 0) > revision;
    return passed || this.ended || this.closed ? "unknown" : "pending";
  }

  close(): void {
    this.closed = true;
    stopWatch(this.iterator);
  }

  private async pump(): Promise<void> {
    try {
      for await (const entry of this.iterator) {
        const state = keyState(entry);
        this.recent.push({ revision: state.revision, valueBefore: this.valueWrittenBy });
        if (this.recent.length > REMEMBERED_ENTRIES) this.recent.shift();
        if (state.name !== undefined) this.valueWrittenBy = state.seenAt;
        this.queue.push(state);
        this.peeker?.(state);
        this.wake?.();
      }
      if (!this.closed) this.ended = new Error("the watch of the election key ended (connection closed?)");
    } catch (err) {
      this.ended = err instanceof Error ? err : new Error(String(err));
    } finally {
      this.wake?.();
    }
  }
}

/**
 * Stops a watch and deletes its consumer on the server. @nats-io/kv's
 * `stop()` only unsubscribes: the watch's ordered consumer, made with an
 * inactive threshold of five minutes, would stay on the server that long, one
 * for every campaign, term and observer that ended. The watch keeps its
 * consumer as `_data` (@nats-io/kv 3.x); a handle without one is only stopped,
 * and the server drops the consumer at its threshold. A consumer the client
 * already replaced (after missed heartbeats) was deleted by the client then.
 */
function stopWatch(iterator: NatsKvWatch): void {
  iterator.stop();
  const consumer = (iterator as { _data?: { delete?: () => Promise<unknown> } })._data;
  if (typeof consumer?.delete !== "function") return;
  consumer.delete().catch(() => undefined);
}
