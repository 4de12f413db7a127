// Errors are data: the state machine decides what each kind means. A store
// error is either "the membership is gone" (rejoin at the back of the line) or
// transient (retry with back-off); nothing a store says ends an election.

/**
 * Marks a MembershipLostError from any copy of this package. A backend may be
 * built on a copy other than the one the election runs on (a backend that is
 * a package of its own, with its own etcd-leader), whose class is not this
 * one; its lost membership must still count as lost, not as a slow store.
 */
const MEMBERSHIP_LOST = Symbol.for("etcd-leader.MembershipLostError");

/** The store no longer holds this member's place in line: it expired or was deleted. */
export class MembershipLostError extends Error {
  override readonly name = "MembershipLostError";
  readonly [MEMBERSHIP_LOST] = true;
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
  }

  /** `instanceof` holds for one made by any copy of the package. */
  static override [Symbol.hasInstance](value: unknown): boolean {
    return typeof value === "object" && value !== null && (value as { [MEMBERSHIP_LOST]?: unknown })[MEMBERSHIP_LOST] === true;
  }
}

/** A request to the store did not answer within its deadline. */
export class RequestTimeoutError extends Error {
  override readonly name = "RequestTimeoutError";
  constructor(readonly operation: string) {
    super(`${operation}: the store did not answer within the request timeout`);
  }
}

/** What went wrong in which phase of the election; emitted as `error`. */
export type ElectionPhase = "join" | "renew" | "wait" | "lead" | "leave" | "observe";

/**
 * Emitted with every `error` event. The election goes on by itself: the error
 * is reported so that it can be seen, not because anything must be done.
 */
export class ElectionError extends Error {
  override readonly name = "ElectionError";
  /** The store's own code for the error, where it has one: on etcd, the v2 `errorCode` (e.g. 110 for bad credentials), or the gRPC status on v3 (e.g. 3). */
  readonly errorCode: number | undefined;

  constructor(
    readonly phase: ElectionPhase,
    /** How many failures in a row this phase has had, this one included. */
    readonly attempt: number,
    cause: unknown,
  ) {
    super(`${phase} failed (attempt ${attempt}): ${describe(cause)}`, { cause });
    this.errorCode = codeOf(cause);
  }
}

export function isMembershipLost(err: unknown): err is MembershipLostError {
  return err instanceof MembershipLostError;
}

function describe(err: unknown): string {
  if (err instanceof Error) return err.message;
  return String(err);
}

/** A store's own code for an error, where its backend put one: `errorCode`, or a numeric `code`. */
function codeOf(err: unknown): number | undefined {
  if (typeof err !== "object" || err === null) return undefined;
  const { errorCode, code } = err as { errorCode?: unknown; code?: unknown };
  if (typeof errorCode === "number") return errorCode;
  if (typeof code === "number") return code;
  return undefined;
}
