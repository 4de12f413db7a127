// What the v3 recipe asks of etcd, in etcd's own terms: range reads, the
// campaign transaction, watches, and a lease's grant, keep-alive and revoke.
// The recipe (recipe.ts and the files it uses) sees etcd through this and
// nothing else; etcd3/port.ts implements it on the `etcd3` client, with every
// workaround that client needs, and a simulated store can implement it too.
//
// What the recipe's safety rests on is part of the port, so an implementation
// must keep it: revisions as etcd gives them (create and mod revision of each
// key, the revision a read or a transaction was made at), a watch's events in
// revision order with the events of one revision delivered together, a watch
// that etcd cancelled told apart from one whose stream failed, and which
// request a failure belongs to.
import type { FencedWriteResult } from "../../contract/backend";

/** A key as etcd holds it. */
export interface KeyValue {
  readonly key: string;
  readonly value: string;
  /** The revision of the put that created the key; 0 in a deletion's event. */
  readonly createRevision: number;
  /** The revision of the key's latest change: for a deletion's event, the deletion's. */
  readonly modRevision: number;
}

/** Keys from `start` up to, not including, `end`: etcd's [key, range_end). */
export interface KeyRange {
  readonly start: string;
  readonly end: string;
}

/** One key, every key under a prefix, or a range of keys: exactly one of the three. */
export interface Keys {
  readonly key?: string;
  readonly prefix?: string;
  readonly range?: KeyRange;
}

/** etcd's Range: what to read, in which order, how much, at which revision. */
export interface RangeRequest extends Keys {
  /** Sorted by create revision, oldest first ("ascend") or newest first ("descend"); by key when absent. */
  readonly sortByCreate?: "ascend" | "descend";
  /** At most this many keys; 0 or absent, all. */
  readonly limit?: number;
  readonly minCreateRevision?: number;
  readonly maxCreateRevision?: number;
  /** Read at this past revision; now when absent. */
  readonly revision?: number;
}

export interface RangeAnswer {
  readonly kvs: readonly KeyValue[];
  /** The revision the read was made at (the answer's header). */
  readonly revision: number;
}

/**
 * etcd's Campaign: If CreateRevision(key) = 0 Then Put(key, value, lease)
 * Else Get(key), in one transaction. Nothing else goes in it: etcd applies
 * transactions one at a time, and a read sorted by create revision in one
 * would hold up every write and keep-alive behind it for as long as it takes
 * to collect and sort every key under the prefix (see recipe.ts).
 */
export interface CampaignRequest {
  readonly key: string;
  readonly value: string;
  readonly leaseId: string;
}

export interface CampaignAnswer {
  /** The put was made: the key did not exist. */
  readonly succeeded: boolean;
  /** The transaction's revision: the put's, when it succeeded. */
  readonly revision: number;
  /** The key as it stood, when it did not. */
  readonly existing: KeyValue | undefined;
}

/** A lease etcd granted. */
export interface GrantedLease {
  /** etcd's int64 lease ID, in decimal: more than a double holds exactly. */
  readonly id: string;
  /** The time to live etcd granted, which may differ from the one asked for. */
  readonly ttlSeconds: number;
}

export interface WatchTarget extends Keys {
  /** Deliver deletions only. */
  readonly deletesOnly?: boolean;
  /**
   * When etcd cancels this watch (the history it starts from was compacted),
   * deliver a "cancelled" event and keep the set's other watches, instead of
   * failing the whole set.
   */
  readonly reportCancel?: boolean;
}

/**
 * An event on a watched key, tagged with the name its watch was added under;
 * or, for a watch added with `reportCancel`, word that etcd cancelled it.
 */
export type WatchEvent<Name extends string> =
  | { readonly watch: Name; readonly type: "put" | "delete"; readonly kv: KeyValue }
  | { readonly watch: Name; readonly type: "cancelled"; readonly error: WatchCancelledError };

/**
 * A few watches feeding one queue of events, each added under a name, all
 * cancelled by `close()` or when the signal the set was made with aborts.
 * Each watch delivers its events in revision order, and the events of one
 * revision together: right after next() returned an event, the events of
 * its revision on the same watch are queued already. (Across two watches
 * etcd orders the events of one revision as it likes.)
 */
