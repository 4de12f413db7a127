// A watch of the election key, read one entry at a time with a deadline: a
// follower waits for the next write *or* for the moment the holder's entry
// must have expired, whichever comes first. On nats-server 2.9 an entry that
// ages out gives a watch no event, so the deadline is how followers learn of
// a crashed leader; deletes and purges arrive as entries.
//
// The watch also remembers, for its latest entries, when the newest value
// written before each arrived (valueWrittenBefore): a member that leads
// beside Go members counts its wait from there (go-members.ts).
import { RequestTimeoutError } from "../../contract/errors";
import { abortReason } from "../../util/abort";
import { detachedTimeout, type Clock } from "../../util/clock";
import { DeadlineQueue } from "../../util/deadline-queue";
import { log } from "../../util/log";
import type { KeyState } from "./key-state";
import type { KvWatch, KvWatchListener, NatsKvPort } from "./port";

/** How many of the latest entries valueWrittenBefore() can answer for: a won write is looked up within milliseconds. */
const REMEMBERED_ENTRIES = 32;

/** How often open() asks for a watch that goes unanswered before it gives up. */
const OPEN_ATTEMPTS = 3;

/** Shown each entry as it arrives (KeyWatch.peek). */
export interface EntryPeeker {
  peeked(entry: KeyState): void;
}

export class KeyWatch implements KvWatchListener {
  /** The entries delivered and not taken yet; it ends when the watch ends by itself (the connection closed, the consumer went). */
  private readonly arrivals: DeadlineQueue<KeyState>;
  private peeker: EntryPeeker | undefined;
  private closed = false;
  /**
   * A time on the clock by which every value written to the key so far had
   * been written: the arrival of the newest entry delivered, a value or a
   * delete or purge marker; until one arrives, when the watch opened. A
   * marker counts too: with a history of one, each entry replaces the one
   * before, and a purge removes them all, so a value written just before a
   * marker may be gone before the watch delivers it, and only the marker's
   * arrival bounds it. (The entry just before a winning create is never
   * gone: only an entry after it could have replaced it.)
   */
  private valueWrittenBy: number;
  /** For the latest entries: the revision, and valueWrittenBy as it was just before that entry arrived. */
  private readonly recent: Array<{ revision: number; valueBefore: number }> = [];

  private constructor(
    private readonly entries: KvWatch,
    private readonly clock: Clock,
  ) {
    this.arrivals = new DeadlineQueue(clock);
    this.valueWrittenBy = clock.now();
    entries.listen(this);
  }

  /**
   * Opens a watch of new writes to `key` (not its current value: read that
   * after opening, so nothing falls between).
   *
   * With `attemptMs`, each try waits that long for the server's answer
   * before it asks again, up to OPEN_ATTEMPTS times, then throws a
   * RequestTimeoutError: on a JetStream cluster before 2.12, the watch's
   * consumer may be placed on a stream peer that is down, and such a request
   * is never answered (the client gives up after its own JetStream timeout,
   * 5 s by default); a new consumer is placed afresh. Without it, one try,
   * waited for as long as the client waits: a single server places every
   * consumer on itself, and asking again would only add to its load.
   */
  static async open(kv: NatsKvPort, key: string, clock: Clock, signal: AbortSignal, attemptMs?: number): Promise<KeyWatch> {
    const ask = () => kv.watch(key);
    if (attemptMs === undefined) return new KeyWatch(await openedWithin(ask, undefined, clock, signal), clock);
    for (let attempt = 1; attempt <= OPEN_ATTEMPTS; attempt++) {
      const entries = await openedWithin(ask, attemptMs, clock, signal);
      if (entries) return new KeyWatch(entries, clock);
      log.nats("the watch of %s went unanswered for %d ms (try %d of %d)", key, attemptMs, attempt, OPEN_ATTEMPTS);
    }
    throw new RequestTimeoutError(`watch of the election key (asked ${OPEN_ATTEMPTS} times, ${attemptMs} ms each)`);
  }

