// A JetStream KV bucket in memory behind the NATS KV recipe's port
// (src/stores/nats-kv/port.ts), for tests of the recipe's pieces without a
// server: one revision counter for the bucket (the stream sequence), the
// latest entry of each key, revision-checked create, update and delete,
// watches that deliver each later write in order, and entries that age out
// without a word (as on nats-server 2.9). It counts the requests made, by
// kind, and can hold requests back to put a write of someone else's first.
import type { KvEntry, KvStatus, KvWatch, KvWatchListener, NatsKvPort } from "../../src/stores/nats-kv/port";

/** What the double rejects a failed revision check with. */
export class WrongLastSequence extends Error {
  constructor(readonly current: number) {
    super(`wrong last sequence: ${current}`);
  }
}

/** What the double rejects every request with once the bucket is gone. */
export class BucketMissing extends Error {
  constructor() {
    super("stream not found");
  }
}

type Kind = "create" | "update" | "delete" | "get" | "status" | "watch";

/** A request as the double received it. */
export interface Request {
  kind: Kind;
  key?: string;
  value?: string;
  revision?: number;
  /** The clock's time when it was sent. */
  at: number;
}

export class KvDouble implements NatsKvPort {
  sequence = 0;
  missing = false;
  readonly requests: Request[] = [];
  private readonly entries = new Map<string, KvEntry>();
  private readonly watches = new Set<DoubleWatch>();
  /** The kinds of request hold() holds back. */
  private holding = new Set<Kind>();
  /** Requests held back: each applies and answers when released. */
  private held: Array<() => void> = [];

  constructor(
    private readonly now: () => number,
    private readonly bucketStatus: KvStatus = { bucket: "elections", ttl: 2_000 },
  ) {}

  /** How many requests of `kind` were made. */
  count(kind: Kind): number {
    return this.requests.filter((request) => request.kind === kind).length;
  }

  /** The key's latest entry, as the server holds it. */
  entry(key: string): KvEntry | undefined {
    return this.entries.get(key);
  }

  /** How many watches are open. */
  get openWatches(): number {
    return this.watches.size;
  }

  /** A write by someone else (another member, an operator): no revision check. Returns its revision. */
  put(key: string, value: string): number {
    return this.write(key, value);
  }

  /** A delete by someone else: leaves a marker. Returns its revision. */
  remove(key: string): number {
    return this.write(key, undefined);
  }

  /** The key's entry ages out: gone, and no watch is told. */
  expire(key: string): void {
    this.entries.delete(key);
  }

  /** From now on requests of these kinds wait, unapplied and unanswered, until release(). */
  hold(...kinds: Kind[]): void {
    this.holding = new Set(kinds);
  }

  /** Applies and answers the held requests, in the order they were made, and stops holding. */
  release(): void {
    this.holding.clear();
    for (const go of this.held.splice(0)) go();
  }

  /** Ends every open watch by itself, as a closed connection does (each stays open until stopped). */
  endWatches(error: Error): void {
    for (const watch of this.watches) watch.end(error);
  }

  create(key: string, value: string): Promise<number> {
    return this.request({ kind: "create", key, value }, () => {
      const last = this.entries.get(key);
      if (last?.value !== undefined) throw new WrongLastSequence(last.revision);
      return this.write(key, value);
    });
  }

  update(key: string, value: string, revision: number): Promise<number> {
    return this.request({ kind: "update", key, value, revision }, () => {
      this.checkRevision(key, revision);
      return this.write(key, value);
    });
  }

  delete(key: string, revision: number): Promise<void> {
    return this.request({ kind: "delete", key, revision }, () => {
      this.checkRevision(key, revision);
      this.write(key, undefined);
    });
  }

  get(key: string): Promise<KvEntry | undefined> {
    return this.request({ kind: "get", key }, () => this.entries.get(key));
  }

  status(): Promise<KvStatus> {
    return this.request({ kind: "status" }, () => this.bucketStatus);
  }

  watch(key: string): Promise<KvWatch> {
    return this.request({ kind: "watch", key }, () => {
      const watch = new DoubleWatch(key, () => this.watches.delete(watch));
      this.watches.add(watch);
      return watch;
    });
  }

  wrongLastSequence(error: unknown): number | undefined {
    return error instanceof WrongLastSequence ? error.current : undefined;
  }

  isBucketMissing(error: unknown): boolean {
    return error instanceof BucketMissing;
  }

  private checkRevision(key: string, revision: number): void {
    const last = this.entries.get(key)?.revision ?? 0;
    if (last !== revision) throw new WrongLastSequence(last);
  }

  private write(key: string, value: string | undefined): number {
    const revision = ++this.sequence;
    this.entries.set(key, { value, revision });
    for (const watch of this.watches) if (watch.key === key) watch.deliver(value, revision);
    return revision;
  }

  private request<T>(request: Omit<Request, "at">, apply: () => T): Promise<T> {
    this.requests.push({ ...request, at: this.now() });
    return new Promise<T>((resolve, reject) => {
      const go = () => {
        if (this.missing) return reject(new BucketMissing());
        try {
          resolve(apply());
        } catch (err) {
          reject(err);
        }
      };
      if (this.holding.has(request.kind)) this.held.push(go);
      else go();
    });
  }
}

/** One watch: entries are handed to the listener a microtask after the write, as from a connection. */
class DoubleWatch implements KvWatch {
  private listener: KvWatchListener | undefined;
  private readonly early: Array<[string | undefined, number]> = [];
  private stopped = false;

  constructor(
    readonly key: string,
    private readonly forget: () => void,
  ) {}

  listen(listener: KvWatchListener): void {
    this.listener = listener;
    for (const [value, revision] of this.early.splice(0)) this.deliver(value, revision);
  }

  stop(): void {
    this.stopped = true;
    this.forget();
  }

  deliver(value: string | undefined, revision: number): void {
    if (!this.listener) {
      this.early.push([value, revision]);
      return;
    }
    queueMicrotask(() => {
      if (!this.stopped) this.listener?.onEntry(value, revision);
    });
  }

  end(error: Error): void {
    queueMicrotask(() => {
      if (!this.stopped) this.listener?.onEnd(error);
    });
  }
}
