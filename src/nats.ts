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
import type { Leader } from "./backend";
import { NatsKvBackend } from "./backends/nats-kv";
import { checkBucket, checkKey, type NatsKvBucket } from "./backends/nats-kv-client";

export type { NatsKvBucket };
import { Election } from "./election";
import { abortError } from "./leadership-lost";
import { LeaderObserver } from "./observer";
import { resolveOptions, type ElectionOptions, type ResolvedOptions } from "./options";

/** Timing for a member on a bucket: as for etcd, with defaults that follow the bucket's TTL. `ttl` may be left out. */
export type NatsElectionOptions = ElectionOptions;

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
  const resolved = optionsForBucket(await backend.bucketTtl(AbortSignal.timeout(requestTimeout(options))), options);
  return new Election(backend, name!, resolved);
}

export namespace natsLeader {
  /** Follows who leads the election on `key` without joining it; `.start()` or iterate to begin. */
  export function observe(bucket: NatsKvBucket, key: string, options: NatsElectionOptions = {}): LeaderObserver {
    const backend = backendFor(bucket, key, "observer");
    // The bucket's TTL is read when the observer starts; these only pace its retries.
    return new LeaderObserver(backend, resolveOptions(undefined, { ...options, ttl: undefined }));
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

/** The timeout for the reads made before the options are resolved against the bucket. */
function requestTimeout(options: { requestTimeout?: number }): number {
  return options.requestTimeout ?? 5_000;
}

/**
 * The member's timing on a bucket whose entries live `bucketTtlMs`: the
 * defaults follow the bucket's TTL (renew every half, step down a fifth
 * before it), and a bucket without a TTL, or one the timing does not fit, is
 * refused with both values named.
 */
function optionsForBucket(bucketTtlMs: number, options: NatsElectionOptions): ResolvedOptions {
  if (!(bucketTtlMs > 0)) {
    throw new RangeError(
      "the bucket has no TTL (max_age 0): a leader that crashed would hold the key forever; " +
        "create the bucket with one, e.g. `nats kv add --ttl 10s <bucket>` or Kvm.create(name, { ttl: 10_000 })",
    );
  }
  if (options.ttl !== undefined && Number(options.ttl) * 1000 !== bucketTtlMs) {
    throw new RangeError(
      `the ttl option (${options.ttl} s) differs from the bucket's TTL (max_age ${bucketTtlMs} ms), which is what NATS applies: ` +
        "leave the ttl option out, or make the bucket's TTL match",
    );
  }
  // Checked before the shared checks, so that the message names the bucket's TTL.
  const refreshInterval = typeof options.refreshInterval === "number" ? options.refreshInterval : bucketTtlMs / 2;
  const stepDownMargin = typeof options.stepDownMargin === "number" ? options.stepDownMargin : bucketTtlMs / 5;
  if (!(bucketTtlMs - stepDownMargin > refreshInterval)) throw tooShort(bucketTtlMs, refreshInterval, stepDownMargin);
  return resolveOptions(undefined, {
    refreshInterval: bucketTtlMs / 2,
    stepDownMargin: bucketTtlMs / 5,
    requestTimeout: Math.min(bucketTtlMs / 2, 5_000),
    ...options,
    // Whole seconds for the shared checks; the claim carries the exact TTL.
    ttl: Math.ceil(bucketTtlMs / 1000),
  });
}

function tooShort(bucketTtlMs: number, refreshInterval: number, stepDownMargin: number): RangeError {
  return new RangeError(
    `the bucket's TTL (max_age ${bucketTtlMs} ms) is too short for this member's timing: refreshInterval ` +
      `${refreshInterval} ms and stepDownMargin ${stepDownMargin} ms need a TTL above ` +
      `${refreshInterval + stepDownMargin} ms; give the bucket a longer TTL or the member shorter timings`,
  );
}
