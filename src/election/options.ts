// Defaults and validation for everything a user can tune, in one place. Every
// time is in milliseconds except the TTL, which etcd itself counts in seconds.
import { MAX_TIMER_MS } from "../util/clock";

/** Tuning for one election. Every field is optional; the defaults follow the TTL. */
export interface ElectionOptions {
  /** Seconds a membership lives without renewal. Default 10 (the four-argument call's `ttl`). */
  ttl?: number;
  /** How often a member renews its membership. Default half the TTL. */
  refreshInterval?: number;
  /**
   * How long before its membership could expire a leader stops believing it
   * leads, counted from when its last successful renewal was sent. Covers clock
   * drift and the time a successor needs to notice; default a fifth of the TTL.
   */
  stepDownMargin?: number;
  /** How long one request to the store may take before it counts as failed. Default half the TTL, at most 5 s. */
  requestTimeout?: number;
  /** First delay before retrying a failed step; doubles each time, with jitter. Default 100 ms. */
  retryInitialDelay?: number;
  /** Longest delay between retries. Default 5 s, or the refresh interval if that is shorter. */
  retryMaxDelay?: number;
  /**
   * On stop(), leave() or `await using` while leading: how long the
   * membership is held, renewed, after the step-down, for the whileLeading
   * routines of the term to settle, so that the successor's routine does not
   * start while ours is still finishing. Given up as soon as they have all
   * settled. Default the TTL (a clean stop is then never slower than a
   * crash); 0 gives the membership up at once.
   */
  drainTimeout?: number;
  /** Options of the etcd v2 store (a node-etcd client); refused with any other client. */
  v2?: EtcdV2Options | undefined;
  /** The old place of `v2.watchRearmInterval`, still accepted (with any etcd client, as before). */
  watchRearmInterval?: number;
}

/** What the etcd v2 store takes beside the election's timing. */
export interface EtcdV2Options {
  /**
   * The longest one long poll (a watch) is left waiting. Then it is abandoned
   * and asked again from the last index it saw, which replays anything it
   * missed, so a poll lost on a connection that died silently (a NAT gateway
   * or firewall dropping an idle flow) costs at most this long. Default 30 s,
   * below common idle timeouts.
   */
  watchRearmInterval?: number;
}

/**
 * Every option's name, so that a name not listed (a typo such as
 * `refreshIntervall`) is refused instead of silently ignored. `satisfies`
 * checks it against ElectionOptions both ways: an option added there does not
 * compile until it is named here too.
 */
const OPTION_NAMES: ReadonlySet<string> = new Set(
  Object.keys({
    ttl: true,
    refreshInterval: true,
    stepDownMargin: true,
    requestTimeout: true,
    retryInitialDelay: true,
    retryMaxDelay: true,
    drainTimeout: true,
    v2: true,
    watchRearmInterval: true,
  } satisfies Record<keyof ElectionOptions, true>),
);

// Every duration here ends up in a timer (the TTL itself bounds a v2
// create), so none may be longer than MAX_TIMER_MS, the longest a Node.js
// timer holds. etcd's own limit on a lease, 9,000,000,000 s, is far above it.

/** The longest TTL whose milliseconds fit a timer: 2,147,483 s. */
const MAX_TTL_SECONDS = Math.floor(MAX_TIMER_MS / 1000);

/** The options with every default filled in and checked against each other. */
export interface ResolvedOptions {
  readonly ttlSeconds: number;
  readonly ttlMs: number;
  readonly refreshInterval: number;
  readonly stepDownMargin: number;
  readonly requestTimeout: number;
  readonly retryInitialDelay: number;
  readonly retryMaxDelay: number;
  /** How long stop() holds the membership for the term's routines to settle (0: not at all). */
  readonly drainTimeout: number;
  /** From a renewal's send time: past this a leader must assume it lost. */
  readonly leaseHorizon: number;
}

export const DEFAULT_TTL_SECONDS = 10;

/**
 * Reads the TTL the way etcd-leader 0.0.1 did (absent means 10, numeric
 * strings are accepted), but refuses values that 0.0.1 silently replaced.
 */
