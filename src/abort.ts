// Small helpers for AbortSignal-driven cancellation: every wait in the library
// settles as soon as its owner aborts, so stop() leaves nothing running.
import type { Clock } from "./clock";

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

/** Rejects with the signal's reason once it aborts; never resolves. */
export function whenAborted(signal: AbortSignal): Promise<never> {
  return new Promise((_, reject) => {
    if (signal.aborted) return reject(signal.reason);
    signal.addEventListener("abort", () => reject(signal.reason), { once: true });
  });
}

/** A signal that aborts when any of `signals` does. */
export function anySignal(...signals: AbortSignal[]): AbortSignal {
  return AbortSignal.any(signals);
}
