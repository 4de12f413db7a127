// The part of the `etcd3` client (1.x) that the v3 backend uses, made
// cancellable. Only types come from "etcd3": the package stays an optional
// peer dependency, and any object of this shape will do (an Etcd3 client or
// one of its namespaces).
//
// What the client does not offer is built here and beside it:
// - Lease renewals on the election's own schedule that can be abandoned, on
//   one LeaseKeepAlive stream per client (keepalive-stream.ts). etcd3's
//   `Lease` renews on a schedule of its own, and `Lease.keepaliveOnce()` opens
//   a stream per renewal and leaves it open until etcd answers; so the backend
//   opens the stream itself, through `leaseClient`, which etcd3 marks internal
//   but has exposed since 0.2.
// - Watches that report failures, created many at once. An etcd3 Watcher
//   reconnects on its own, but resumes after the revision etcd's "created"
//   answer carried, past events it may not have delivered yet, so an event
//   can be lost; and etcd3 creates one watch at a time. `Watches` runs on one
//   Watch stream per client, opened through `watchClient` (marked internal by
//   etcd3, exposed since 0.2), where creations are pipelined
//   (watch-stream.ts) and a disconnection is a failure: the state machine
//   starts the phase over from a fresh read.
// - Reads of single keys batched into read-only transactions, through `kv`
//   (internal as well), which takes a transaction as etcd does, with no
//   comparison (key-reads.ts).
//
// Unary requests are not cancelled: etcd3 would count a cancelled call as a
// failed connection and close every stream on it. An abandoned request runs
// to its end (unary calls fail fast when etcd is unreachable) and its answer
// is dropped (`untilAborted`).
import type { IEvent, Namespace } from "etcd3";
import { untilAborted } from "../../../util/abort";
import { WatchCancelledError, type WatchEvent, type WatchSet, type WatchTarget } from "../port";
import { Etcd3KeyValue } from "./key-value";
import { prefixEnd, watchStreamOf, type SharedWatchStream, type StreamWatch, type WatchReceiver } from "./watch-stream";

/** What the v3 backend needs of an etcd3 client. */
export type Etcd3Client = Pick<Namespace, "get" | "getAll" | "put" | "delete" | "if" | "kv" | "leaseClient" | "watchClient" | "prefix">;

export function isEtcd3Client(client: unknown): client is Etcd3Client {
  if (typeof client !== "object" || client === null) return false;
  const c = client as Record<string, unknown>;
  const leaseClient = c.leaseClient as Record<string, unknown> | undefined;
  return (
    ["lease", "watch", "namespace", "getAll", "get", "put", "if"].every((method) => typeof c[method] === "function") &&
    typeof leaseClient === "object" &&
    leaseClient !== null &&
    ["leaseGrant", "leaseKeepAlive", "leaseRevoke"].every((method) => typeof leaseClient[method] === "function") &&
    typeof (c.watchClient as Record<string, unknown> | undefined)?.watch === "function" &&
    typeof (c.kv as Record<string, unknown> | undefined)?.txn === "function"
  );
}

/**
 * Waits for an etcd3 call as `untilAborted` does, and gives a failure's gRPC
 * status as `errorCode`, where ElectionError looks for a store's own code:
 * etcd3 keeps it only in the message ("3 INVALID_ARGUMENT: ...").
 */
export function etcd3Call<T>(operation: string, pending: Promise<T>, signal: AbortSignal): Promise<T> {
  return untilAborted(operation, pending, signal).catch((err: unknown) => {
    throw withGrpcStatus(err);
  });
}

export function withGrpcStatus(err: unknown): unknown {
  if (!(err instanceof Error) || "errorCode" in err) return err;
  const status = /^(\d+) [A-Z_]+:/.exec(err.message);
  if (status && Object.isExtensible(err)) Object.assign(err, { errorCode: Number(status[1]) });
  return err;
}

/** A watch of a Watches set, as the set keeps it. */
interface SetWatchEntry {
  readonly stream: StreamWatch | undefined;
  readonly confirmed: boolean;
}

/**
 * A few watches on the client's shared watch stream (watch-stream.ts) feeding
 * one queue of events, each added under a name, all cancelled by `close()` or
 * when the signal aborts. A watch that etcd cancels fails the whole set
 * unless it was added with `reportCancel`; one that loses its stream always
 * does.
 */
export class Watches<Name extends string> implements WatchSet<Name> {
  private readonly watches = new Map<Name, SetWatchEntry>();
  /** Each event with the watch it came from, which remove() drops the undelivered events of. */
  private queue: Array<WatchEvent<Name> & { readonly from: SetWatchEntry }> = [];
  private failure: { error: unknown } | undefined;
  private wake: (() => void) | undefined;
  private closed = false;
  private readonly stream: SharedWatchStream;
  /** How many bytes of each key are the namespace's prefix. */
  private readonly namespace: Buffer;
  private readonly onAbort = () => {
    this.fail(this.signal.reason);
    this.close();
  };

  constructor(
    client: Etcd3Client,
    private readonly signal: AbortSignal,
  ) {
    this.stream = watchStreamOf(client);
    this.namespace = client.prefix ?? EMPTY;
    if (signal.aborted) this.onAbort();
    else signal.addEventListener("abort", this.onAbort, { once: true });
  }

  /** Watches `target` from revision `from` on, replacing any watch added under `name` before. */
  add(name: Name, target: WatchTarget, from: number): void {
    if (this.closed) return;
    this.remove(name);
    const watch = new Watches.SetWatch(this, name, target);
    watch.stream = this.stream.watch({ ...this.keysOf(target), startRevision: String(from), deletesOnly: target.deletesOnly === true }, watch);
    this.watches.set(name, watch);
  }

