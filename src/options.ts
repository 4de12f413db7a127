// Defaults and validation for everything a user can tune, in one place. Every
// time is in milliseconds except the TTL, which etcd itself counts in seconds.

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
}

/** The options with every default filled in and checked against each other. */
export interface ResolvedOptions {
  readonly ttlSeconds: number;
  readonly ttlMs: number;
  readonly refreshInterval: number;
  readonly stepDownMargin: number;
  readonly requestTimeout: number;
  readonly retryInitialDelay: number;
  readonly retryMaxDelay: number;
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
  return value;
}

export function resolveOptions(ttl: unknown, options: ElectionOptions = {}): ResolvedOptions {
  if (typeof options !== "object" || options === null) {
    throw new TypeError(`options must be an object, got ${show(options)}`);
  }
  const ttlSeconds = resolveTtl(options.ttl ?? ttl);
  const ttlMs = ttlSeconds * 1000;
  const refreshInterval = duration("refreshInterval", options.refreshInterval, ttlMs / 2);
  const stepDownMargin = duration("stepDownMargin", options.stepDownMargin, ttlMs / 5);
  const requestTimeout = duration("requestTimeout", options.requestTimeout, Math.min(ttlMs / 2, 5000));
  const retryInitialDelay = duration("retryInitialDelay", options.retryInitialDelay, 100);
  const retryMaxDelay = duration("retryMaxDelay", options.retryMaxDelay, Math.min(5000, refreshInterval));

  const leaseHorizon = ttlMs - stepDownMargin;
  if (leaseHorizon <= refreshInterval) {
    throw new RangeError(
      `refreshInterval (${refreshInterval} ms) must be shorter than the ttl less the stepDownMargin ` +
        `(${ttlMs} - ${stepDownMargin} ms), or a healthy leader would step down between renewals`,
    );
  }
  if (retryMaxDelay < retryInitialDelay) {
    throw new RangeError(
      `retryMaxDelay (${retryMaxDelay} ms) must not be shorter than retryInitialDelay (${retryInitialDelay} ms)`,
    );
  }
  return {
    ttlSeconds, ttlMs, refreshInterval, stepDownMargin, requestTimeout,
    retryInitialDelay, retryMaxDelay, leaseHorizon,
  };
}

function duration(name: string, value: unknown, fallback: number): number {
  if (value === undefined) return fallback;
  if (typeof value !== "number" || !Number.isFinite(value) || value <= 0) {
    throw new RangeError(`${name} must be a positive number of milliseconds, got ${show(value)}`);
  }
  return value;
}

function show(value: unknown): string {
  if (typeof value === "string") return JSON.stringify(value);
  if (typeof value === "number" || typeof value === "bigint" || typeof value === "boolean") return String(value);
  if (value === null) return "null";
  return typeof value;
}
