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
import type { Leader } from "./contract/backend";
import { NatsKvBackend } from "./stores/nats-kv/recipe";
import { checkBucket, checkKey, type NatsKvBucket } from "./stores/nats-kv/nats/client";
import { NatsKvAdapter } from "./stores/nats-kv/nats/adapter";
import { replicatedBucketProblem } from "./stores/nats-kv/replicas";

export type { NatsKvBucket };
import { Election } from "./election/election";
import { abortError } from "./leadership/lost";
import { optionsForBucket, splitOptions, timingFor, type NatsElectionOptions } from "./stores/nats-kv/options";
import { LeaderObserver } from "./election/observer";
import { resolveOptions } from "./election/options";
import { readCandidates, type Candidates } from "./election/candidates";
import { checkSignal } from "./util/abort";

export type { NatsElectionOptions, Candidates };

/** The one-object form: `natsLeader({ bucket, key, name, ...options })`. */
export interface NatsElectionSettings extends NatsElectionOptions {
  bucket: NatsKvBucket;
  key: string;
  name: string;
}

/**
 * A member of the election on `key` in the KV `bucket`, named `name`. Reads
 * the bucket's TTL first; rejects with a RangeError if the bucket has none
 * or the timing does not fit it, or if `goMembers` is set on a bucket with
 * more than one replica, and with a TypeError for a handle that is no
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
  const { backend, adapter } = backendFor(bucket, key, name ?? "", "name");
  const { goMembers, timing } = splitOptions(options);
  const bucketNow = await backend.bucketStatus(AbortSignal.timeout(requestTimeout(timing)));
  const replicatedProblem = replicatedBucketProblem(bucketNow, adapter, goMembers);
  if (replicatedProblem) throw replicatedProblem;
  const resolved = optionsForBucket(bucketNow, timing);
  backend.useTiming(timingFor(bucketNow.name, bucketNow.ttlMs, timing, resolved), { goMembers });
  return new Election(backend, name!, resolved);
}

export namespace natsLeader {
  /** Follows who leads the election on `key` without joining it; `.start()` or iterate to begin. */
  export function observe(bucket: NatsKvBucket, key: string, options: NatsElectionOptions = {}): LeaderObserver {
    const { backend } = backendFor(bucket, key, "observer");
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
    const { backend } = backendFor(bucket, key, "observer");
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

  /**
   * Who is in line: on NATS KV the leader alone (`scope: "leader"`), since a
   * member that does not lead holds nothing in the bucket.
   */
  export async function candidates(
    bucket: NatsKvBucket,
    key: string,
    options: { requestTimeout?: number; signal?: AbortSignal } = {},
  ): Promise<Candidates> {
    const { backend } = backendFor(bucket, key, "observer");
    return readCandidates(backend, requestTimeout(options), checkSignal(options.signal, "candidates()"));
  }
}

function isSettings(value: unknown): value is NatsElectionSettings {
  return typeof value === "object" && value !== null && "bucket" in value && "key" in value;
}

function backendFor(bucket: unknown, key: unknown, name: unknown, nameRole?: "name"): { backend: NatsKvBackend; adapter: NatsKvAdapter } {
  checkBucket(bucket);
  if (typeof key !== "string" || key === "") throw new TypeError(`key must be a non-empty string, got ${typeof key}`);
  checkKey(key);
  if (nameRole && (typeof name !== "string" || name.trim() === "")) {
    throw new TypeError(`name must be a non-empty string, got ${JSON.stringify(name)}`);
  }
  const adapter = new NatsKvAdapter(bucket);
  return { backend: new NatsKvBackend(adapter, key, String(name)), adapter };
}

/** The timeout for the reads made before the options are resolved against the bucket. */
function requestTimeout(options: { requestTimeout?: number }): number {
  return options.requestTimeout ?? 5_000;
}