  /**
   * One watch of the set, as its stream reports it: a class, its methods on
   * the prototype, since a leader holds one for its whole term (four arrow
   * functions and their scope cost some 0.3 KiB more each). Declared in the
   * set's body, so that it may reach the set's queue.
   */
  private static readonly SetWatch = class SetWatch<Name extends string> implements WatchReceiver, SetWatchEntry {
    /** The watch on the shared stream, once made. */
    stream: StreamWatch | undefined;
    /** etcd has confirmed it. */
    confirmed = false;

    constructor(
      private readonly set: Watches<Name>,
      readonly name: Name,
      private readonly target: WatchTarget,
    ) {}

    /** Still the set's watch under its name: what a replaced or removed one reports is dropped. */
    private get current(): boolean {
      return this.set.watches.get(this.name) === this;
    }

    created(): void {
      if (this.current) this.confirmed = true;
    }

    events(events: readonly IEvent[]): void {
      if (!this.current) return;
      const { set } = this;
      // For a delete, etcd sets only the key and mod_revision (the deletion's revision).
      for (const event of events) {
        const type = event.type === "Delete" ? "delete" : "put";
        set.queue.push({ watch: this.name, type, kv: new Etcd3KeyValue(event.kv, set.namespace.length), from: this });
      }
      set.wakeUp();
    }

    cancelled(reason: string, compactRevision: string): void {
      if (!this.current) return;
      const { set } = this;
      set.watches.delete(this.name);
      const why = reason || (compactRevision !== "0" ? `the history it started from was compacted (at revision ${compactRevision})` : "no reason given");
      const error = new WatchCancelledError(`etcd cancelled the watch: ${why}`);
      if (!this.target.reportCancel) return set.fail(error);
      set.queue.push({ watch: this.name, type: "cancelled", error, from: this });
      set.wakeUp();
    }

    failed(err: unknown): void {
      if (this.current) this.set.fail(err);
    }
  };

  /** Stops the watch added under `name` and drops its undelivered events. */
  remove(name: Name): void {
    const watch = this.watches.get(name);
    if (!watch) return;
    this.watches.delete(name);
    if (this.queue.length > 0) this.queue = this.queue.filter((event) => event.from !== watch);
    watch.stream?.cancel();
  }

  /**
   * Whether an event received and not yet taken by next() passes `test`.
   * etcd sends every event of one revision on one watch in one answer, which
   * is queued whole, so right after next() returned an event, the events
   * etcd sent with it are here.
   */
  anyQueued(test: (event: WatchEvent<Name>) => boolean): boolean {
    return this.queue.some(test);
  }

  created(name: Name): boolean {
    return this.watches.get(name)?.confirmed === true && !this.closed && !this.failure;
  }

  /** The next event, in the order etcd sent them; rejects once a watch failed or the signal aborted. */
  async next(): Promise<WatchEvent<Name>> {
    for (;;) {
      const queued = this.queue.shift();
      if (queued) return queued;
      if (this.failure) throw this.failure.error;
      await new Promise<void>((resolve) => (this.wake = resolve));
    }
  }

  /**
   * Closes on the next tick: the shared stream closes once it carries no
   * watch, so a watch added meanwhile (a new leader's of its own key) keeps
   * it open instead of opening another.
   */
  closeSoon(): void {
    process.nextTick(() => this.close());
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.signal.removeEventListener("abort", this.onAbort);
    for (const name of [...this.watches.keys()]) this.remove(name);
    this.fail(new Error("watches closed"));
  }

  /** The target's keys as etcd is asked for them, with the namespace's prefix. */
  private keysOf(target: WatchTarget): { key: Buffer; rangeEnd?: Buffer } {
    const ns = this.namespace;
    const withNamespace = (key: string) => (ns.length === 0 ? Buffer.from(key) : Buffer.concat([ns, Buffer.from(key)]));
    if (target.prefix !== undefined) {
      const key = withNamespace(target.prefix);
      return { key, rangeEnd: prefixEnd(key) };
    }
    if (target.key !== undefined) return { key: withNamespace(target.key) };
    if (target.range !== undefined) return { key: withNamespace(target.range.start), rangeEnd: withNamespace(target.range.end) };
    throw new TypeError("a watch needs a key, a prefix or a range");
  }

  private fail(error: unknown): void {
    this.failure ??= { error };
    this.wakeUp();
  }

  private wakeUp(): void {
    const wake = this.wake;
    this.wake = undefined;
    wake?.();
  }
}

const EMPTY = Buffer.alloc(0);

/**
 * etcd cancelled a watch. It does so when the history the watch starts from
 * was compacted away; etcd 3.4 then gives no reason (only the compact
 * revision, which etcd3 drops), so a cancellation is all that can be seen.
 * etcd3 reports it as "Watcher canceled: " followed by etcd's reason, which
 * etcd 3.4 leaves empty after a compaction; Watches reports it as a
 * WatchCancelledError (port.ts).
 */
export function isCancelledByEtcd(err: unknown): boolean {
  return err instanceof WatchCancelledError || (err instanceof Error && /^Watcher canceled/.test(err.message));
}

/** etcd does not know the lease: it expired or was revoked. */
export function isLeaseNotFound(err: unknown): boolean {
  return err instanceof Error && /requested lease not found/.test(err.message);
}
