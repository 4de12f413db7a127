// The options of a member on a NATS KV bucket, checked against the bucket.
// The TTL is the bucket's max_age, read from its status, so the checks name
// the bucket's TTL and say which values were defaults that follow it, before
// the shared checks (src/election/options.ts), which would name a `ttl` the user never
// set. The TTL checks run again for a win on a bucket that was deleted and
// made again with another TTL (recipe.ts).
import type { NatsTiming } from "./recipe";
import { MAX_TIMER_MS } from "../../util/clock";
import { resolveOptions, type ElectionOptions, type ResolvedOptions } from "../../election/options";

/** Timing for a member on a bucket: as for etcd, with defaults that follow the bucket's TTL. `ttl` may be left out. */
export interface NatsElectionOptions extends ElectionOptions {
  /**
   * Members of the Go nats-kv-leader-elect may take part in this election.
   * A Go leader has no watch: after its key is deleted or purged it goes on
   * saying it leads until its next campaign tick's update fails, up to
   * 0.75 × TTL + 5 s after its last write. With this option a member that
   * wins the key holds it (renewing it) and says `elected` only once
   * 0.75 × TTL + 5.2 s have passed since the newest earlier write to the key
   * reached it (or since it began watching, if none did), so that the two
   * never lead at once. A win over a key that aged out costs nothing more
   * (TTL ≥ 21 s); one after a delete or purge, or a first win after starting,
   * up to 0.75 × TTL + 5.2 s. Default false. An observer ignores it.
   */
  goMembers?: boolean;
}

/**
 * The NATS-only options apart from the timing, which is checked as etcd's
 * is (src/election/options.ts refuses any option it does not know).
 */
export function splitOptions(options: NatsElectionOptions): { goMembers: boolean; timing: ElectionOptions } {
  if (typeof options !== "object" || options === null) {
    throw new TypeError(`options must be an object, got ${options === null ? "null" : typeof options}`);
  }
  const { goMembers, ...timing } = options;
  if ((timing as ElectionOptions).v2 !== undefined) {
    throw new TypeError("the v2 option is for the etcd v2 store (a node-etcd client), not for NATS KV: leave it out");
  }
  if (goMembers !== undefined && typeof goMembers !== "boolean") {
    throw new TypeError(`goMembers must be true or false, got ${typeof goMembers === "string" ? JSON.stringify(goMembers) : typeof goMembers}`);
  }
  return { goMembers: goMembers === true, timing };
}

/**
 * The member's timing on the bucket `name` whose entries live `ttlMs`: the
 * defaults follow the bucket's TTL (renew every half, step down a fifth
 * before it). A bucket without a TTL, one the timing does not fit, and a
 * `ttl` option that is not the bucket's are refused with a RangeError.
 */
export function optionsForBucket(bucket: { name: string; ttlMs: number }, options: ElectionOptions): ResolvedOptions {
  const { ttlMs } = bucket;
  if (ttlMs > 0 && options.ttl !== undefined && Number(options.ttl) * 1000 !== ttlMs) {
    throw new RangeError(
      `the ttl option (${options.ttl} s) differs from the bucket's TTL (max_age ${ttlMs} ms), which is what NATS applies: ` +
        "leave the ttl option out, or make the bucket's TTL match",
    );
  }
  const problem = ttlProblem(bucket.name, ttlMs, options);
  if (problem) throw problem;
  const { refreshInterval = ttlMs / 2, retryInitialDelay = 100 } = options;
  const longestRetryDelay = Math.min(5_000, refreshInterval);
  // (A value that is no number is named by the shared checks.)
  if (options.retryMaxDelay === undefined && typeof retryInitialDelay === "number" && retryInitialDelay > longestRetryDelay) {
    throw new RangeError(
      `retryInitialDelay (${retryInitialDelay} ms) is longer than the longest retry delay, which is by default the ` +
        `refresh interval (${longestRetryDelay} ms${options.refreshInterval === undefined ? ", half the bucket's TTL" : ""}), ` +
        "at most 5 s: set retryMaxDelay too, or a shorter retryInitialDelay",
    );
  }
  return resolveOptions(undefined, {
    refreshInterval: ttlMs / 2,
    stepDownMargin: ttlMs / 5,
    requestTimeout: Math.min(ttlMs / 2, 5_000),
    ...options,
    // Whole seconds for the shared checks; the claim carries the exact TTL.
    ttl: Math.ceil(ttlMs / 1000),
  });
}

