// What the NATS KV recipe asks of its store, in JetStream KV's own terms: one
// bucket, whose entries live its TTL (the stream's max_age) from their last
// write, and per key a history in which every write has a revision (its
// stream sequence) that only grows while the bucket lives.
//
// The recipe (recipe.ts, follower.ts, holder.ts, watch.ts, go-members.ts)
// knows the store only through this port. nats/adapter.ts implements it on a
// bucket handle of @nats-io/kv; a simulated store can implement it too, and
// run the same recipe in virtual time.
//
// What the recipe relies on:
// - `create` and `update` answer the revision of the write they made. A
//   revision check that fails (create over a live value, update or delete at a
//   revision that is not the key's last) fails with an error for which
//   `wrongLastSequence` gives the key's current revision; nothing else does.
// - `createIfAbsent` succeeds only on a key with no entry at all, and so does
//   exactly one of any number sent together, on a replicated bucket too.
//   (nats-server 2.9 checks a revision above 0 only on the stream's leader,
//   before it proposes the write, so on a bucket with more than one replica
//   two updates or deletes conditioned on one revision can both succeed; a
//   create's check of "no entry" is made by every replica as it applies the
//   write, in the stream log's order: test/stores/nats-kv/nats-kv-cluster-facts.test.ts.)
// - A bucket that does not exist (never made, or deleted) fails every
//   request with an error `isBucketMissing` recognises.
// - Any other failure (a timeout, a closed connection) is transient: the
//   state machine retries. A request's promise settles with its own outcome;
//   a request the recipe stopped waiting for may still be applied, and the
//   recipe undoes such a write itself.
// - A watch delivers every write to the key made after `watch` resolved,
//   values and delete or purge markers alike, in revision order, each once;
//   an entry that ages out by max_age gives no event (nats-server 2.9). It
//   reports its own end, unless the recipe stopped it.

/** The bucket's status: its name, how long it keeps an entry after its last write, and on how many servers. */
export interface KvStatus {
  /** The bucket's name. */
  readonly bucket: string;
  /** The bucket's max_age in milliseconds; 0 when entries never age out. */
  readonly ttl: number;
  /** How many servers hold the bucket's stream (1 on a single server, or an R1 bucket in a cluster). */
  readonly replicas: number;
}

/** The key's latest entry, as a read gives it. */
export interface KvEntry {
  /** The value written; undefined for the marker a delete or purge leaves. */
  readonly value: string | undefined;
  readonly revision: number;
}

/** Told of a watched key's entries, in revision order, as they arrive. */
export interface KvWatchListener {
  /** A write to the key: its value (undefined for a delete or purge marker) and its revision. */
  onEntry(value: string | undefined, revision: number): void;
  /** The watch ended by itself (the connection closed, the server dropped it), with why. Never after stop(). */
  onEnd(error: Error): void;
}

/** An open watch of one key. */
export interface KvWatch {
  /** Starts telling `listener` of the key's writes, from the first after the watch opened. Called once. */
  listen(listener: KvWatchListener): void;
  /** Stops the watch and lets go of what it holds on the server. */
  stop(): void;
}

/** One bucket of a JetStream KV store, as the recipe uses it. */
export interface NatsKvPort {
  /** Writes `value` at `key` if the key has no value (absent, deleted or purged); answers the write's revision. */
  create(key: string, value: string): Promise<number>;
  /** Writes `value` at `key` only if the key has no entry, not even a delete or purge marker; answers the write's revision. */
  createIfAbsent(key: string, value: string): Promise<number>;
  /** Writes `value` at `key` if the key's last revision is `revision`; answers the write's revision. */
  update(key: string, value: string, revision: number): Promise<number>;
  /** Deletes `key` (leaves a delete marker) if its last revision is `revision`. */
  delete(key: string, revision: number): Promise<void>;
  /** The key's latest entry; undefined if it has none (never written, or aged out). On a replicated bucket, as the stream's leader has it. */
  get(key: string): Promise<KvEntry | undefined>;
  /** The bucket's name and TTL. */
  status(): Promise<KvStatus>;
  /** Opens a watch of the writes to `key` from now on (not of its current value). */
  watch(key: string): Promise<KvWatch>;
  /** For a failure of create, update or delete: the key's current revision (0 if absent) if the revision check failed; else undefined. */
  wrongLastSequence(error: unknown): number | undefined;
  /** Whether a failure says that the bucket does not exist. */
  isBucketMissing(error: unknown): boolean;
}
