// What a health probe asks of a member: is it wedged (live), and should it
// get traffic (ready)? `election.health()` answers from what the member knows
// already; src/operations/health-handler.ts serves it over HTTP.
//
// Live. A member is wedged when it has been failing to reach the store with
// no success at all in between (no join, renewal or leader report answered)
// for longer than `unhealthyAfter`: a supervisor should restart it. The
// default, 60 s or three TTLs if longer, rides out what a store's own
// fail-over takes (an etcd leader election, a NATS stream leader moving) and
// lets a member back off a few times first. It counts as failing only from
// its first error, so a member quietly waiting in line stays live however
// long it waits. Note that a store that is down for longer makes every member
// of it fail this check at once; restarting them then does not help, which is
// why the bound is the user's to choose.
//
// Ready. By default every running member is ready: a service whose members
// all serve (and only one of them runs the leader's job) must not keep its
// followers out of rotation, or a rolling update would wait for ever on a
// follower that never becomes ready. With `readiness: "leader"`, for services
// that send traffic to the leader alone, only a member that leads now is.
import type { ElectionState } from "./state";

export type Readiness = "member" | "leader";

export interface HealthOptions {
  /** "member" (the default): ready while running. "leader": ready only while leading. */
  readiness?: Readiness;
  /** Milliseconds of failing with no success in between after which the member is not live. Default 60 s, or 3 TTLs if longer. */
  unhealthyAfter?: number;
}

/** One verdict and why. */
export interface Verdict {
  readonly ok: boolean;
  readonly reason: string;
}

/** What `election.health()` returns: plain data, ready to be serialized. */
export interface ElectionHealth {
  /** The member's name. */
  readonly name: string;
  /** Which store and election it is in (the backend's description). */
  readonly store: string;
  readonly running: boolean;
  readonly state: ElectionState;
  readonly leading: boolean;
  /** The fencing token while leading. */
  readonly fencingToken: number | undefined;
  /** The leader as this member knows it (its own name while it leads). */
  readonly leader: string | undefined;
  /** Milliseconds since the store last confirmed this member's membership (its creation or a renewal); undefined if it never did. */
  readonly sinceConfirmedMs: number | undefined;
  /** Milliseconds since the first store error with no success after it; 0 when not failing. */
  readonly failingForMs: number;
  /** The last error's message while failing. */
  readonly lastError: string | undefined;
  readonly live: Verdict;
  readonly ready: Verdict;
}

/** What the member knows, from which the verdicts are made: the health less its verdicts. */
export interface HealthFacts extends Omit<ElectionHealth, "failingForMs" | "live" | "ready"> {
  /** How long the member has been failing, with no success since its first error; undefined if it is not. */
  readonly failingForMs: number | undefined;
}

export interface ResolvedHealthOptions {
  readonly readiness: Readiness;
  readonly unhealthyAfter: number;
}

const HEALTH_OPTION_NAMES = new Set(Object.keys({ readiness: true, unhealthyAfter: true } satisfies Record<keyof HealthOptions, true>));

/** The longest a Node.js timer holds: no bound here needs more. */
const MAX_BOUND_MS = 2 ** 31 - 1;

export function defaultUnhealthyAfter(ttlMs: number): number {
  return Math.max(60_000, 3 * ttlMs);
}

/** Checks `options` (from a caller, a handler's options, a command line) and fills in the defaults. */
export function resolveHealthOptions(options: unknown, ttlMs: number, where = "health()"): ResolvedHealthOptions {
  if (options === undefined) return { readiness: "member", unhealthyAfter: defaultUnhealthyAfter(ttlMs) };
  if (typeof options !== "object" || options === null) {
    throw new TypeError(`${where}: options must be an object, got ${options === null ? "null" : typeof options}`);
  }
  for (const name of Object.keys(options)) {
    if (!HEALTH_OPTION_NAMES.has(name)) {
      throw new TypeError(`${where}: unknown option ${JSON.stringify(name)}; the options are ${[...HEALTH_OPTION_NAMES].join(", ")}`);
    }
  }
  const { readiness = "member", unhealthyAfter } = options as HealthOptions;
  if (readiness !== "member" && readiness !== "leader") {
    throw new RangeError(`${where}: readiness must be "member" or "leader", got ${show(readiness)}`);
  }
  if (unhealthyAfter !== undefined && !(typeof unhealthyAfter === "number" && unhealthyAfter > 0 && unhealthyAfter <= MAX_BOUND_MS)) {
    throw new RangeError(`${where}: unhealthyAfter must be a positive number of milliseconds up to ${MAX_BOUND_MS}, got ${show(unhealthyAfter)}`);
  }
  return { readiness, unhealthyAfter: unhealthyAfter ?? defaultUnhealthyAfter(ttlMs) };
}

/** The two verdicts on `facts`. */
export function judgeHealth(facts: HealthFacts, options: ResolvedHealthOptions): ElectionHealth {
  const failingForMs = facts.failingForMs ?? 0;
  return {
    name: facts.name,
    store: facts.store,
    running: facts.running,
    state: facts.state,
    leading: facts.leading,
    fencingToken: facts.fencingToken,
    leader: facts.leader,
    sinceConfirmedMs: facts.sinceConfirmedMs,
    failingForMs,
    lastError: facts.lastError,
    live: liveness(facts, failingForMs, options.unhealthyAfter),
    ready: readiness(facts, options.readiness),
  };
}

function liveness(facts: HealthFacts, failingForMs: number, bound: number): Verdict {
  if (!facts.running) return { ok: true, reason: "stopped: not taking part, nothing to be wedged" };
  if (facts.failingForMs === undefined) return { ok: true, reason: `${facts.state}; the store answers` };
  const failing = `failing for ${seconds(failingForMs)} with no success in between (last error: ${facts.lastError ?? "unknown"})`;
  if (failingForMs < bound) return { ok: true, reason: `${facts.state}; ${failing}, under the ${seconds(bound)} bound` };
  return { ok: false, reason: `${failing}, past the ${seconds(bound)} bound: restart this member` };
}

function readiness(facts: HealthFacts, wanted: Readiness): Verdict {
  if (!facts.running) return { ok: false, reason: "stopped: not taking part in the election" };
  if (wanted === "member") return { ok: true, reason: `running (${facts.state}); readiness "member": every running member is ready` };
  if (facts.leading) return { ok: true, reason: `leads (fencing token ${facts.fencingToken})` };
  const leader = facts.leader === undefined ? "no leader known" : `${facts.leader} leads`;
  return { ok: false, reason: `${facts.state}, ${leader}; readiness "leader": only the leader is ready` };
}

function seconds(ms: number): string {
  return `${(ms / 1000).toFixed(ms < 10_000 ? 1 : 0)} s`;
}

function show(value: unknown): string {
  if (typeof value === "string") return JSON.stringify(value);
  if (typeof value === "number" || typeof value === "boolean") return String(value);
  return value === null ? "null" : typeof value;
}
