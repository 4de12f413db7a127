// How many joins a process has in flight to one kind of store: a window that
// grows while joins are answered quickly and halves when one is slow or
// times out, as TCP's congestion window does for packets.
//
// Why: a join is the most expensive request a member makes (on etcd v3 a
// lease grant and a transaction, both raft writes), and a thousand members
// starting together used to send a thousand at once. etcd answered each in
// about 0.7 s, so grant plus transaction passed the request timeout (TTL/2, 1 s
// at a 2 s TTL); each join that timed out was abandoned (a revoke), retried
// (another grant and transaction), and the retries queued behind the rest:
// 5,144 grants, 4,144 revokes and 4,938 error events for 1000 members, ten
// seconds to a leader. Waiting here costs nothing at the store, and a join's
// timeout starts only when it leaves the window, so a join that waits is never
// abandoned for having waited: the store sees what it can answer in time, and
// the rest queue in the process, first come first served.
//
// Renewals never pass through it: a member that holds a membership keeps it
// whatever the joins are doing. Race-style stores (no join) are not affected.
//
// One window per kind of store (the backend's class) per clock: all etcd v3
// members of a process share one, as do all etcd v2 members; a simulated
// process (its own Clock) has its own. Several processes each adapt their own
// window to the latency they see, which converges as TCP flows sharing a link
// do.
import type { Clock } from "../util/clock";
import { onAbort } from "../util/abort";

/** Joins allowed in flight before any answer was seen: more than a process usually starts at once. */
export const INITIAL_JOIN_WINDOW = 32;
/** The window never closes below this: a slow store still gets joins to answer. */
export const MIN_JOIN_WINDOW = 2;
export const MAX_JOIN_WINDOW = 4096;
/** A join answered within this share of its request timeout is quick; slower ones close the window. */
export const QUICK_SHARE = 1 / 4;

/** A place in the window: hand back how the join went once it is over. */
export interface JoinSlot {
  /** The join was answered (successfully or not) `elapsedMs` after it left the window. */
  answered(elapsedMs: number): void;
  /** The join was given up at its request timeout. */
  timedOut(): void;
  /** The join ended in a way that says nothing about the store's load (a refused connection, stop()). */
  released(): void;
}

interface Waiter {
  admit: () => void;
}

export class JoinWindow {
  private limit = INITIAL_JOIN_WINDOW;
  /** Below it the window doubles per round of answers (slow start); above it, it grows by one per round. */
  private threshold = MAX_JOIN_WINDOW;
  private inFlight = 0;
  private readonly waiting: Waiter[] = [];
  /** Slots handed out so far; a slot only closes the window if it was admitted after the last closing. */
  private admitted = 0;
  private admittedAtLastClose = 0;

  /** The window's size now, for diagnostics and tests. */
  get size(): number {
    return Math.floor(this.limit);
  }

  get joinsInFlight(): number {
    return this.inFlight;
  }

  get joinsWaiting(): number {
    return this.waiting.length;
  }

  /**
   * Resolves with a slot once fewer than the window's size are in flight;
   * rejects with the signal's reason if it aborts first (the slot is not taken).
   */
  enter(quickWithinMs: number, signal: AbortSignal): Promise<JoinSlot> {
    if (signal.aborted) return Promise.reject(signal.reason);
    if (this.waiting.length === 0 && this.inFlight < this.size) return Promise.resolve(this.take(quickWithinMs));
    return new Promise((resolve, reject) => {
      const waiter: Waiter = {
        admit: () => {
          detach();
          resolve(this.take(quickWithinMs));
        },
      };
      const detach = onAbort(signal, () => {
        const at = this.waiting.indexOf(waiter);
        if (at >= 0) this.waiting.splice(at, 1);
        reject(signal.reason);
      });
      this.waiting.push(waiter);
    });
  }

  private take(quickWithinMs: number): JoinSlot {
    this.inFlight++;
    const order = ++this.admitted;
    let over = false;
    const end = (outcome: "quick" | "slow" | "neutral") => {
      if (over) return;
      over = true;
      this.inFlight--;
      if (outcome === "quick") this.grow();
      else if (outcome === "slow") this.shrink(order);
      this.admitWaiting();
    };
    return {
      answered: (elapsedMs) => end(elapsedMs <= quickWithinMs * QUICK_SHARE ? "quick" : "slow"),
      timedOut: () => end("slow"),
      released: () => end("neutral"),
    };
  }

  private grow(): void {
    this.limit = Math.min(MAX_JOIN_WINDOW, this.limit < this.threshold ? this.limit + 1 : this.limit + 1 / this.limit);
  }

  /** Halves the window, once per round: the joins admitted before a closing were sent into the same queue. */
  private shrink(order: number): void {
    if (order <= this.admittedAtLastClose) return;
    this.admittedAtLastClose = this.admitted;
    this.limit = Math.max(MIN_JOIN_WINDOW, this.limit / 2);
    this.threshold = this.limit;
  }

  private admitWaiting(): void {
    while (this.waiting.length > 0 && this.inFlight < this.size) this.waiting.shift()!.admit();
  }
}

/** Windows by clock, then by the backend's class. */
const windows = new WeakMap<Clock, WeakMap<object, JoinWindow>>();

/** The window the joins of `backend` share with those of every backend of its class on `clock`. */
export function joinWindowFor(backend: object, clock: Clock): JoinWindow {
  let byKind = windows.get(clock);
  if (!byKind) windows.set(clock, (byKind = new WeakMap()));
  // A backend written as a plain object has no class to share: it gets its own.
  const prototype = Object.getPrototypeOf(backend) as object | null;
  const kind = prototype === null || prototype === Object.prototype ? backend : prototype;
  let window = byKind.get(kind);
  if (!window) byKind.set(kind, (window = new JoinWindow()));
  return window;
}
