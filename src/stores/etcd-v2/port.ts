// The etcd v2 operations the recipe uses, in etcd's own terms: what the
// recipe (recipe.ts and the files it uses) asks of a store, and all it knows
// of one. node-etcd/adapter.ts implements it on a node-etcd client; a
// simulated store can implement it as well, and run the recipe unchanged.
//
// What the recipe depends on, and an implementation must keep:
// - etcd's index. Every answer carries the index etcd was at when it
//   answered (X-Etcd-Index), and every node its createdIndex (a member's
//   place in line, and its fencing token) and modifiedIndex (its last write).
// - The order of events. A wait from index i answers the first event at or
//   after i on the key (or, recursive, anywhere under the directory), one
//   event per wait, in etcd's order: a wait from just after the last event
//   seen misses none and sees none twice.
// - Which request a failure belongs to. Each call settles for itself; a
//   failure is named by the `operation` it was given ("refresh membership"),
//   which is what the election reports.
// - A cancellation reported as such. When a call's signal aborts, it rejects
//   with the signal's reason (a RequestTimeoutError for a timeout signal),
//   and leaves no request behind.
// - A bound of its own. A call given `abandonAfterMs` gives up once it has had
//   no answer for that long (a wait then answers "unanswered"; any other call
//   rejects), on the store's clock, and leaves no request behind.
//
// etcd's refusals that the recipe acts on are answers, not errors: a key etcd
// does not hold (error 100) and a history etcd has forgotten (error 401). Any
// other failure is thrown as it came, for the election to count as
// transient.

/** A node as etcd's v2 API answers it. */
export interface StoreNode {
  readonly key: string;
  /** Absent on a directory. */
  readonly value?: string;
  /**
   * Seconds left: 0 or less once its time is up, until etcd's sync removes
   * it (every 500 ms). Absent on a key written without a TTL, and only there.
   */
  readonly ttl?: number;
  readonly dir?: boolean;
  /** A directory's children, in a listing. */
  readonly nodes?: readonly StoreNode[];
  readonly createdIndex: number;
  readonly modifiedIndex: number;
}

/** A key etcd holds, and the index etcd was at when it answered. */
export interface Found {
  readonly node: StoreNode;
  readonly etcdIndex: number;
}

/** A key etcd does not hold (error 100), and the index etcd was at when it said so. */
export interface NotFound {
  readonly node: undefined;
  readonly etcdIndex: number;
}

/** The first event at or after the index a wait asked from: its action ("set", "update", "delete", "expire", ...) and the node it left. */
export interface WatchEvent {
  readonly kind: "event";
  readonly action: string;
  readonly node: StoreNode;
}

/** etcd has forgotten the events from the index asked for (error 401); `historyStart`, where its answer names it, is the oldest it holds. */
export interface HistoryGone {
  readonly kind: "history-gone";
  readonly historyStart: number | undefined;
}

/** A wait that had no answer within its bound, and was abandoned. */
export interface Unanswered {
  readonly kind: "unanswered";
}

export type WaitAnswer = WatchEvent | HistoryGone | Unanswered;

/** The actions of etcd v2 events that remove a node (and every node under it). */
export const V2_REMOVALS: ReadonlySet<string> = new Set(["delete", "expire", "compareAndDelete"]);

/** How a get reads: a directory's children sorted by key; a quorum read goes through raft and sees every write acknowledged before it. */
export interface GetOptions {
  readonly sorted?: boolean;
  readonly quorum?: boolean;
}

export interface EtcdV2Port {
  /**
   * POST <dir> value=<value> ttl=<ttlSeconds>: a new key under `dir` named
   * after its createdIndex, zero-padded to twenty digits, so that keys sort
   * in creation order. etcd may apply it even if the call gave up first.
   */
  createInOrder(
    operation: string,
    dir: string,
    value: string,
    ttlSeconds: number,
    signal: AbortSignal | undefined,
    abandonAfterMs?: number,
  ): Promise<Found>;

  /** GET <key>: a key, or a directory with its children. Given up after `abandonAfterMs` without an answer. */
  get(operation: string, key: string, options: GetOptions, signal: AbortSignal, abandonAfterMs?: number): Promise<Found | NotFound>;

  /**
   * PUT <key> ttl=<ttlSeconds> prevExist=true: only if the key exists. With
   * `value` null, refresh=true and no value: the TTL is renewed, the value
   * kept, and no watcher wakes. NotFound if etcd holds no such key.
   */
  setIfExists(
    operation: string,
    key: string,
    value: string | null,
    ttlSeconds: number,
    signal: AbortSignal | undefined,
    abandonAfterMs?: number,
  ): Promise<Found | NotFound>;

  /** DELETE <key>: false if etcd held no such key. */
  delete(operation: string, key: string, signal: AbortSignal | undefined, abandonAfterMs?: number): Promise<boolean>;

  /**
   * GET <key>?wait=true&waitIndex=<fromIndex>[&recursive=true]: a long poll
   * for the first event at or after `fromIndex`, on the key or, recursive,
   * under it. Abandoned after `abandonAfterMs` without an answer.
   */
  wait(key: string, fromIndex: number, recursive: boolean, signal: AbortSignal, abandonAfterMs: number): Promise<WaitAnswer>;
}
