// Why a term ended: the reason a leadership scope's AbortSignal carries
// (election.whileLeading), one class per cause, so that a routine can tell a
// stop it asked for from a loss it must report.

/** This member no longer leads. The subclass says why; `cause` carries the store's word where there is one. */
export class LeadershipLostError extends Error {
  override readonly name: string = "LeadershipLostError";
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
  }
}

/** stop(), leave(), the start() signal or an `await using` scope ended the election. */
export class ElectionStoppedError extends LeadershipLostError {
  override readonly name: string = "ElectionStoppedError";
}

/** `election.yield()`: this member gave its term up to go to the back of the line, still in the election. */
export class LeadershipYieldedError extends LeadershipLostError {
  override readonly name: string = "LeadershipYieldedError";
}

/**
 * The leader could not confirm its membership in time and had to assume it
 * lost it: no renewal was confirmed within the TTL less the step-down margin
 * of the last one sent (a partition, a slow store, a frozen process).
 */
export class LeaseExpiredError extends LeadershipLostError {
  override readonly name: string = "LeaseExpiredError";
}

/**
 * The store no longer holds the leader's membership: its key was deleted from
 * outside, or it expired. `cause` is the backend's MembershipLostError.
 */
export class MembershipRemovedError extends LeadershipLostError {
  override readonly name: string = "MembershipRemovedError";
}

/**
 * The error a wait rejects with when it is called off, by the caller's signal
 * or because the election stopped: a DOMException named "AbortError", as
 * fetch() and Node's own APIs give, with the reason as its `cause`.
 */
export function abortError(cause: unknown): DOMException {
  const why = cause instanceof Error ? `: ${cause.message}` : "";
  const error = new DOMException(`The operation was aborted${why}`, "AbortError");
  // Set as the Error constructor's `cause` option would (the typings of
  // DOMException's own lack it).
  Object.defineProperty(error, "cause", { value: cause, writable: true, configurable: true, enumerable: false });
  return error;
}
