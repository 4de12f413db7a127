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
// - Watches that report failures. An etcd3 Watcher reconnects on its own, but
//   resumes after the revision etcd's "created" answer carried, past events it
//   may not have delivered yet, so an event can be lost. `Watches` treats any
//   disconnection as a failure instead, and the state machine starts the phase
//   over from a fresh read.
//
// Unary requests are not cancelled: etcd3 would count a cancelled call as a
// failed connection and close every stream on it. An abandoned request runs
// to its end (unary calls fail fast when etcd is unreachable) and its answer
// is dropped (`untilAborted`).
import type { IKeyValue, Namespace, Watcher } from "etcd3";
import { untilAborted } from "../../../util/abort";
import { WatchCancelledError, type WatchEvent, type WatchSet, type WatchTarget } from "../port";
import { Etcd3KeyValue } from "./key-value";
import { guardWatchManager } from "./watch-guard";

/** What the v3 backend needs of an etcd3 client. */
export type Etcd3Client = Pick<Namespace, "get" | "getAll" | "put" | "delete" | "if" | "watch" | "leaseClient">;

export function isEtcd3Client(client: unknown): client is Etcd3Client {
  if (typeof client !== "object" || client === null) return false;
  const c = client as Record<string, unknown>;
  const leaseClient = c.leaseClient as Record<string, unknown> | undefined;
  return (
    ["lease", "watch", "namespace", "getAll", "get", "put", "if"].every((method) => typeof c[method] === "function") &&
    typeof leaseClient === "object" &&
    leaseClient !== null &&
    ["leaseGrant", "leaseKeepAlive", "leaseRevoke"].every((method) => typeof leaseClient[method] === "function")
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

/**
 * A few etcd3 watchers feeding one queue of events, each added under a name,
 * all cancelled by `close()` or when the signal aborts. A watcher that etcd
 * cancels (see isCancelledByEtcd) fails the whole set unless it was added
 * with `reportCancel`; one that loses its stream always does.
 */
export class Watches<Name extends string> implements WatchSet<Name> {
  private readonly watchers = new Map<Name, Watcher>();
  /** The watchers etcd has confirmed. */
  private readonly confirmed = new WeakSet<Watcher>();
  /** Each event with the watcher it came from, which remove() drops the undelivered events of. */
  private queue: Array<WatchEvent<Name> & { readonly from: Watcher }> = [];
  private failure: { error: unknown } | undefined;
  private wake: (() => void) | undefined;
  private closed = false;
  private readonly onAbort = () => {
    this.fail(this.signal.reason);
    this.close();
  };

  constructor(
    private readonly client: Etcd3Client,
    private readonly signal: AbortSignal,
  ) {
    if (signal.aborted) this.onAbort();
    else signal.addEventListener("abort", this.onAbort, { once: true });
  }

  /** Watches `target` from revision `from` on, replacing any watch added under `name` before. */
  add(name: Name, target: WatchTarget, from: number): void {
    if (this.closed) return;
    this.remove(name);
    guardWatchManager(this.client);
    let builder = this.client.watch();
    if (target.prefix !== undefined) builder = builder.prefix(target.prefix);
    else if (target.key !== undefined) builder = builder.key(target.key);
    else if (target.range !== undefined) builder = builder.inRange(target.range);
    else throw new TypeError("a watch needs a key, a prefix or a range");
    if (target.deletesOnly) builder = builder.only("delete");
    // `watcher()` attaches at once and hands the watcher over before etcd
    // confirms it, unlike `create()`: only so can a watch on an unreachable
    // etcd be cancelled.
    const watcher = builder.startRevision(String(from)).watcher();
    const push = (type: "put" | "delete") => (kv: IKeyValue) => {
      if (this.watchers.get(name) !== watcher) return;
      // For a delete, etcd sets only the key and mod_revision (the deletion's revision).
      this.queue.push({ watch: name, type, kv: new Etcd3KeyValue(kv), from: watcher });
      this.wakeUp();
    };
    watcher.on("connected", () => {
      if (this.watchers.get(name) === watcher) this.confirmed.add(watcher);
    });
    watcher.on("put", push("put"));
    watcher.on("delete", push("delete"));
    watcher.on("error", (err) => {
      if (this.watchers.get(name) !== watcher) return;
      // etcd3 reports an error only for a watch etcd cancelled, and has
      // dropped it already. Cancelling it again would send etcd a cancel for a
      // dead watch ID, whose answer etcd3 cannot place and throws on, in a
      // promise nobody holds: an unhandled rejection.
      this.watchers.delete(name);
      if (!isCancelledByEtcd(err)) return this.fail(err);
      const error = new WatchCancelledError(err.message.replace(/^Watcher canceled:?\s*/, ""), { cause: err });
      if (!target.reportCancel) return this.fail(error);
      this.queue.push({ watch: name, type: "cancelled", error, from: watcher });
      this.wakeUp();
    });
    watcher.on("disconnected", (err) => {
      if (this.watchers.get(name) === watcher) this.fail(err);
    });
    this.watchers.set(name, watcher);
  }

  /** Stops the watch added under `name` and drops its undelivered events. */
  remove(name: Name): void {
    const watcher = this.watchers.get(name);
    if (!watcher) return;
    this.watchers.delete(name);
    this.queue = this.queue.filter((event) => event.from !== watcher);
    cancel(watcher);
  }

  /**
   * Whether an event received and not yet taken by next() passes `test`.
   * etcd3 hands over every event of one answer at once, so right after next()
   * returned an event, the events etcd sent with it (the same revision's) are here.
   */
  anyQueued(test: (event: WatchEvent<Name>) => boolean): boolean {
    return this.queue.some(test);
  }

  created(name: Name): boolean {
    const watcher = this.watchers.get(name);
    return watcher !== undefined && this.confirmed.has(watcher) && !this.closed && !this.failure;
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
   * Closes on the next tick: etcd3 closes its watch stream once it carries
   * no watch, so a watch added meanwhile (a new leader's of its own key)
   * keeps the stream open instead of opening another.
   */
  closeSoon(): void {
    process.nextTick(() => this.close());
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.signal.removeEventListener("abort", this.onAbort);
    for (const name of [...this.watchers.keys()]) this.remove(name);
    this.fail(new Error("watches closed"));
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

function cancel(watcher: Watcher): void {
  // Detaching waits for etcd to confirm; nothing here needs to wait for that.
  watcher.cancel().catch(() => undefined);
}
