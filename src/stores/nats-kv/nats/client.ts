// What the user hands the NATS entry: a JetStream KV bucket handle
// (`@nats-io/kv`'s KV, as `await new Kvm(nc).open(bucket)` gives it), and the
// checks made on it and on the key before anything is sent. This package
// never loads a NATS module itself: the user's handle brings its client along.
// The recipe never sees the handle: adapter.ts turns it into the port.

/** One entry of the key, as the client's `get` or a watch gives it. */
export interface NatsKvEntry {
  readonly revision: number;
  /** "PUT" for a value; "DEL" or "PURGE" for the marker a delete or purge leaves. */
  readonly operation: string;
  string(): string;
}

/** A watch's iterator: entries as they come, until `stop()`. */
export interface NatsKvWatch extends AsyncIterable<NatsKvEntry> {
  stop(): void;
}

/** The part of a KV bucket handle this package uses. @nats-io/kv's `KV` has it. */
export interface NatsKvBucket {
  create(key: string, value: string): Promise<number>;
  update(key: string, value: string, revision: number): Promise<number>;
  delete(key: string, options?: { previousSeq: number }): Promise<void>;
  get(key: string): Promise<NatsKvEntry | null>;
  watch(options: { key: string; include?: "updates" }): Promise<NatsKvWatch>;
  status(): Promise<{ readonly bucket: string; readonly ttl: number; readonly replicas?: number }>;
}

/** A stored message of the bucket's stream, as the JetStream manager reads it. */
export interface NatsStoredMessage {
  readonly seq: number;
  readonly header: { get(name: string): string };
  string(): string;
}

/**
 * What the election needs of the handle on a replicated bucket, beyond the
 * KV calls: a create checked against "no entry" alone (the client's
 * `create` turns into an update over a marker), and reads from the stream's
 * leader. @nats-io/kv's bucket handle has both, though its `KV` type names
 * only `put`.
 */
export interface ReplicatedBucketParts {
  put(key: string, value: string, options: { previousSeq: number }): Promise<number>;
  /** The bucket's stream, `KV_<bucket>`. */
  readonly stream: string;
  /** The subject the key's entries are stored under in that stream. */
  subjectForKey(key: string): string;
  readonly jsm: {
    readonly streams: {
      getMessage(stream: string, query: { last_by_subj: string }): Promise<NatsStoredMessage | null>;
    };
  };
  /** The client, whose connection knows the server's version. */
  readonly js?: { readonly nc?: { readonly info?: { readonly version?: string } } };
}

/** The handle's parts for a replicated bucket, or undefined if it lacks any of them (a wrapper of the user's own). */
export function replicatedParts(handle: NatsKvBucket): ReplicatedBucketParts | undefined {
  const parts = (handle ?? {}) as Partial<ReplicatedBucketParts>;
  const streams = parts.jsm?.streams;
  const complete =
    typeof parts.put === "function" &&
    typeof parts.stream === "string" &&
    typeof parts.subjectForKey === "function" &&
    typeof streams?.getMessage === "function";
  return complete ? (parts as ReplicatedBucketParts) : undefined;
}

const BUCKET_METHODS = ["create", "update", "delete", "get", "watch", "status"] as const;

/**
 * Throws a TypeError unless `handle` looks like a KV bucket. A Kvm, a
 * connection or a JetStream client is a common mistake: say what to pass.
 */
export function checkBucket(handle: unknown): asserts handle is NatsKvBucket {
  const missing = BUCKET_METHODS.filter((method) => typeof (handle as Record<string, unknown> | null)?.[method] !== "function");
  if (missing.length === 0) return;
  throw new TypeError(
    "not a NATS KV bucket (it has no " + missing.join(", ") + "): pass the bucket handle " +
      "`await new Kvm(nc).open(\"<bucket>\")` from @nats-io/kv, not a Kvm, a connection or a JetStream client",
  );
}

/**
 * Throws a TypeError for a key NATS refuses, the way the client's own check
 * does (letters, digits, `-_/=.`, no leading or trailing dot), and for an
 * empty token (`a..b`), which is no valid subject: otherwise the error would
 * come from the first write, retried forever as if transient.
 */
export function checkKey(key: string): void {
  if (/^[-/=.\w]+$/.test(key) && !key.startsWith(".") && !key.endsWith(".") && !key.includes("..")) return;
  throw new TypeError(
    `NATS refuses the key ${JSON.stringify(key)}: a KV key is letters, digits and - _ / = . ` +
      "with no leading, trailing or doubled dot",
  );
}
