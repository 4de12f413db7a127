// The NATS entry, `etcd-leader/nats`: the same Election, observer and
// one-shot read on one key of a JetStream KV bucket. Nothing here loads a
// NATS module: the caller's bucket handle (from @nats-io/kv) brings its
// client, and the main entry never loads this file.
//
//   const kv = await new Kvm(nc).open("elections");   // made with a TTL (max_age)
//   const election = await natsLeader(kv, "billing", "worker-1");
//   election.start();
//
// The TTL is the bucket's max_age, the same for every key in it; the member
// reads it from the bucket's status, so `natsLeader` is async, and refuses
// there, at once, a bucket without a TTL or one too short for the timing.
//
// In an election with Go members, followers, observers and whoLeads() name
// the member that holds the key from its winning create on, while a Go
// member says it leads only after its next update (0.75 × TTL later) plus
// 200 ms, and one of ours with `goMembers` only after its wait; one that dies
// before it says so is named until its key ages out. They name the holder
// because nobody else can lead while it holds the key; when the holder will
// say it leads depends on its implementation and is nowhere in the store.
import type { Leader } from "./backend";
import { NatsKvBackend } from "./backends/nats-kv";
import { checkBucket, checkKey, type NatsKvBucket } from "./backends/nats-kv-client";
import { MAX_TIMER_MS } from "./backends/nats-kv-watch";

export type { NatsKvBucket };
import { Election } from "./election";
import { abortError } from "./leadership-lost";
import { LeaderObserver } from "./observer";
import { resolveOptions, type ElectionOptions, type ResolvedOptions } from "./options";

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

/** The one-object form: `natsLeader({ bucket, key, name, ...options })`. */
export interface NatsElectionSettings extends NatsElectionOptions {
  bucket: NatsKvBucket;
  key: string;
  name: string;
}

/**
 * A member of the election on `key` in the KV `bucket`, named `name`. Reads
 * the bucket's TTL first; rejects with a RangeError if the bucket has none
 * or the timing does not fit it, and with a TypeError for a handle that is no
 * bucket or a key NATS refuses. Call `.start()` on the result to campaign.
 */
export async function natsLeader(settings: NatsElectionSettings): Promise<Election>;
export async function natsLeader(bucket: NatsKvBucket, key: string, name: string, options?: NatsElectionOptions): Promise<Election>;
export async function natsLeader(
  bucket: NatsKvBucket | NatsElectionSettings,
  key?: string,
  name?: string,
  options: NatsElectionOptions = {},
): Promise<Election> {
  if (key === undefined && isSettings(bucket)) {
    const { bucket: b, key: k, name: n, ...rest } = bucket;
    return natsLeader(b, k, n, rest);
  }
  const backend = backendFor(bucket, key, name ?? "", "name");
  const { goMembers, timing } = splitOptions(options);
  const resolved = optionsForBucket(await backend.bucketStatus(AbortSignal.timeout(requestTimeout(timing))), timing);
  if (goMembers) backend.waitForGoMembers(resolved);
  return new Election(backend, name!, resolved);
}

export namespace natsLeader {
  /** Follows who leads the election on `key` without joining it; `.start()` or iterate to begin. */
  export function observe(bucket: NatsKvBucket, key: string, options: NatsElectionOptions = {}): LeaderObserver {
    const backend = backendFor(bucket, key, "observer");
    // The bucket's TTL is read when the observer starts; these only pace its retries.
    const { timing } = splitOptions(options);
    return new LeaderObserver(backend, resolveOptions(undefined, { ...timing, ttl: undefined }));
  }

  /** One read of who leads the election on `key`: `{ name, token }`, or undefined while nobody does. */
  export async function whoLeads(
    bucket: NatsKvBucket,
    key: string,
    options: { requestTimeout?: number; signal?: AbortSignal } = {},
  ): Promise<Leader | undefined> {
    const backend = backendFor(bucket, key, "observer");
    const timeout = AbortSignal.timeout(requestTimeout(options));
    const { signal } = options;
    if (signal?.aborted) throw abortError(signal.reason);
    try {
      return await backend.readLeader(signal ? AbortSignal.any([signal, timeout]) : timeout);
    } catch (err) {
      if (signal?.aborted) throw abortError(signal.reason);
      throw err;
    }
  }
}

function isSettings(value: unknown): value is NatsElectionSettings {
  return typeof value === "object" && value !== null && "bucket" in value && "key" in value;
}

function backendFor(bucket: unknown, key: unknown, name: unknown, nameRole?: "name"): NatsKvBackend {
  checkBucket(bucket);
  if (typeof key !== "string" || key === "") throw new TypeError(`key must be a non-empty string, got ${typeof key}`);
  checkKey(key);
  if (nameRole && (typeof name !== "string" || name.trim() === "")) {
    throw new TypeError(`name must be a non-empty string, got ${JSON.stringify(name)}`);
  }
  return new NatsKvBackend(bucket, key, String(name));
}

