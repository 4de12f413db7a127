// Small helpers for AbortSignal-driven cancellation: every wait in the library
// settles as soon as its owner aborts, so stop() leaves nothing running.
import { detachedTimeout, systemClock, type Clock } from "./clock";
import { RequestTimeoutError } from "../contract/errors";

/**
 * Calls `listener` once when `signal` aborts, or at once if it has aborted
 * already (an abort event is never fired twice, so a listener added after it
 * would wait for ever). Returns the way to stop listening.
 */
export function onAbort(signal: AbortSignal, listener: () => void): () => void {
  if (signal.aborted) {
    listener();
    return () => undefined;
  }
  signal.addEventListener("abort", listener, { once: true });
  return () => signal.removeEventListener("abort", listener);
}

/**
 * A caller's `signal` option, checked before anything changes: undefined, or
 * an AbortSignal. Checked by shape rather than by class, so that a signal from
 * another realm or a faithful polyfill is accepted.
 */
export function checkSignal(value: unknown, where: string): AbortSignal | undefined {
  if (value === undefined) return undefined;
  const signal = value as Partial<AbortSignal> | null;
  if (
    typeof signal !== "object" ||
    signal === null ||
    typeof signal.aborted !== "boolean" ||
    typeof signal.addEventListener !== "function" ||
    typeof signal.removeEventListener !== "function"
  ) {
    const got = typeof value === "object" && value !== null ? "an object that is not one (no aborted, addEventListener, removeEventListener)" : describeValue(value);
    throw new TypeError(`${where}: signal must be an AbortSignal, got ${got}`);
  }
  return value as AbortSignal;
}

/** An options argument, checked before anything changes: undefined, or an object. */
export function checkOptions<T extends object>(value: T | undefined, where: string): Partial<T> {
  if (value === undefined) return {};
  if (typeof value !== "object" || value === null) {
    throw new TypeError(`${where}: options must be an object, got ${describeValue(value)}`);
  }
  return value;
}

function describeValue(value: unknown): string {
  if (value === null) return "null";
  if (typeof value === "string") return `the string ${JSON.stringify(value)}`;
  if (typeof value === "function" || typeof value === "object" || typeof value === "symbol") return `a ${typeof value}`;
  return `${typeof value} ${String(value)}`;
}

/** Resolves after `ms`, or rejects with the signal's reason once it aborts. */
export function sleep(clock: Clock, ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal.aborted) return reject(signal.reason);
    const onAbort = () => {
      clock.clearTimeout(timer);
      reject(signal.reason);
    };
    const timer = clock.setTimeout(() => {
      signal.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    signal.addEventListener("abort", onAbort, { once: true });
  });
}

/**
 * A controller that also aborts, with the parent's reason, when `parent`
 * does: what AbortSignal.any([parent, controller.signal]) gives, for a
 * fraction of the memory. Node 20's composite signal holds weak references
 * both ways and a finalization-registry entry, and a waiting member holds one
 * for as long as it waits. `release()` detaches it from the parent when its
 * work is over, and aborts it too.
 */
export class ChildAbortController extends AbortController {
  private readonly onParentAbort = () => {
    if (this.parentAbortsLater) this.parentAbortsLater(() => this.abort(this.parent.reason));
    else this.abort(this.parent.reason);
  };

  /**
   * `parentAbortsLater`: how the parent's abort reaches this controller on a
   * later turn of the event loop instead of at once (a clock's later(): the
   * check phase); one that comes before its parent's is not held back.
   * Whoever aborts the parent gets the rest of the turn to itself, and the
   * I/O it started in it goes out first.
   */
  constructor(
    private readonly parent: AbortSignal,
    private readonly parentAbortsLater?: (callback: () => void) => void,
  ) {
    super();
    if (parent.aborted) this.abort(parent.reason);
    else parent.addEventListener("abort", this.onParentAbort, { once: true });
  }

  release(reason: unknown): void {
    this.parent.removeEventListener("abort", this.onParentAbort);
    this.abort(reason);
  }
}

/**
 * A signal that aborts with a TimeoutError after `ms` on `clock`, as
 * AbortSignal.timeout() does, and `clear()` to drop its timer once the work it
 * bounds is over. In Node 20 AbortSignal.timeout() puts each signal behind a
 * weak reference and in a finalization registry: for a hundred members
 * starting in one process, the two a join used were half of this library's
 * own work before its create went out.
 */
export function deadline(ms: number, clock: Clock = systemClock): { signal: AbortSignal; clear(): void } {
  const controller = new AbortController();
  const timer = detachedTimeout(clock, () => controller.abort(new DOMException("The operation was aborted due to timeout", "TimeoutError")), ms);
  return { signal: controller.signal, clear: () => clock.clearTimeout(timer) };
}

/**
 * Why a request stopped waiting: a RequestTimeoutError when its signal came
 * from AbortSignal.timeout() or deadline(), else whatever the signal was
 * aborted with.
 */
export function abortReason(operation: string, signal: AbortSignal): unknown {
  const reason = signal.reason as { name?: string } | undefined;
  return reason?.name === "TimeoutError" ? new RequestTimeoutError(operation) : signal.reason;
}

/**
 * Waits for `pending` until `signal` aborts. The work itself goes on: a caller
 * that must undo a late result (a key created after we stopped waiting)
 * attaches its own handler to `pending`.
 */
export function untilAborted<T>(operation: string, pending: Promise<T>, signal: AbortSignal): Promise<T> {
  pending.catch(() => undefined);
  if (signal.aborted) return Promise.reject(abortReason(operation, signal));
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(abortReason(operation, signal));
    signal.addEventListener("abort", onAbort, { once: true });
    pending.then(
      (value) => {
        signal.removeEventListener("abort", onAbort);
        resolve(value);
      },
      (err: unknown) => {
        signal.removeEventListener("abort", onAbort);
        reject(err);
      },
    );
  });
}

/**
 * Runs a listener-invoking call so that an exception thrown by user code in a
 * listener cannot derail the election: it is rethrown on the next tick, as an
 * uncaught exception, the way an exception in any other callback would be.
 */
export function emitSafely(emit: () => void): void {
  try {
    emit();
  } catch (err) {
    process.nextTick(() => {
      throw err;
    });
  }
}
