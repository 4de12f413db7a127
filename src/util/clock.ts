// Time as the state machine sees it. Leadership deadlines are measured on a
// monotonic clock: a wall clock that jumps must never extend a lease.
//
// Every timer, timeout and reading of the time that the election, its terms,
// renewals and scopes use goes through a Clock, so that a simulated world can
// run them in virtual time; the system clock is the real one, at no cost.

/**
 * The longest delay a Node.js timer holds (2^31 - 1 ms, about 24.8 days); a
 * longer one fires after 1 ms instead, so a longer wait goes in steps of it.
 */
export const MAX_TIMER_MS = 2 ** 31 - 1;

export interface Clock {
  /** Milliseconds on a monotonic clock. */
  now(): number;
  setTimeout(callback: () => void, ms: number): unknown;
  clearTimeout(handle: unknown): void;
  /** Milliseconds since the epoch, for what is reported as a date (lastRenewedAt); Date.now() when absent. */
  wallNow?(): number;
  /**
   * Runs `callback` on a later turn of the event loop, after the I/O of this
   * one (setImmediate's check phase) when absent.
   */
  later?(callback: () => void): void;
}

export const systemClock: Clock = {
  now: () => performance.now(),
  setTimeout: (callback, ms) => setTimeout(callback, ms),
  clearTimeout: (handle) => clearTimeout(handle as NodeJS.Timeout),
  wallNow: () => Date.now(),
  later: (callback) => setImmediate(callback),
};

/** `clock.wallNow()`, or Date.now(). */
export function wallNow(clock: Clock): number {
  return clock.wallNow ? clock.wallNow() : Date.now();
}

/** `clock.later(callback)`, or setImmediate. */
export function later(clock: Clock, callback: () => void): void {
  if (clock.later) clock.later(callback);
  else setImmediate(callback);
}

/**
 * A timer on `clock` that, on the system clock, keeps no process alive by
 * itself (as AbortSignal.timeout()'s does): a request timeout must not hold a
 * process that is otherwise done.
 */
export function detachedTimeout(clock: Clock, callback: () => void, ms: number): unknown {
  const handle = clock.setTimeout(callback, ms);
  (handle as { unref?: () => void } | undefined)?.unref?.();
  return handle;
}