  /**
   * The next entry, or undefined once `dueAt` (a time on the clock) has
   * passed first. Throws if the watch ended, or with the signal's reason.
   */
  next(dueAt: number, signal: AbortSignal): Promise<KeyState | undefined> {
    return this.arrivals.next(dueAt, signal);
  }

  /**
   * Takes every entry queued so far and gives the newest, if it is at
   * revision `atLeast` or later; undefined (and nothing kept) if not.
   */
  newest(atLeast: number): KeyState | undefined {
    const newest = this.arrivals.items.at(-1);
    this.arrivals.items.length = 0;
    return newest && newest.revision >= atLeast ? newest : undefined;
  }

  /**
   * Shows `peeker` each entry as it arrives, until stopPeeking(peeker); the
   * entries stay queued for next() and newest(). One at a time.
   */
  peek(peeker: EntryPeeker): void {
    this.peeker = peeker;
  }

  stopPeeking(peeker: EntryPeeker): void {
    if (this.peeker === peeker) this.peeker = undefined;
  }

  /**
   * For the entry at `revision`, once it has arrived: a time on the clock by
   * which every value written to the key before it had been written (the
   * arrival of the entry delivered before it, or when the watch opened if
   * none came before it). "pending" until it arrives; "unknown" if the watch went past it
   * without it, ended, or no longer remembers it.
   */
  valueWrittenBefore(revision: number): number | "pending" | "unknown" {
    const seen = this.recent.find((entry) => entry.revision === revision);
    if (seen) return seen.valueBefore;
    // Entries come in order: one past `revision` means it will not come (or is forgotten).
    const passed = (this.recent.at(-1)?.revision ?? 0) > revision;
    return passed || this.arrivals.ended || this.closed ? "unknown" : "pending";
  }

  close(): void {
    this.closed = true;
    this.entries.stop();
  }

  /** An entry has arrived (the port calls this, in revision order). */
  onEntry(name: string | undefined, revision: number): void {
    const state: KeyState = { name, revision, seenAt: this.clock.now() };
    this.recent.push({ revision, valueBefore: this.valueWrittenBy });
    if (this.recent.length > REMEMBERED_ENTRIES) this.recent.shift();
    this.valueWrittenBy = state.seenAt;
    // A waiter wakes on a later microtask, after the peeker has seen the entry.
    this.arrivals.push(state);
    this.peeker?.peeked(state);
  }

  /** The watch ended by itself (the port calls this): a wait throws `error` from now on. */
  onEnd(error: Error): void {
    this.arrivals.end(error);
  }
}

/**
 * The watch `ask()` gives within `ms` on `clock` (any time if undefined);
 * undefined if it takes longer. Rejects with its error, or once `signal`
 * aborts (without asking, if it has already). A watch that opens after we
 * stopped waiting for it would hold a consumer on the server: it is stopped.
 */
function openedWithin(ask: () => Promise<KvWatch>, ms: number, clock: Clock, signal: AbortSignal): Promise<KvWatch | undefined>;
function openedWithin(ask: () => Promise<KvWatch>, ms: undefined, clock: Clock, signal: AbortSignal): Promise<KvWatch>;
function openedWithin(ask: () => Promise<KvWatch>, ms: number | undefined, clock: Clock, signal: AbortSignal): Promise<KvWatch | undefined> {
  if (signal.aborted) return Promise.reject(abortReason("watch", signal));
  const opening = ask();
  return new Promise((resolve, reject) => {
    const abandon = () => {
      opening.then(
        (entries) => entries.stop(),
        () => undefined,
      );
    };
    const settle = () => {
      if (timer !== undefined) clock.clearTimeout(timer);
      signal.removeEventListener("abort", onAbort);
    };
    const onAbort = () => {
      settle();
      abandon();
      reject(abortReason("watch", signal));
    };
    const timer =
      ms === undefined
        ? undefined
        : detachedTimeout(clock, () => {
            settle();
            abandon();
            resolve(undefined);
          }, ms);
    signal.addEventListener("abort", onAbort, { once: true });
    opening.then(
      (entries) => {
        settle();
        resolve(entries);
      },
      (err: unknown) => {
        settle();
        reject(err);
      },
    );
  });
}