/**
 * What a member with `options` finds wrong with a bucket TTL of `ttlMs`, as
 * a RangeError; undefined if nothing. `madeWithTtlMs` is the TTL its defaults
 * followed, when the bucket had another TTL as the member was made.
 */
export function ttlProblem(bucketName: string, ttlMs: number, options: ElectionOptions, madeWithTtlMs = ttlMs): RangeError | undefined {
  const bucket = `the bucket ${JSON.stringify(bucketName)}`;
  const remade = madeWithTtlMs === ttlMs ? "" : ` (it was ${madeWithTtlMs} ms when this member was made: deleted and made again?)`;
  if (!(ttlMs > 0)) {
    return new RangeError(
      `the bucket has no TTL (max_age 0)${remade}: a leader that crashed would hold the key forever; ` +
        "create the bucket with one, e.g. `nats kv add --ttl 10s <bucket>` or Kvm.create(name, { ttl: 10_000 })",
    );
  }
  if (ttlMs > MAX_TIMER_MS) {
    return new RangeError(
      `${bucket} keeps entries for ${days(ttlMs)} (max_age ${ttlMs} ms)${remade}, ` +
        `longer than a Node.js timer can wait (${MAX_TIMER_MS} ms, about 24.8 days), and a leader's deadline is ` +
        "counted on one: make the bucket with a shorter TTL (a crashed leader's key lives that long; seconds to " +
        "minutes are usual), e.g. `nats kv add --ttl 1m <bucket>`",
    );
  }
  const { refreshInterval = madeWithTtlMs / 2, stepDownMargin = madeWithTtlMs / 5 } = options;
  // A value that is no number is named by the shared checks.
  if (typeof refreshInterval !== "number" || typeof stepDownMargin !== "number") return undefined;
  if (ttlMs - stepDownMargin > refreshInterval) return undefined;
  const of = madeWithTtlMs === ttlMs ? "" : ` of ${madeWithTtlMs} ms`;
  return new RangeError(
    `${remade ? bucket : "the bucket"}'s TTL (max_age ${ttlMs} ms)${remade} is too short for this member's timing: ` +
      `${described("refreshInterval", refreshInterval, options.refreshInterval, `TTL/2${of}`)} and ` +
      `${described("stepDownMargin", stepDownMargin, options.stepDownMargin, `TTL/5${of}`)} need a TTL above ` +
      `${refreshInterval + stepDownMargin} ms; give the bucket a longer TTL or the member shorter timings`,
  );
}

/** The timing a backend checks a win against, with the message for a TTL it does not fit. */
export function timingFor(bucketName: string, madeWithTtlMs: number, options: ElectionOptions, resolved: ResolvedOptions): NatsTiming {
  return {
    refreshInterval: resolved.refreshInterval,
    stepDownMargin: resolved.stepDownMargin,
    requestTimeout: resolved.requestTimeout,
    retryInitialDelay: resolved.retryInitialDelay,
    retryMaxDelay: resolved.retryMaxDelay,
    ttlProblem: (ttlMs) => ttlProblem(bucketName, ttlMs, options, madeWithTtlMs),
  };
}

/** "refreshInterval 900 ms", or "refreshInterval 1000 ms (the default, TTL/2)" for one not set. */
function described(name: string, value: number, given: unknown, defaultIs: string): string {
  return `${name} ${value} ms${given === undefined ? ` (the default, ${defaultIs})` : ""}`;
}

/** A duration in days, for a message: "25 days". */
function days(ms: number): string {
  const value = Math.round((ms / 86_400_000) * 10) / 10;
  return `${value} day${value === 1 ? "" : "s"}`;
}