/**
 * The NATS-only options apart from the timing, which is checked as etcd's
 * is (src/options.ts refuses any option it does not know).
 */
function splitOptions(options: NatsElectionOptions): { goMembers: boolean; timing: ElectionOptions } {
  if (typeof options !== "object" || options === null) {
    throw new TypeError(`options must be an object, got ${options === null ? "null" : typeof options}`);
  }
  const { goMembers, ...timing } = options;
  if (goMembers !== undefined && typeof goMembers !== "boolean") {
    throw new TypeError(`goMembers must be true or false, got ${typeof goMembers === "string" ? JSON.stringify(goMembers) : typeof goMembers}`);
  }
  return { goMembers: goMembers === true, timing };
}

/** The timeout for the reads made before the options are resolved against the bucket. */
function requestTimeout(options: { requestTimeout?: number }): number {
  return options.requestTimeout ?? 5_000;
}

/**
 * The member's timing on a bucket whose entries live `ttlMs`: the defaults
 * follow the bucket's TTL (renew every half, step down a fifth before it),
 * and a bucket without a TTL, or one the timing does not fit, is refused with
 * what the bucket holds and what was set named, before the shared checks
 * (src/options.ts), which would name a `ttl` the user never set.
 */
function optionsForBucket(bucket: { name: string; ttlMs: number }, options: ElectionOptions): ResolvedOptions {
  const { ttlMs } = bucket;
  if (!(ttlMs > 0)) {
    throw new RangeError(
      "the bucket has no TTL (max_age 0): a leader that crashed would hold the key forever; " +
        "create the bucket with one, e.g. `nats kv add --ttl 10s <bucket>` or Kvm.create(name, { ttl: 10_000 })",
    );
  }
  if (options.ttl !== undefined && Number(options.ttl) * 1000 !== ttlMs) {
    throw new RangeError(
      `the ttl option (${options.ttl} s) differs from the bucket's TTL (max_age ${ttlMs} ms), which is what NATS applies: ` +
        "leave the ttl option out, or make the bucket's TTL match",
    );
  }
  if (ttlMs > MAX_TIMER_MS) {
    throw new RangeError(
      `the bucket ${JSON.stringify(bucket.name)} keeps entries for ${days(ttlMs)} (max_age ${ttlMs} ms), ` +
        `longer than a Node.js timer can wait (${MAX_TIMER_MS} ms, about 24.8 days), and a leader's deadline is ` +
        "counted on one: make the bucket with a shorter TTL (a crashed leader's key lives that long; seconds to " +
        "minutes are usual), e.g. `nats kv add --ttl 1m <bucket>`",
    );
  }
  const resolve = () =>
    resolveOptions(undefined, {
      refreshInterval: ttlMs / 2,
      stepDownMargin: ttlMs / 5,
      requestTimeout: Math.min(ttlMs / 2, 5_000),
      ...options,
      // Whole seconds for the shared checks; the claim carries the exact TTL.
      ttl: Math.ceil(ttlMs / 1000),
    });
  const { refreshInterval = ttlMs / 2, stepDownMargin = ttlMs / 5, retryInitialDelay = 100 } = options;
  // A value that is no number is named by the shared checks.
  if (![refreshInterval, stepDownMargin, retryInitialDelay].every((value) => typeof value === "number")) return resolve();
  if (!(ttlMs - stepDownMargin > refreshInterval)) {
    throw new RangeError(
      `the bucket's TTL (max_age ${ttlMs} ms) is too short for this member's timing: ` +
        `${timing("refreshInterval", refreshInterval, options.refreshInterval, "TTL/2")} and ` +
        `${timing("stepDownMargin", stepDownMargin, options.stepDownMargin, "TTL/5")} need a TTL above ` +
        `${refreshInterval + stepDownMargin} ms; give the bucket a longer TTL or the member shorter timings`,
    );
  }
  const longestRetryDelay = Math.min(5_000, refreshInterval);
  if (options.retryMaxDelay === undefined && retryInitialDelay > longestRetryDelay) {
    throw new RangeError(
      `retryInitialDelay (${retryInitialDelay} ms) is longer than the longest retry delay, which is by default the ` +
        `refresh interval (${longestRetryDelay} ms${options.refreshInterval === undefined ? ", half the bucket's TTL" : ""}), ` +
        "at most 5 s: set retryMaxDelay too, or a shorter retryInitialDelay",
    );
  }
  return resolve();
}

/** "refreshInterval 900 ms", or "refreshInterval 1000 ms (the default, TTL/2)" for one not set. */
function timing(name: string, value: number, given: unknown, defaultIs: string): string {
  return `${name} ${value} ms${given === undefined ? ` (the default, ${defaultIs})` : ""}`;
}

/** A duration in days, for a message: "25 days". */
function days(ms: number): string {
  const value = Math.round((ms / 86_400_000) * 10) / 10;
  return `${value} day${value === 1 ? "" : "s"}`;
}