export function resolveTtl(ttl: unknown): number {
  if (ttl === undefined || ttl === null) return DEFAULT_TTL_SECONDS;
  const value = typeof ttl === "string" && ttl.trim() !== "" ? Number(ttl) : ttl;
  if (typeof value !== "number" || !Number.isInteger(value) || value <= 0) {
    throw new RangeError(`ttl must be a positive whole number of seconds, got ${show(ttl)}`);
  }
  if (value > MAX_TTL_SECONDS) {
    throw new RangeError(
      `ttl must be at most ${MAX_TTL_SECONDS} seconds (about 24 days), got ${show(ttl)}: ` +
        `its milliseconds must fit a Node.js timer (at most ${MAX_TIMER_MS} ms)`,
    );
  }
  return value;
}

export function resolveOptions(ttl: unknown, options: ElectionOptions = {}): ResolvedOptions {
  if (typeof options !== "object" || options === null) {
    throw new TypeError(`options must be an object, got ${show(options)}`);
  }
  for (const name of Object.keys(options)) {
    if (!OPTION_NAMES.has(name)) {
      throw new TypeError(`unknown option ${JSON.stringify(name)}; the options are ${[...OPTION_NAMES].join(", ")}`);
    }
  }
  if (ttl !== undefined && ttl !== null && options.ttl !== undefined && resolveTtl(ttl) !== resolveTtl(options.ttl)) {
    throw new TypeError(
      `ttl given twice, as ${show(ttl)} and as the option ttl ${show(options.ttl)}: give it in one place`,
    );
  }
  const ttlSeconds = resolveTtl(options.ttl ?? ttl);
  const ttlMs = ttlSeconds * 1000;
  const refreshInterval = duration("refreshInterval", options.refreshInterval, ttlMs / 2);
  const stepDownMargin = duration("stepDownMargin", options.stepDownMargin, ttlMs / 5);
  const requestTimeout = duration("requestTimeout", options.requestTimeout, Math.min(ttlMs / 2, 5000));
  const retryInitialDelay = duration("retryInitialDelay", options.retryInitialDelay, 100);
  const retryMaxDelay = duration("retryMaxDelay", options.retryMaxDelay, Math.min(5000, refreshInterval));
  // 0 is allowed here: no drain.
  const drainTimeout = options.drainTimeout === 0 ? 0 : duration("drainTimeout", options.drainTimeout, ttlMs);

  const leaseHorizon = ttlMs - stepDownMargin;
  // A message names which of its values are defaults: the user set the others.
  const given = (name: keyof ElectionOptions, value: number) => `${value} ms${options[name] === undefined ? ", the default" : ""}`;
  if (leaseHorizon <= refreshInterval) {
    throw new RangeError(
      `refreshInterval (${given("refreshInterval", refreshInterval)}) must be shorter than the ttl less the stepDownMargin ` +
        `(${ttlMs} - ${given("stepDownMargin", stepDownMargin)}), or a healthy leader would step down between renewals`,
    );
  }
  if (retryMaxDelay < retryInitialDelay) {
    throw new RangeError(
      `retryMaxDelay (${given("retryMaxDelay", retryMaxDelay)}) must not be shorter than retryInitialDelay (${given("retryInitialDelay", retryInitialDelay)})`,
    );
  }
  return {
    ttlSeconds, ttlMs, refreshInterval, stepDownMargin, requestTimeout,
    retryInitialDelay, retryMaxDelay, drainTimeout, leaseHorizon,
  };
}

/** A duration option in milliseconds: `fallback` when undefined, else positive and short enough for a timer. */
export function duration(name: string, value: unknown, fallback: number): number {
  if (value === undefined) return fallback;
  if (typeof value !== "number" || !Number.isFinite(value) || value <= 0) {
    throw new RangeError(`${name} must be a positive number of milliseconds, got ${show(value)}`);
  }
  if (value > MAX_TIMER_MS) {
    throw new RangeError(`${name} must be at most ${MAX_TIMER_MS} ms (the longest a Node.js timer holds), got ${show(value)}`);
  }
  return value;
}

function show(value: unknown): string {
  if (typeof value === "string") return JSON.stringify(value);
  if (typeof value === "number" || typeof value === "bigint" || typeof value === "boolean") return String(value);
  if (value === null) return "null";
  return typeof value;
}