export interface WatchSet<Name extends string> {
  /** Watches `target` from revision `from` on (a past revision replays what happened since), replacing any watch added under `name`. */
  add(name: Name, target: WatchTarget, from: number): void;
  /** Stops the watch added under `name` and drops its undelivered events. */
  remove(name: Name): void;
  /** The next event; rejects once a watch failed (a WatchCancelledError if etcd cancelled one without reportCancel), or the signal aborted. */
  next(): Promise<WatchEvent<Name>>;
  /** Whether an event received and not yet taken by next() passes `test`. */
  anyQueued(test: (event: WatchEvent<Name>) => boolean): boolean;
  /**
   * Whether etcd has confirmed the watch added under `name`, and the set has
   * not failed or closed since: from then on every change to its keys comes
   * to it (a watch from a past revision replays what came before within
   * etcd's sync of such watches, every 100 ms).
   */
  created(name: Name): boolean;
  close(): void;
  /**
   * Closes the set once the work already under way in this turn of the event
   * loop is done: a watch the caller starts meanwhile (a new leader's watch
   * of its own key) can still join the stream these are on.
   */
  closeSoon(): void;
}

/** What the recipe asks of etcd. */
export type { FencedWriteResult };

export interface EtcdV3Port {
  /**
   * One Range request. Settles soon after `signal` aborts, with a
   * RequestTimeoutError naming `operation` if it timed out; the request may
   * still reach etcd.
   */
  range(request: RangeRequest, operation: string, signal: AbortSignal): Promise<RangeAnswer>;

  /**
   * The campaign transaction. Not bounded by a signal: the join bounds the
   * grant and this together (awaitAnswer), and undoes a membership made late.
   * Rejects with a LeaseNotFoundError when etcd no longer has the lease.
   */
  campaign(request: CampaignRequest): Promise<CampaignAnswer>;

  /**
   * Txn If CreateRevision(key) = createRevision Then operations: what Go
   * programs build from Election.Rev(). `operations` are the client's own
   * (etcd3's builders). Settles soon after `signal` aborts, as a Range does.
   * Optional: a port without it (a simulated store) cannot make fenced writes.
   */
  fencedTransaction?(key: string, createRevision: number, operations: readonly unknown[], signal: AbortSignal): Promise<FencedWriteResult>;

  /**
   * Waits for an answer made of requests to this store (the join's grant and
   * transaction) until `signal` aborts, as `range` waits for its own: the
   * requests run on to their end.
   */
  awaitAnswer<T>(operation: string, answer: Promise<T>, signal: AbortSignal): Promise<T>;

  /** Watches on one stream of events, cancelled when `signal` aborts. */
  watches<Name extends string>(signal: AbortSignal): WatchSet<Name>;

  /** LeaseGrant: a lease of (about) `ttlSeconds`, kept alive from now on by keepAlive alone. */
  grantLease(ttlSeconds: number): Promise<GrantedLease>;

  /**
   * One LeaseKeepAlive of `leaseId`: resolves with the time to live etcd
   * gives it now, in seconds (0: the lease is gone), or rejects with a
   * LeaseNotFoundError. Settles soon after `signal` aborts.
   */
  keepAlive(leaseId: string, signal: AbortSignal): Promise<number>;

  /** LeaseRevoke, which deletes the keys attached to the lease; resolves too when etcd no longer knows it. */
  revokeLease(leaseId: string, signal: AbortSignal): Promise<void>;

  /** LeaseRevoke of a lease nobody waits on (a membership made after its join gave up): its outcome is only logged. */
  abandonLease(leaseId: string): void;
}

/**
 * What the members of an etcd v3 session (session/) ask of etcd besides: they
 * share one lease, so leaving deletes a member's key rather than revoking it.
 */
export interface SessionPort extends EtcdV3Port {
  /**
   * Deletes `key`; with `createRevision`, only if the key still has it (etcd's
   * Resign: Txn If CreateRevision(key) = rev Then Delete(key)). Settles soon
   * after `signal` aborts.
   */
  deleteMember(key: string, createRevision: number | undefined, signal: AbortSignal): Promise<void>;
}

/**
 * etcd cancelled a watch. It does so when the history the watch starts from
 * was compacted away; etcd 3.4 then gives no reason (only the compact
 * revision), so a cancellation is all that can be seen. Whoever holds the
 * watch reads the store again and watches from there.
 */
export class WatchCancelledError extends Error {
  override readonly name = "WatchCancelledError";
  /** `reason`: what etcd said, if anything. */
  constructor(reason: string, options?: { cause?: unknown }) {
    super(
      reason ? `etcd cancelled the watch (${reason}); re-reading` : "etcd cancelled the watch, likely a compaction; re-reading",
      options,
    );
  }
}

/** etcd does not know the lease (ErrLeaseNotFound): it expired or was revoked. `cause` is etcd's answer as the client gave it. */
export class LeaseNotFoundError extends Error {
  override readonly name = "LeaseNotFoundError";
  constructor(leaseId: string, options?: { cause?: unknown }) {
    super(`etcd does not know lease ${leaseId}`, options);
  }
}
