// What a backend answers is checked where it crosses into the state machine:
// a backend may be the user's own, and a claim it gets wrong is a leader that
// never steps down (a `sentAt` from Date.now() puts the deadline decades
// away), a fencing token that fences nothing, or a membership nobody can give
// back. A claim that breaks a rule of the contract (backend.ts) is reported
// and never led on; a leader report that does is reported and ignored.
import type { Claim, Leader, Membership, Renewed } from "./backend";

/**
 * A backend answered with a claim (or a renewal) that breaks the contract:
 * the field, and what is wrong with it.
 */
export class InvalidClaimError extends Error {
  override readonly name = "InvalidClaimError";
  constructor(
    /** The backend's description ("custom backend" when it gives none). */
    readonly backend: string,
    /**
     * The field at fault: of a claim, "claim", "membership", "membership.id",
     * "token", "sentAt" or "ttlMs"; of a renewal, "renewal" or "sentAt".
     */
    readonly field: string,
    problem: string,
    /** What the backend answered: a claim, or a renewal (which then extends no term). */
    readonly answer: "claim" | "renewal" = "claim",
  ) {
    super(
      answer === "claim"
        ? `${backend} answered with a claim whose ${field} ${problem}; it is not led on`
        : `${backend} answered a renewal with ${field === "renewal" ? "" : `a ${field} that `}${problem}; it extends no term`,
    );
  }
}

/**
 * What is wrong with a claim the backend has just made (by `join`, or by an
 * `awaitTurn` that won), `now` being performance.now() as the answer came;
 * undefined if nothing is. Its write was sent during the call, so `sentAt` is
 * not later than now and not older than the time to live: a membership whose
 * TTL has run out since it was written may be gone already.
 */
export function newClaimProblem(claim: unknown, now: number): { field: string; problem: string } | undefined {
  const shape = shapeProblem(claim);
  if (shape) return shape;
  const { sentAt, ttlMs } = claim as Claim;
  if (sentAt > now) {
    return {
      field: "sentAt",
      problem:
        `(${sentAt}) is later than now (${Math.round(now)}) on performance.now()'s clock: take it from ` +
        "performance.now() just before the write is sent (Date.now() is another clock)",
    };
  }
  if (now - sentAt >= ttlMs) {
    return {
      field: "sentAt",
      problem:
        `is ${Math.round(now - sentAt)} ms ago, at least the ttlMs of ${ttlMs} ms: the membership may have expired ` +
        "already (take sentAt from performance.now() just before the write is sent)",
    };
  }
  return undefined;
}

/**
 * What is wrong with the claim `awaitTurn` resolved with when it was handed
 * `held` (a queue-style member's place in line, or a race-style member's key
 * after a phase started over): it must be that membership, with that token.
 */
export function heldClaimProblem(claim: unknown, held: Claim): { field: string; problem: string } | undefined {
  const shape = shapeProblem(claim);
  if (shape) return shape;
  const { membership, token } = claim as Claim;
  if (membership.id !== held.membership.id) {
    return {
      field: "membership.id",
      problem: `is ${JSON.stringify(membership.id)}, but awaitTurn was handed ${JSON.stringify(held.membership.id)} and must resolve with it`,
    };
  }
  if (token !== held.token) {
    return { field: "token", problem: `is ${token}, but the membership awaitTurn was handed carries ${held.token}` };
  }
  return undefined;
}

/**
 * The send time a renewal answered with (`renew`'s `{ sentAt }`), or what is
 * wrong with it: `calledAt` is performance.now() as the call was made, `now`
 * as the answer came, `previous` the send time of the membership's newest
 * write confirmed before. A renewal answered with nothing was sent during
 * the call, from `calledAt` at the earliest. One sent before the previous
 * write would count the term from a moment the store has already renewed
 * past, and one later than now comes from another clock: neither is taken.
 */
export function renewalSentAt(
  answer: unknown,
  calledAt: number,
  now: number,
  previous: number,
): { sentAt: number } | { field: string; problem: string } {
  if (answer === undefined || answer === null) return { sentAt: calledAt };
  if (typeof answer !== "object") {
    return { field: "renewal", problem: `${describe(answer)}, not undefined or { sentAt }` };
  }
  const { sentAt } = answer as Partial<Renewed>;
  if (typeof sentAt !== "number" || !Number.isFinite(sentAt)) {
    return { field: "sentAt", problem: `is ${describe(sentAt)}, not a finite performance.now() time` };
  }
  if (sentAt > now) {
    return {
      field: "sentAt",
      problem:
        `(${sentAt}) is later than now (${Math.round(now)}) on performance.now()'s clock: ` +
        "take it from performance.now() just before the renewing write is sent (Date.now() is another clock)",
    };
  }
  if (sentAt < previous) {
    return {
      field: "sentAt",
      problem:
        `(${sentAt}) is earlier than the send time of the membership's newest write confirmed before ` +
        `(${previous}): a renewal answers with the write that renewed it, sent no earlier than that one`,
    };
  }
  return { sentAt };
}

/** What is wrong with a leader a backend reported (to `onLeader`, or from readLeader): undefined if nothing is. */
export function leaderProblem(leader: unknown): string | undefined {
  if (leader === undefined) return undefined;
  if (typeof leader !== "object" || leader === null) return `is ${describe(leader)}, not { name, token } or undefined`;
  const { name, token } = leader as Leader;
  if (typeof name !== "string") return `has a name that is ${describe(name)}, not a string`;
  if (typeof token !== "number" || !Number.isFinite(token)) return `has a token that is ${describe(token)}, not a finite number`;
  return undefined;
}

function shapeProblem(claim: unknown): { field: string; problem: string } | undefined {
  if (typeof claim !== "object" || claim === null) return { field: "claim", problem: `itself is ${describe(claim)}, not an object` };
  const { membership, token, sentAt, ttlMs } = claim as Partial<Record<keyof Claim, unknown>>;
  if (typeof membership !== "object" || membership === null) {
    return { field: "membership", problem: `is ${describe(membership)}, not an object with an id` };
  }
  const { id } = membership as Partial<Membership>;
  if (typeof id !== "string" || id === "") return { field: "membership.id", problem: `is ${describe(id)}, not a non-empty string` };
  if (typeof token !== "number" || !Number.isFinite(token)) {
    return { field: "token", problem: `is ${describe(token)}, not a finite number (the fencing token)` };
  }
  if (typeof ttlMs !== "number" || !Number.isFinite(ttlMs) || ttlMs <= 0) {
    return { field: "ttlMs", problem: `is ${describe(ttlMs)}, not a positive finite number of milliseconds` };
  }
  if (typeof sentAt !== "number" || !Number.isFinite(sentAt)) {
    return { field: "sentAt", problem: `is ${describe(sentAt)}, not a finite performance.now() time` };
  }
  return undefined;
}

function describe(value: unknown): string {
  if (typeof value === "string") return JSON.stringify(value);
  if (value === null || value === undefined || typeof value === "number" || typeof value === "boolean") return String(value);
  return `a ${typeof value}`;
}

/**
 * Calls into a backend so that whatever it does comes back as a promise: a
 * method of the user's own may throw before it returns one, or return none.
 */
export function callBackend<T>(method: () => Promise<T>): Promise<T> {
  try {
    return Promise.resolve(method());
  } catch (err) {
    return Promise.reject(err);
  }
}
