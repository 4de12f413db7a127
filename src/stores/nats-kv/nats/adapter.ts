// The port (../port.ts) on a JetStream KV bucket handle of @nats-io/kv 3.x.
// Requests go to the client as they are, their promises handed back
// untouched: the adapter adds no request, no promise and no tick to a write.
// What the client needs worked around is here, and only here.
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
//
// On a replicated bucket (its status says so) the key is read from the
// stream's leader: the client's get is a direct get where the bucket allows
// it, which any replica answers, from behind the leader.
import type { KvEntry, KvStatus, KvWatch, KvWatchListener, NatsKvPort } from "../port";
import { replicatedParts, type NatsKvBucket, type NatsKvEntry, type NatsKvWatch, type NatsStoredMessage, type ReplicatedBucketParts } from "./client";

/** The JetStream API error of a failed revision check (JSStreamWrongLastSequenceErrF). */
const WRONG_LAST_SEQUENCE = 10071;
/** JSStreamNotFoundErr: the bucket's stream does not exist. */
const STREAM_NOT_FOUND = 10059;

export class NatsKvAdapter implements NatsKvPort {
  /** The handle's parts for a replicated bucket, if it has them. */
  private readonly parts: ReplicatedBucketParts | undefined;
  /** The bucket's status said it has more than one replica: reads go to the stream's leader. */
  private replicated = false;

  constructor(private readonly bucket: NatsKvBucket) {
    this.parts = replicatedParts(bucket);
  }

  /** Whether the handle can do what a replicated bucket needs (natsLeader refuses one that cannot). */
  get canServeReplicated(): boolean {
    return this.parts !== undefined;
  }

  /** The server's version, as the handle's connection reports it; undefined if it does not. */
  get serverVersion(): string | undefined {
    return this.parts?.js?.nc?.info?.version;
  }

  create(key: string, value: string): Promise<number> {
    return this.bucket.create(key, value);
  }

  createIfAbsent(key: string, value: string): Promise<number> {
    return this.need("a create of an absent key").put(key, value, { previousSeq: 0 });
  }


  update(key: string, value: string, revision: number): Promise<number> {
    return this.bucket.update(key, value, revision);
  }

  delete(key: string, revision: number): Promise<void> {
    return this.bucket.delete(key, { previousSeq: revision });
  }

  get(key: string): Promise<KvEntry | undefined> {
    if (this.replicated && this.parts) {
      const parts = this.parts;
      return parts.jsm.streams.getMessage(parts.stream, { last_by_subj: parts.subjectForKey(key) }).then(storedToEntry);
    }
    return this.bucket.get(key).then(toEntry);
  }

  /** The client's own status, whose `bucket`, `ttl` (max_age, in ms) and `replicas` are the port's. */
  async status(): Promise<KvStatus> {
    const { bucket, ttl, replicas = 1 } = await this.bucket.status();
    this.replicated = replicas > 1;
    return { bucket, ttl, replicas };
  }

  watch(key: string): Promise<KvWatch> {
    // Only writes from now on: the current value is read after opening, so that nothing falls between.
    return this.bucket.watch({ key, include: "updates" }).then((iterator) => new WatchOfKey(iterator));
  }

  /** For a failed revision check, the key's current revision (0 if absent); undefined for any other error. */
  wrongLastSequence(err: unknown): number | undefined {
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
  isBucketMissing(err: unknown): boolean {
    const { code, name, cause } = (err ?? {}) as { code?: unknown; name?: unknown; cause?: { message?: unknown } };
    if (code === STREAM_NOT_FOUND || name === "StreamNotFoundError") return true;
    return name === "JetStreamNotEnabled" && String(cause?.message ?? "").startsWith("no responders");
  }

  private need(what: string): ReplicatedBucketParts {
    if (this.parts) return this.parts;
    throw new TypeError(`${what} needs a bucket handle of @nats-io/kv (with put, jsm, stream and subjectForKey); this one lacks them`);
  }
}

/** A stored message of the key: a value, or a marker (whose KV-Operation header says DEL or PURGE). */
function storedToEntry(message: NatsStoredMessage | null): KvEntry | undefined {
  if (!message) return undefined;
  const marker = message.header.get("KV-Operation") !== "";
  return { value: marker ? undefined : message.string(), revision: message.seq };
}

function toEntry(entry: NatsKvEntry | null): KvEntry | undefined {
  return entry ? { value: valueOf(entry), revision: entry.revision } : undefined;
}

/** A value's text; undefined for a delete or purge marker. */
function valueOf(entry: NatsKvEntry): string | undefined {
  return entry.operation === "PUT" ? entry.string() : undefined;
}

/** A watch's iterator, read into a listener: every entry in the order the client yields it, then why it ended. */
class WatchOfKey implements KvWatch {
  private stopped = false;

  constructor(private readonly iterator: NatsKvWatch) {}

  listen(listener: KvWatchListener): void {
    void this.pump(listener);
  }

  stop(): void {
    this.stopped = true;
    stopWatch(this.iterator);
  }

  private async pump(listener: KvWatchListener): Promise<void> {
    try {
      for await (const entry of this.iterator) listener.onEntry(valueOf(entry), entry.revision);
      if (!this.stopped) listener.onEnd(new Error("the watch of the election key ended (connection closed?)"));
    } catch (err) {
      if (!this.stopped) listener.onEnd(err instanceof Error ? err : new Error(String(err)));
    }
  }
}

/**
 * Stops a watch and deletes its consumer on the server. @nats-io/kv's
 * `stop()` only unsubscribes: the watch's ordered consumer, made with an
 * inactive threshold of five minutes, would stay on the server that long, one
 * for every campaign, term and observer that ended. The watch keeps its
 * consumer as `_data` (@nats-io/kv 3.x); a handle without one is only stopped,
 * and the server drops the consumer at its threshold. A consumer the client
 * already replaced (after missed heartbeats) was deleted by the client then.
 */
function stopWatch(iterator: NatsKvWatch): void {
  iterator.stop();
  const consumer = (iterator as { _data?: { delete?: () => Promise<unknown> } })._data;
  if (typeof consumer?.delete !== "function") return;
  consumer.delete().catch(() => undefined);
}
