// The thin adapter over a JetStream KV bucket handle (`@nats-io/kv`'s KV, as
// `await new Kvm(nc).open(bucket)` gives it). The backend talks to the bucket
// only through the methods named in NatsKvBucket, so this package never loads
// a NATS module itself: the user's handle brings its client along.
//
// Errors are classified here, once, by the names and codes the client gives
// them (checked against nats-server 2.9 in test/stores/nats-kv/nats-kv-facts.test.ts):
// - a failed revision check (`create` over a live entry, `update` or `delete`
//   with a stale revision) is JetStream API error 10071, "wrong last
//   sequence: <current revision>": the key is not ours;
// - a missing bucket is StreamNotFoundError (10059) on reads and creates,
//   and "no responders" on updates and deletes;
// - anything else (TimeoutError, a closed or reconnecting connection) is
//   transient, and the state machine retries it.

/** One entry of the key, as `get` or a watch gives it. */
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
  status(): Promise<{ readonly bucket: string; readonly ttl: number }>;
}

const BUCKET_METHODS = ["create", "update", "delete", "get", "watch", "status"] as const;

/** The JetStream API error of a failed revision check (JSStreamWrongLastSequenceErrF). */
const WRONG_LAST_SEQUENCE = 10071;
/** JSStreamNotFoundErr: the bucket's stream does not exist. */
const STREAM_NOT_FOUND = 10059;

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

/** For a failed revision check, the key's current revision (0 if absent); undefined for any other error. */
export function wrongLastSequence(err: unknown): number | undefined {
  const { code, message } = (err ?? {}) as { code?: unknown; message?: unknown };
  if (code !== WRONG_LAST_SEQUENCE) return undefined;
  const current = /wrong last sequence: (\d+)/.exec(String(message))?.[1];
  return current === undefined ? 0 : Number(current);
}

/**
 * Whether the bucket's stream does not exist (never made, or deleted): reads
 * and creates say StreamNotFoundError; an update or delete finds nobody to
 * answer its subject, which the client reports as JetStreamNotEnabled caused
 * by "no responders" (checked in test/stores/nats-kv/nats-kv-facts.test.ts).
 */
export function isBucketMissing(err: unknown): boolean {
  const { code, name, cause } = (err ?? {}) as { code?: unknown; name?: unknown; cause?: { message?: unknown } };
  if (code === STREAM_NOT_FOUND || name === "StreamNotFoundError") return true;
  return name === "JetStreamNotEnabled" && String(cause?.message ?? "").startsWith("no responders");
}

/** A value, or a marker, of the election key as a member reads it. */
export interface KeyState {
  /** The holder's name; undefined when the key is absent, deleted or purged. */
  readonly name: string | undefined;
  /** The entry's revision; 0 when the key is absent. */
  readonly revision: number;
  /** performance.now() when the entry was seen: the server wrote it before then. */
  readonly seenAt: number;
}

export function keyState(entry: NatsKvEntry | null, seenAt = performance.now()): KeyState {
  if (!entry) return { name: undefined, revision: 0, seenAt };
  return { name: entry.operation === "PUT" ? entry.string() : undefined, revision: entry.revision, seenAt };
}
