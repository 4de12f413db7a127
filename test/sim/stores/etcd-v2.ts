// etcd's v2 keys API in memory, behind the v2 recipe's port
// (src/stores/etcd-v2/port.ts), as etcd 3.4's v2store applies it:
//
// - one etcd index, moved by every write, and every write an event (a
//   refresh too: it takes a place in the history, though no watch sees it);
// - a tree of directories and keys; POST makes `<dir>/<createdIndex, twenty
//   digits>`, creating the directories on its way; a set without prevExist
//   replaces the node (a new createdIndex), a write with prevExist keeps it;
// - TTLs as absolute expiry times, removed by the leader's sync every 500 ms
//   (an `expire` event each); until then the key is there, and renewed by a
//   refresh, and its `ttl` is 0 or less (etcd leaves a 0 out, keeping the
//   `expiration`: the adapter reads that as 0, and so does the port here);
// - the last 1000 events: a wait from an index before them answers 401 with
//   "[<oldest kept>/<asked>]"; a wait answers the first event at or after its
//   index on the key, or under it when recursive, or a removal of a directory
//   above it, replayed from the history or as it happens, once;
// - deletes notify the watchers of every key they remove (a directory's
//   too), then those of the directories above.
//
// The store itself is the port with no network between, on the clock it is
// given (for the unit tests of the recipe's pieces); a member of the
// simulation gets the port over its link (LinkedPort). What it keeps of etcd
// is checked against a real one by the same cases
// (test/stores/etcd-v2/etcd-v2-facts.ts).
import { posix } from "node:path";
import type { ElectionBackend } from "../../../src/contract/backend";
import { MembershipLostError } from "../../../src/contract/errors";
import { resolveOptions } from "../../../src/election/options";
import { Follower, type Turn } from "../../../src/stores/etcd-v2/follower";
import type { TurnVerdict } from "../../../src/stores/etcd-v2/turn-witness";
import { UnansweredError } from "../../../src/stores/etcd-v2/node-etcd/client";
import type { EtcdV2Port, Found, GetOptions, HistoryGone, NotFound, StoreNode, WaitAnswer, WatchEvent } from "../../../src/stores/etcd-v2/port";
import { EtcdV2Backend, type V2Membership } from "../../../src/stores/etcd-v2/recipe";
import type { MembershipState } from "../../../src/stores/etcd-v2/membership-state";
import { abortReason } from "../../../src/util/abort";
import type { Clock } from "../../../src/util/clock";
import { patch } from "../mutations";
import type { Link } from "../network";
import type { FaultContext, Mutation, SimStore, StoreFault } from "../store";
import type { Random, Scheduler, SimProcess } from "../world";
import { MembershipLog } from "./membership-log";

/** etcd's v2 error codes the store answers with (etcd's v2error package). */
export const V2_ERRORS = {
  100: "Key not found",
  101: "Compare failed",
  102: "Not a file",
  104: "Not a directory",
  105: "Key already exists",
  107: "Root is read only",
  108: "Directory not empty",
  211: "Value provided on refresh",
  212: "A TTL must be provided on refresh",
  401: "The event in requested index is outdated and cleared",
} as const;

export type V2ErrorCode = keyof typeof V2_ERRORS;

/** An error answer of etcd's v2 API, shaped as node-etcd reports it: `errorCode`, and the body in `error`. */
export class EtcdV2Error extends Error {
  readonly errorCode: V2ErrorCode;
  readonly error: { errorCode: V2ErrorCode; message: string; cause: string; index: number };
  constructor(code: V2ErrorCode, cause: string, index: number) {
    super(V2_ERRORS[code]);
    this.errorCode = code;
    this.error = { errorCode: code, message: V2_ERRORS[code], cause, index };
  }
}

/** The last this many events are kept (v2store's newWatchHub(1000)). */
export const HISTORY_CAPACITY = 1000;
/** etcd's leader removes expired keys this often (its SYNC). */
export const EXPIRY_SWEEP_MS = 500;

interface TreeNode {
  readonly path: string;
  readonly parent: TreeNode | undefined;
  /** Undefined on a directory. */
  value: string | undefined;
  readonly children: Map<string, TreeNode> | undefined;
  readonly createdIndex: number;
  modifiedIndex: number;
  /** When it expires, on the store's clock; undefined for a node without a TTL. */
  expiresAt: number | undefined;
}

/** One event of the history: what etcd answers a wait with, and what it remembers of it. */
interface StoreEvent {
  readonly action: string;
  readonly node: StoreNode;
  readonly prevNode: StoreNode | undefined;
  /** A refresh: in the history, seen by no watch. */
  readonly refresh: boolean;
}

/** A wait registered at the store: answered once, by the first event it takes. */
interface Watcher {
  readonly recursive: boolean;
  readonly sinceIndex: number;
  readonly deliver: (event: WatchEvent) => void;
  removed: boolean;
}

/** What the store tells its owner of each key it comes to hold and stops holding (the simulation's membership log). */
export interface KeyChange {
  readonly type: "created" | "removed";
  readonly key: string;
  readonly value?: string | undefined;
}

/** A request the store was asked through its own port, for the unit tests to look at. */
export interface PortRequest {
  readonly method: "createInOrder" | "get" | "setIfExists" | "delete" | "wait";
  readonly key: string;
  readonly fromIndex?: number;
  readonly recursive?: boolean;
  readonly options?: GetOptions;
  /** createInOrder and setIfExists: the value written (null: a refresh). */
  readonly value?: string | null;
}

/** A wait made through the store's own port, until it settles. */
export interface PendingWait {
  readonly key: string;
  readonly fromIndex: number;
  readonly recursive: boolean;
}

/** A write or a delete as etcd answers it: its action, the node it left, and etcd's index then. */
export interface Written extends Found {
  readonly action: string;
}

export interface WriteOptions {
  readonly ttl?: number | undefined;
  readonly prevExist?: boolean | undefined;
  readonly prevIndex?: number | undefined;
  readonly prevValue?: string | undefined;
  readonly refresh?: boolean | undefined;
}

const UNANSWERED = { kind: "unanswered" } as const;

/** Keys cleaned so far: a run asks for the same few keys thousands of times. */
const cleaned = new Map<string, string>();

/** A key as etcd names it: path.Clean(path.Join("/", key)). */
export function cleanKey(key: string): string {
  let clean = cleaned.get(key);
  if (clean === undefined) {
    const normalized = posix.normalize(`/${key}`);
    clean = normalized.length > 1 ? normalized.replace(/\/+$/, "") : "/";
    if (cleaned.size < 10_000) cleaned.set(key, clean);
  }
  return clean;
}

export class EtcdV2Store implements EtcdV2Port {
  /** The etcd index: moved by every write. */
  index: number;
  private readonly root: TreeNode = { path: "/", parent: undefined, value: undefined, children: new Map(), createdIndex: 0, modifiedIndex: 0, expiresAt: undefined };
  /** The history, oldest first: the kept ones from `front` on. */
  private readonly events: StoreEvent[] = [];
  private front = 0;
  private readonly watchers = new Map<string, Watcher[]>();
  private readonly expiring = new Set<TreeNode>();
  private sweepTimer: unknown;
  /** Requests made through the store's own port, oldest first. */
  readonly requests: PortRequest[] = [];
  private readonly directWaits = new Set<PendingWait>();
  /** Answers held back (holdAnswers()), in order. */
  private heldAnswers: Array<() => void> | undefined;

  /**
   * `clock`: the store's own, for TTLs, the expiry sweep and the bound of a
   * wait made through its own port (none: nothing expires, and such a wait
   * is never abandoned). `onChange`: told of every key created and removed.
   * `sweepPhaseMs`: where in its 500 ms the sweep falls.
   */
  constructor(
    private readonly clock?: Clock,
    private readonly onChange?: (change: KeyChange) => void,
    options: { startIndex?: number; sweepPhaseMs?: number } = {},
  ) {
    this.index = options.startIndex ?? 1;
    if (clock) this.sweepTimer = clock.setTimeout(() => this.sweep(), options.sweepPhaseMs ?? EXPIRY_SWEEP_MS);
  }

  // etcd's own operations, as its v2store applies them.

  /** POST <dir> value=<value> [ttl]: a new in-order key under `dir`. */
  createInOrderNow(dir: string, value: string, ttlSeconds?: number): Written {
    const next = this.index + 1;
    return this.create(`${cleanKey(dir)}/${String(next).padStart(20, "0")}`, value, ttlSeconds, "create");
  }

  /**
   * PUT <key> as etcd's v2 API applies it: with prevExist=true an update (or,
   * with prevIndex or prevValue, a compareAndSwap); prevExist=false a create;
   * prevIndex or prevValue alone a compareAndSwap; else a set, which replaces
   * the node. `refresh`: the TTL only, no value, no watcher woken.
   */
  put(key: string, value: string | undefined, options: WriteOptions = {}): Written {
    const path = cleanKey(key);
    if (options.refresh) {
      if (value !== undefined && value !== "") throw new EtcdV2Error(211, "", this.index);
      if (options.ttl === undefined) throw new EtcdV2Error(212, "", this.index);
    }
    const compares = options.prevIndex !== undefined || options.prevValue !== undefined;
    if (options.prevExist === true) return compares ? this.compareAndSwap(path, value, options) : this.update(path, value, options);
    if (options.prevExist === false) return this.create(path, value ?? "", options.ttl, "create");
    if (compares) return this.compareAndSwap(path, value, options);
    return this.set(path, value, options);
  }

  /** GET <key>: the node, a directory with its children (sorted by key if asked). */
  getNow(key: string, sorted = false): Found {
    const node = this.find(cleanKey(key));
    return { node: this.repr(node, true, sorted), etcdIndex: this.index };
  }

  /** DELETE <key> [dir] [recursive] [prevIndex/prevValue: a compareAndDelete]. */
  deleteNow(key: string, options: { dir?: boolean; recursive?: boolean; prevIndex?: number; prevValue?: string } = {}): Written {
    const path = cleanKey(key);
    if (path === "/") throw new EtcdV2Error(107, "/", this.index);
    const node = this.find(path);
    if (options.prevIndex !== undefined || options.prevValue !== undefined) {
      if (node.children) throw new EtcdV2Error(102, path, this.index);
      this.compare(node, options.prevValue, options.prevIndex);
      return this.remove(node, "compareAndDelete");
    }
    if (node.children && !(options.dir || options.recursive)) throw new EtcdV2Error(102, path, this.index);
    if (node.children && node.children.size > 0 && !options.recursive) throw new EtcdV2Error(108, path, this.index);
    return this.remove(node, "delete");
  }

  /**
   * GET <key>?wait=true&waitIndex=<from>[&recursive=true]: the first event at
   * or after `from` that the history holds, at once; history gone (401); or
   * a watcher that `deliver` hears from once.
   */
  watch(key: string, from: number, recursive: boolean, deliver: (event: WatchEvent) => void): WatchEvent | HistoryGone | { cancel(): void } {
    const path = cleanKey(key);
    const found = this.scan(path, recursive, from);
    if (found) return found;
    const watcher: Watcher = { recursive, sinceIndex: from, deliver, removed: false };
    const list = this.watchers.get(path) ?? [];
    list.push(watcher);
    this.watchers.set(path, list);
    return {
      cancel: () => {
        if (watcher.removed) return;
        watcher.removed = true;
        this.dropWatcher(path, watcher);
      },
    };
  }

  /** The oldest index the history holds an event of (0 while it holds none). */
  get historyStart(): number {
    const first = this.events[this.front];
    return first ? first.node.modifiedIndex : 0;
  }

  /** When the event of a wait's answer happened, on the store's clock (undefined without one). */
  happenedAt(answer: WatchEvent): number | undefined {
    return happenedAt.get(answer.node);
  }

  /** Watchers registered at the store (long polls waiting). */
  get watcherCount(): number {
    let count = 0;
    for (const list of this.watchers.values()) count += list.length;
    return count;
  }

  /** The key directly under `dir` with the lowest createdIndex among those `test` takes, if any. */
  oldestUnder(dir: string, test: (key: string) => boolean): string | undefined {
    const node = this.lookup(cleanKey(dir));
    let oldest: TreeNode | undefined;
    for (const child of node?.children?.values() ?? []) {
      if (child.children || !test(child.path)) continue;
      if (!oldest || child.createdIndex < oldest.createdIndex) oldest = child;
    }
    return oldest?.path;
  }

  /** The keys (not directories) directly under `dir`, in key order. */
  keysUnder(dir: string): string[] {
    const node = this.lookup(cleanKey(dir));
    if (!node?.children) return [];
    return [...node.children.values()].filter((child) => !child.children).map((child) => child.path).sort();
  }

  /** A server going down: the waits it held are gone (their connections broke), and its sync stops until it is back. */
  goDown(): void {
    this.watchers.clear();
    if (this.sweepTimer !== undefined) this.clock?.clearTimeout(this.sweepTimer);
    this.sweepTimer = undefined;
  }

  /**
   * Back up, its keys and history as they were (a snapshot and the log's
   * replay) and each TTL an absolute time still: what expired while it was
   * down goes at its first sync.
   */
  comeBack(sweepPhaseMs = EXPIRY_SWEEP_MS): void {
    if (this.clock && this.sweepTimer === undefined) this.sweepTimer = this.clock.setTimeout(() => this.sweep(), sweepPhaseMs);
  }

  // The port, with no network between: what the unit tests of the recipe's pieces use.

  createInOrder(operation: string, dir: string, value: string, ttlSeconds: number, signal: AbortSignal | undefined, abandonAfterMs?: number): Promise<Found> {
    this.requests.push({ method: "createInOrder", key: dir, value });
    return this.answer(operation, signal, abandonAfterMs, () => found(this.createInOrderNow(dir, value, ttlSeconds)));
  }

  get(operation: string, key: string, options: GetOptions, signal: AbortSignal, abandonAfterMs?: number): Promise<Found | NotFound> {
    this.requests.push({ method: "get", key, options });
    return this.answer(operation, signal, abandonAfterMs, () => this.getOrNotFound(key, options));
  }

  setIfExists(operation: string, key: string, value: string | null, ttlSeconds: number, signal: AbortSignal | undefined, abandonAfterMs?: number): Promise<Found | NotFound> {
    this.requests.push({ method: "setIfExists", key, value });
    return this.answer(operation, signal, abandonAfterMs, () => this.setIfExistsNow(key, value, ttlSeconds));
  }

  delete(operation: string, key: string, signal: AbortSignal | undefined, abandonAfterMs?: number): Promise<boolean> {
    this.requests.push({ method: "delete", key });
    return this.answer(operation, signal, abandonAfterMs, () => this.deleteIfExists(key));
  }

  wait(key: string, fromIndex: number, recursive: boolean, signal: AbortSignal, abandonAfterMs: number): Promise<WaitAnswer> {
    const pending: PendingWait = { key, fromIndex, recursive };
    this.requests.push({ method: "wait", ...pending });
    return new Promise<WaitAnswer>((resolve, reject) => {
      if (signal.aborted) return reject(abortReason("watch", signal));
      let settled = false;
      let timer: unknown;
      let watching: { cancel(): void } | undefined;
      const settle = (outcome: () => void) => {
        if (settled) return;
        settled = true;
        signal.removeEventListener("abort", onAbort);
        if (timer !== undefined) this.clock?.clearTimeout(timer);
        watching?.cancel();
        this.directWaits.delete(pending);
        outcome();
      };
      const onAbort = () => settle(() => reject(abortReason("watch", signal)));
      const answered = this.watch(key, fromIndex, recursive, (event) => this.deliver(() => settle(() => resolve(event))));
      if (!("cancel" in answered)) return this.deliver(() => settle(() => resolve(answered)));
      watching = answered;
      this.directWaits.add(pending);
      signal.addEventListener("abort", onAbort, { once: true });
      if (this.clock) timer = this.clock.setTimeout(() => settle(() => resolve(UNANSWERED)), abandonAfterMs);
    });
  }

  /** The waits made through the store's own port that have not settled. */
  get pendingWaits(): PendingWait[] {
    return [...this.directWaits];
  }

  /**
   * Holds back the answers of the store's own port (requests are applied
   * as they come) until the returned function lets them through, in order:
   * a store that answers late.
   */
  holdAnswers(): () => void {
    this.heldAnswers ??= [];
    return () => {
      const held = this.heldAnswers ?? [];
      this.heldAnswers = undefined;
      for (const answer of held) answer();
    };
  }

  // The port's requests as the store applies them, wherever they come from.

  getOrNotFound(key: string, options: GetOptions): Found | NotFound {
    try {
      return this.getNow(key, options.sorted ?? false);
    } catch (err) {
      return notFound(err);
    }
  }

  /** PUT <key> ttl prevExist=true, with the value or, null, refresh=true and none. */
  setIfExistsNow(key: string, value: string | null, ttlSeconds: number): Found | NotFound {
    try {
      return found(this.put(key, value ?? undefined, { ttl: ttlSeconds, prevExist: true, refresh: value === null }));
    } catch (err) {
      return notFound(err);
    }
  }

  deleteIfExists(key: string): boolean {
    try {
      this.deleteNow(key);
      return true;
    } catch (err) {
      if (err instanceof EtcdV2Error && err.errorCode === 100) return false;
      throw err;
    }
  }

  // How etcd's v2store does it.

  private create(path: string, value: string, ttlSeconds: number | undefined, action: string): Written {
    const next = this.index + 1;
    const { dir, name } = this.parentOf(path, next);
    if (dir.children!.has(name)) throw new EtcdV2Error(105, path, this.index);
    return this.write(dir, name, value, ttlSeconds, action, undefined);
  }

  private set(path: string, value: string | undefined, options: WriteOptions): Written {
    // A refresh reads the key first: no directory is made for one etcd does not hold.
    if (options.refresh) this.find(path);
    const next = this.index + 1;
    const { dir, name } = this.parentOf(path, next);
    const existing = dir.children!.get(name);
    if (existing?.children) throw new EtcdV2Error(102, path, this.index);
    const written = options.refresh ? existing!.value! : value ?? "";
    let prevNode: StoreNode | undefined;
    if (existing) {
      prevNode = this.repr(existing, false, false);
      // Replaced without a word to its watchers: the new node's event is what they see.
      dir.children!.delete(name);
      this.expiring.delete(existing);
      this.onChange?.({ type: "removed", key: existing.path });
    }
    return this.write(dir, name, written, options.ttl, "set", prevNode, options.refresh ?? false);
  }

  private update(path: string, value: string | undefined, options: WriteOptions): Written {
    if (path === "/") throw new EtcdV2Error(107, "/", this.index);
    const node = this.find(path);
    if (node.children && value) throw new EtcdV2Error(102, path, this.index);
    const written = options.refresh ? node.value : node.children ? undefined : value ?? "";
    return this.modify(node, "update", written, options);
  }

  private compareAndSwap(path: string, value: string | undefined, options: WriteOptions): Written {
    if (path === "/") throw new EtcdV2Error(107, "/", this.index);
    const node = this.find(path);
    if (node.children) throw new EtcdV2Error(102, path, this.index);
    this.compare(node, options.prevValue, options.prevIndex);
    return this.modify(node, "compareAndSwap", options.refresh ? node.value : value ?? "", options);
  }

  private compare(node: TreeNode, prevValue: string | undefined, prevIndex: number | undefined): void {
    const indexFails = prevIndex !== undefined && prevIndex !== 0 && node.modifiedIndex !== prevIndex;
    const valueFails = prevValue !== undefined && prevValue !== "" && node.value !== prevValue;
    if (!indexFails && !valueFails) return;
    const cause =
      indexFails && valueFails
        ? `[${prevValue} != ${node.value}] [${prevIndex} != ${node.modifiedIndex}]`
        : indexFails
          ? `[${prevIndex} != ${node.modifiedIndex}]`
          : `[${prevValue} != ${node.value}]`;
    throw new EtcdV2Error(101, cause, this.index);
  }

  /** A write of a node that stays (its createdIndex kept): an update or a compareAndSwap. */
  private modify(node: TreeNode, action: string, value: string | undefined, options: WriteOptions): Written {
    const prevNode = this.repr(node, false, false);
    const next = ++this.index;
    node.value = value;
    node.modifiedIndex = next;
    this.setTtl(node, options.ttl);
    const event: StoreEvent = { action, node: this.repr(node, false, false), prevNode, refresh: options.refresh ?? false };
    this.commit(event, []);
    return { action, node: event.node, etcdIndex: this.index };
  }

  /** A new key `name` in `dir`, at the next index. */
  private write(dir: TreeNode, name: string, value: string, ttlSeconds: number | undefined, action: string, prevNode: StoreNode | undefined, refresh = false): Written {
    const next = ++this.index;
    const node: TreeNode = { path: posix.join(dir.path, name), parent: dir, value, children: undefined, createdIndex: next, modifiedIndex: next, expiresAt: undefined };
    dir.children!.set(name, node);
    this.setTtl(node, ttlSeconds);
    this.onChange?.({ type: "created", key: node.path, value });
    const event: StoreEvent = { action, node: this.repr(node, false, false), prevNode, refresh };
    this.commit(event, []);
    return { action, node: event.node, etcdIndex: this.index };
  }

  /** Removes `node` (and all under it) in one event; each removed node's watchers hear first, then those above. */
  private remove(node: TreeNode, action: string): Written {
    const prevNode = this.repr(node, false, false);
    const next = ++this.index;
    const eventNode: StoreNode = node.children
      ? { key: node.path, dir: true, createdIndex: node.createdIndex, modifiedIndex: next }
      : { key: node.path, createdIndex: node.createdIndex, modifiedIndex: next };
    const event: StoreEvent = { action, node: eventNode, prevNode, refresh: false };
    const removed: TreeNode[] = [];
    this.detach(node, removed);
    for (const gone of removed) {
      if (!gone.children) this.onChange?.({ type: "removed", key: gone.path });
    }
    this.commit(event, removed.map((gone) => gone.path));
    return { action, node: eventNode, etcdIndex: this.index };
  }

  /** Takes `node` out of the tree, children first, each listed in `removed` in that order. */
  private detach(node: TreeNode, removed: TreeNode[]): void {
    for (const child of node.children?.values() ?? []) this.detach(child, removed);
    node.parent?.children!.delete(posix.basename(node.path));
    this.expiring.delete(node);
    removed.push(node);
  }

  /** Adds `event` to the history and tells the watchers: those of the removed paths first, then the directories above and the key. */
  private commit(event: StoreEvent, removedPaths: string[]): void {
    if (this.clock) happenedAt.set(event.node, this.clock.now());
    for (const path of removedPaths) this.notifyWatchers(event, path, true);
    this.events.push(event);
    if (this.events.length - this.front > HISTORY_CAPACITY) this.front++;
    if (this.front > 4 * HISTORY_CAPACITY) {
      this.events.splice(0, this.front);
      this.front = 0;
    }
    if (event.refresh) return;
    const key = event.node.key;
    this.notifyWatchers(event, "/", false);
    for (let i = 1; i < key.length; i++) if (key[i] === "/") this.notifyWatchers(event, key.slice(0, i), false);
    if (key.length > 1) this.notifyWatchers(event, key, false);
  }

  private notifyWatchers(event: StoreEvent, path: string, deleted: boolean): void {
    const list = this.watchers.get(path);
    if (!list) return;
    const original = event.node.key === path;
    const index = event.node.modifiedIndex;
    if (!original && isHidden(path, event.node.key)) return;
    for (const watcher of [...list]) {
      if (watcher.removed) continue;
      if (!(watcher.recursive || original || deleted) || index < watcher.sinceIndex) continue;
      watcher.removed = true;
      this.dropWatcher(path, watcher);
      watcher.deliver(answerOf(event));
    }
  }

  private dropWatcher(path: string, watcher: Watcher): void {
    const list = this.watchers.get(path);
    if (!list) return;
    const at = list.indexOf(watcher);
    if (at >= 0) list.splice(at, 1);
    if (list.length === 0) this.watchers.delete(path);
  }

  /** The first event at or after `from` for a wait on `path`, from the history; 401 if it is gone; undefined if none yet. */
  private scan(path: string, recursive: boolean, from: number): WatchEvent | HistoryGone | undefined {
    const start = this.historyStart;
    if (from < start) return { kind: "history-gone", historyStart: start };
    const last = this.events.at(-1);
    if (!last || from > last.node.modifiedIndex) return undefined;
    // Every index is one event, so the one at `from` is this far from the front.
    const prefix = path.endsWith("/") ? path : `${path}/`;
    for (let i = this.front + (from - start); i < this.events.length; i++) {
      const event = this.events[i]!;
      if (event.refresh) continue;
      let matches = event.node.key === path || (recursive && event.node.key.startsWith(prefix));
      // A removed directory removed what was under it (etcd compares without a trailing slash).
      if ((event.action === "delete" || event.action === "expire") && event.prevNode?.dir) matches ||= path.startsWith(event.prevNode.key);
      if (matches) return answerOf(event);
    }
    return undefined;
  }

  /** etcd's SYNC: every key whose time is up goes, each in an `expire` event of its own, in order of expiry. */
  private sweep(): void {
    const clock = this.clock!;
    const now = clock.now();
    const due = [...this.expiring].filter((node) => node.expiresAt! <= now);
    due.sort((a, b) => a.expiresAt! - b.expiresAt! || a.createdIndex - b.createdIndex);
    for (const node of due) if (this.expiring.has(node)) this.remove(node, "expire");
    this.sweepTimer = clock.setTimeout(() => this.sweep(), EXPIRY_SWEEP_MS);
  }

  private setTtl(node: TreeNode, ttlSeconds: number | undefined): void {
    if (ttlSeconds === undefined) {
      node.expiresAt = undefined;
      this.expiring.delete(node);
      return;
    }
    node.expiresAt = (this.clock?.now() ?? 0) + ttlSeconds * 1000;
    if (this.clock) this.expiring.add(node);
  }

  /** The directory a new node at `path` goes in, made on the way as etcd makes them (at the write's index, no event). */
  private parentOf(path: string, next: number): { dir: TreeNode; name: string } {
    if (path === "/") throw new EtcdV2Error(107, "/", this.index);
    const segments = path.split("/").filter(Boolean);
    const name = segments.pop()!;
    let dir = this.root;
    for (const segment of segments) {
      let child = dir.children!.get(segment);
      if (!child) {
        child = { path: posix.join(dir.path, segment), parent: dir, value: undefined, children: new Map(), createdIndex: next, modifiedIndex: next, expiresAt: undefined };
        dir.children!.set(segment, child);
      }
      if (!child.children) throw new EtcdV2Error(104, child.path, this.index);
      dir = child;
    }
    return { dir, name };
  }

  private lookup(path: string): TreeNode | undefined {
    let node: TreeNode | undefined = this.root;
    for (const segment of path.split("/").filter(Boolean)) {
      if (!node.children) throw new EtcdV2Error(104, node.path, this.index);
      node = node.children.get(segment);
      if (!node) return undefined;
    }
    return node;
  }

  private find(path: string): TreeNode {
    const node = this.lookup(path);
    if (!node) throw new EtcdV2Error(100, path, this.index);
    return node;
  }

  /** A node as etcd answers it; a directory's children one level down (sorted by key if asked). */
  private repr(node: TreeNode, withChildren: boolean, sorted: boolean): StoreNode {
    // Built field by field: this runs for every write, twice (the node and the one it replaced).
    const made: { key: string; value?: string; ttl?: number; dir?: boolean; nodes?: StoreNode[]; createdIndex: number; modifiedIndex: number } = {
      key: node.path,
      createdIndex: node.createdIndex,
      modifiedIndex: node.modifiedIndex,
    };
    const ttl = this.ttlOf(node);
    if (ttl !== undefined) made.ttl = ttl;
    if (!node.children) {
      made.value = node.value!;
      return made;
    }
    made.dir = true;
    if (!withChildren || node.children.size === 0) return made;
    const children = [...node.children.values()].map((child) => this.repr(child, false, false));
    if (sorted) children.sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
    made.nodes = children;
    return made;
  }

  /** Seconds left, rounded as etcd rounds them (toward zero, plus one for a remainder): 0 or less once its time is up, until the sync. */
  private ttlOf(node: TreeNode): number | undefined {
    if (node.expiresAt === undefined) return undefined;
    const left = node.expiresAt - (this.clock?.now() ?? 0);
    const ttl = Math.trunc(left / 1000) + (left % 1000 > 0 ? 1 : 0);
    // Not -0, which JSON answers as 0.
    return ttl === 0 ? 0 : ttl;
  }

  /**
   * An answer of the store's own port: now, or once holdAnswers() lets it
   * through; cut short by `signal`, and given up after `abandonAfterMs` on
   * the store's clock, as the adapter gives a request up.
   */
  private answer<T>(operation: string, signal: AbortSignal | undefined, abandonAfterMs: number | undefined, apply: () => T): Promise<T> {
    if (signal?.aborted) return Promise.reject(abortReason(operation, signal));
    let outcome: { value: T } | { error: unknown };
    try {
      outcome = { value: apply() };
    } catch (error) {
      outcome = { error };
    }
    return new Promise<T>((resolve, reject) => {
      let settled = false;
      const settle = (then: () => void) => {
        if (settled) return;
        settled = true;
        signal?.removeEventListener("abort", onAbort);
        if (timer !== undefined) this.clock?.clearTimeout(timer);
        then();
      };
      const onAbort = () => settle(() => reject(abortReason(operation, signal!)));
      signal?.addEventListener("abort", onAbort, { once: true });
      const timer = abandonAfterMs === undefined || !this.clock ? undefined : this.clock.setTimeout(() => settle(() => reject(new UnansweredError(operation, abandonAfterMs))), abandonAfterMs);
      this.deliver(() => settle(() => ("value" in outcome ? resolve(outcome.value) : reject(outcome.error))));
    });
  }

  private deliver(answer: () => void): void {
    if (this.heldAnswers) this.heldAnswers.push(answer);
    else answer();
  }
}

/** When the event a wait answers with happened, on the store's clock, by the node it carries. */
const happenedAt = new WeakMap<StoreNode, number>();

function answerOf(event: StoreEvent): WatchEvent {
  return { kind: "event", action: event.action, node: event.node };
}

/** etcd hides a key whose path below the watched one has a segment starting with "_" from the watchers above it. */
function isHidden(watchPath: string, keyPath: string): boolean {
  if (watchPath.length > keyPath.length) return false;
  return posix.normalize(`/${keyPath.slice(watchPath.length)}`).includes("/_");
}

/** A write's answer as the port gives it: the node and etcd's index. */
function found({ node, etcdIndex }: Found): Found {
  return { node, etcdIndex };
}

/** Error 100 as the port answers it; any other error is thrown as it came. */
function notFound(err: unknown): NotFound {
  if (err instanceof EtcdV2Error && err.errorCode === 100) return { node: undefined, etcdIndex: err.error.index };
  throw err;
}

/**
 * The port of a member of the simulation: every request and answer travels
 * its link, a request on a socket of its own, as node-etcd's HTTP does. A
 * call's own bound (abandonAfterMs) runs on the member's clock; a call
 * bounded by nothing, on a request the link lost, waits for ever.
 */
class LinkedPort implements EtcdV2Port {
  constructor(
    private readonly store: EtcdV2Store,
    private readonly link: Link,
    /** The member's clock, for the bounds of its calls. */
    private readonly clock: Clock,
    /** Virtual time, for how old the news a wait brings is. */
    private readonly scheduler: Scheduler,
  ) {}

  createInOrder(operation: string, dir: string, value: string, ttlSeconds: number, signal: AbortSignal | undefined, abandonAfterMs?: number): Promise<Found> {
    return this.call(operation, () => found(this.store.createInOrderNow(dir, value, ttlSeconds)), signal, abandonAfterMs);
  }

  get(operation: string, key: string, options: GetOptions, signal: AbortSignal, abandonAfterMs?: number): Promise<Found | NotFound> {
    return this.call(operation, () => this.store.getOrNotFound(key, options), signal, abandonAfterMs);
  }

  setIfExists(operation: string, key: string, value: string | null, ttlSeconds: number, signal: AbortSignal | undefined, abandonAfterMs?: number): Promise<Found | NotFound> {
    return this.call(operation, () => this.store.setIfExistsNow(key, value, ttlSeconds), signal, abandonAfterMs);
  }

  delete(operation: string, key: string, signal: AbortSignal | undefined, abandonAfterMs?: number): Promise<boolean> {
    return this.call(operation, () => this.store.deleteIfExists(key), signal, abandonAfterMs);
  }

  /**
   * A long poll: the request travels to etcd, which answers at once from its
   * history or registers a watcher; a watcher's answer travels back when its
   * event comes. A reset connection fails it; a silent one (a cut that
   * outlives the keepalive, a lost request) leaves it waiting until its bound.
   */
  wait(key: string, fromIndex: number, recursive: boolean, signal: AbortSignal, abandonAfterMs: number): Promise<WaitAnswer> {
    return new Promise<WaitAnswer>((resolve, reject) => {
      if (signal.aborted) return reject(abortReason("watch", signal));
      let settled = false;
      let watching: { cancel(): void } | undefined;
      const request = new AbortController();
      const settle = (outcome: () => void) => {
        if (settled) return;
        settled = true;
        signal.removeEventListener("abort", onAbort);
        this.clock.clearTimeout(timer);
        stopListening();
        // etcd drops the watcher when the connection closes.
        watching?.cancel();
        request.abort(new Error("wait settled"));
        outcome();
      };
      const onAbort = () => settle(() => reject(abortReason("watch", signal)));
      signal.addEventListener("abort", onAbort, { once: true });
      const timer = this.clock.setTimeout(() => settle(() => resolve(UNANSWERED)), abandonAfterMs);
      const stopListening = this.link.onBroken((error) => {
        // A socket of its own dies silently (no keepalive on a long poll); a reset is felt at once.
        if (error.message === "connection reset") settle(() => reject(error));
      });
      this.link
        .request(() => {
          const answered = this.store.watch(key, fromIndex, recursive, (event) => this.link.push(() => settle(() => resolve(this.received(event)))));
          if (!("cancel" in answered)) return answered;
          if (settled) answered.cancel();
          else watching = answered;
          return undefined;
        }, request.signal)
        .then(
          (answered) => {
            if (answered) settle(() => resolve(answered.kind === "event" ? this.received(answered) : answered));
          },
          (err: unknown) => settle(() => reject(err)),
        );
    });
  }

  /**
   * An event as it reaches the member. A wait from an index in the past
   * replays what happened since from etcd's history: news as old as the
   * event, however fast the answer came (a poll lost, asked again after its
   * bound, replays what it missed). The checker bounds how stale what a
   * member says may be by the longest delivery: this is one.
   */
  private received(event: WatchEvent): WatchEvent {
    const at = this.store.happenedAt(event);
    if (at !== undefined) this.link.longestDelivery = Math.max(this.link.longestDelivery, this.scheduler.now - at);
    return event;
  }

  /** One request, cut short by `signal` (its reason, as the adapter gives it) or given up after `abandonAfterMs` (an UnansweredError). */
  private call<T>(operation: string, apply: () => T, signal: AbortSignal | undefined, abandonAfterMs: number | undefined): Promise<T> {
    if (signal?.aborted) return Promise.reject(abortReason(operation, signal));
    const request = new AbortController();
    const onAbort = () => request.abort(abortReason(operation, signal!));
    signal?.addEventListener("abort", onAbort, { once: true });
    const timer = abandonAfterMs === undefined ? undefined : this.clock.setTimeout(() => request.abort(new UnansweredError(operation, abandonAfterMs)), abandonAfterMs);
    return this.link.request(apply, request.signal).finally(() => {
      signal?.removeEventListener("abort", onAbort);
      if (timer !== undefined) this.clock.clearTimeout(timer);
    });
  }
}

/** The election directory every simulated run holds. */
const ELECTION = "/sim/election";
/** Where the writes elsewhere in etcd go. */
const ELSEWHERE = "/sim/elsewhere";

/** How long a long poll is left waiting before it is asked again, in the simulation: a TTL, so that a lost one costs what a lost renewal does. */
const WATCH_REARM_MS = 2_000;

/** The store's clock: virtual time as it is, no rate of its own. */
export function schedulerClock(scheduler: Scheduler): Clock {
  return {
    now: () => scheduler.now,
    setTimeout: (callback, ms) => scheduler.at(scheduler.now + Math.max(0, ms), callback),
    clearTimeout: (handle) => scheduler.cancel(handle as ReturnType<Scheduler["at"]>),
  };
}

/** A simulated etcd v2 with one election, for the simulation's runs. */
export function simEtcdV2(scheduler: Scheduler, random: Random): SimStore {
  const log = new MembershipLog(scheduler);
  const line = new FrontOfLine();
  const store = new EtcdV2Store(
    schedulerClock(scheduler),
    (change) => {
      if (!isMemberKey(change.key)) return;
      if (change.type === "created") {
        log.held(change.key, change.value ?? "");
        line.joined(change.value ?? "", change.key);
      } else {
        log.released(change.key);
      }
      // Only a member's arrival or departure moves the front of the line.
      line.seen(store.oldestUnder(ELECTION, isMemberKey));
    },
    { startIndex: 3 + random.below(20), sweepPhaseMs: random.between(0, EXPIRY_SWEEP_MS) },
  );
  const links = new Set<Link>();
  const options = resolveOptions(2, {});
  const memberKeys = () => store.keysUnder(ELECTION).filter(isMemberKey);
  const deleteFromOutside = (context: FaultContext, keys: string[], what: string) => {
    if (keys.length === 0) return;
    context.note(`${what}: ${keys.map((k) => log.nameOf(k)).join(", ")}`);
    for (const key of keys) {
      log.deletedFromOutside(key);
      store.deleteIfExists(key);
    }
  };
  const faults: StoreFault[] = [
    {
      kind: "leader's key deleted",
      weight: 1,
      apply: (context) => deleteFromOutside(context, memberKeys().slice(0, 1), "etcdctl rm of the oldest key"),
    },
    {
      kind: "a member's key deleted",
      weight: 0.5,
      apply: (context) => {
        const keys = memberKeys();
        if (keys.length > 0) deleteFromOutside(context, [context.random.pick(keys)], "etcdctl rm of a key");
      },
    },
    {
      kind: "election deleted",
      weight: 0.5,
      apply: (context) => {
        const keys = memberKeys();
        context.note(`etcdctl rm -r of the election: ${keys.map((k) => log.nameOf(k)).join(", ") || "no member"}`);
        for (const key of keys) log.deletedFromOutside(key);
        try {
          store.deleteNow(ELECTION, { recursive: true });
        } catch (err) {
          if (!(err instanceof EtcdV2Error && err.errorCode === 100)) throw err;
        }
      },
    },
    {
      kind: "history pushed past its window",
      weight: 1,
      apply: (context) => {
        const writes = HISTORY_CAPACITY + context.random.below(HISTORY_CAPACITY / 2);
        const overMs = context.random.between(0, 400);
        context.note(`${writes} writes elsewhere in etcd over ${overMs.toFixed(0)} ms, from index ${store.index}`);
        const bursts = 8;
        for (let burst = 0; burst < bursts; burst++) {
          scheduler.at(scheduler.now + (overMs * burst) / bursts, () => {
            for (let i = 0; i < writes / bursts; i++) store.put(`${ELSEWHERE}/k${i % 50}`, String(store.index));
          });
        }
      },
    },
    {
      kind: "another key under the election",
      weight: 0.5,
      apply: (context) => {
        context.note("etcdctl set of a key under the election directory that is no member");
        store.put(`${ELECTION}/notes`, String(store.index));
      },
    },
  ];
  return {
    kind: "etcd-v2",
    transport: "requests",
    options,
    faults,
    mutations: v2Mutations,
    followersHold: true,
    holdsAtMostMs: options.ttlMs + EXPIRY_SWEEP_MS,
    backend(name: string, process: SimProcess, link: Link): ElectionBackend {
      links.add(link);
      return new EtcdV2Backend(new LinkedPort(store, link, process, scheduler), ELECTION, name, options.ttlSeconds, WATCH_REARM_MS, process.turns, process);
    },
    restart(downMs: number) {
      store.goDown();
      for (const link of links) link.reset();
      scheduler.at(scheduler.now + downMs, () => {
        store.comeBack(random.between(0, EXPIRY_SWEEP_MS));
        for (const link of links) link.restore();
      });
    },
    deleteMembershipOf(name: string) {
      for (const key of memberKeys().filter((k) => log.nameOf(k) === name)) {
        log.deletedFromOutside(key);
        store.deleteIfExists(key);
      }
    },
    holders: () => log.holders(),
    heldDuring: (name, from, to) => log.heldDuring(name, from, to),
    deletedFromOutsideAt: (name) => log.deletedFromOutsideAt(name),
    wasFirstInLine: (name) => line.wasFirst(name),
  };
}

/**
 * Which memberships were ever the oldest member-shaped key the store held,
 * looked at after each of its events (a directory's deletion takes every key
 * in one): a member leads only on one that was, once no older one was left
 * and before its own went.
 */
class FrontOfLine {
  private readonly latestOf = new Map<string, string>();
  private readonly wereFirst = new Set<string>();

  joined(name: string, key: string): void {
    this.latestOf.set(name, key);
  }

  seen(oldest: string | undefined): void {
    if (oldest !== undefined) this.wereFirst.add(oldest);
  }

  /** Whether the latest membership of `name` was ever first in line. */
  wasFirst(name: string): boolean {
    const key = this.latestOf.get(name);
    return key !== undefined && this.wereFirst.has(key);
  }
}

/** What a v2 follower is, seen from a mutation. */
interface FollowerInside {
  turnAt: number;
  membership: V2Membership;
}

/** What the v2 backend is, seen from a mutation. */
interface BackendInside {
  placeInLine(membership: V2Membership, state: MembershipState, signal: AbortSignal): Promise<unknown>;
  write(membership: V2Membership, state: MembershipState, ...rest: unknown[]): Promise<void>;
  port: EtcdV2Port;
}

/** The witness's verdict that our key went first, taken as one that saw nothing. */
function blindWitness(): () => void {
  const inside = Follower.prototype as unknown as { witnessSaw(this: FollowerInside, verdict: TurnVerdict): unknown };
  return patch(inside, "witnessSaw", (original) => function (this: FollowerInside, verdict: TurnVerdict) {
    return original.call(this, verdict.kind === "lost" ? { kind: "unknown" } : verdict);
  });
}

/** Breaks of the v2 recipe, for the simulation to find. */
const v2Mutations: readonly Mutation[] = [
  {
    name: "skip-own-key-check",
    description:
      "the member next in line takes its turn when the member before it goes, without the proof that its own key outlived it (the witness, or the read of its key)",
    patch: () => {
      const inside = Follower.prototype as unknown as { lastOlderMemberGone(this: FollowerInside): unknown };
      const undoGone = patch(inside, "lastOlderMemberGone", () => function (this: FollowerInside): Turn {
        return { turnAt: this.turnAt, proven: true };
      });
      const undoWitness = blindWitness();
      return () => {
        undoWitness();
        undoGone();
      };
    },
  },
  {
    name: "waits-on-deleted-key",
    description:
      "a member whose own key is deleted while it waits goes on waiting, as etcd's Campaign does (etcd issue 19597): its renewal takes etcd's \"not found\" for an answer, and its witness the key's removal for nothing",
    patch: () => {
      const undoWrite = patch(EtcdV2Backend.prototype as unknown as BackendInside, "write", (original) =>
        async function (this: BackendInside, membership: V2Membership, state: MembershipState, ...rest: unknown[]) {
          try {
            await original.call(this, membership, state, ...rest);
          } catch (err) {
            if (!(state.follower && err instanceof MembershipLostError)) throw err;
          }
        },
      );
      const undoWitness = blindWitness();
      return () => {
        undoWitness();
        undoWrite();
      };
    },
  },
  {
    name: "stale-listing",
    description: "a member that lists the line again (after a failure of its wait) reuses its first listing, a stale read, and names the leader from it",
    patch: () => {
      const first = new WeakMap<V2Membership, Found | NotFound>();
      return patch(EtcdV2Backend.prototype as unknown as BackendInside, "placeInLine", (original) =>
        function (this: BackendInside, membership: V2Membership, state: MembershipState, signal: AbortSignal) {
          const port = this.port;
          const stale = first.get(membership);
          const listing: EtcdV2Port = Object.create(port);
          listing.get = async (operation, key, getOptions, getSignal) => {
            if (stale) return stale;
            const answer = await port.get(operation, key, getOptions, getSignal);
            first.set(membership, answer);
            return answer;
          };
          this.port = listing;
          try {
            return original.call(this, membership, state, signal);
          } finally {
            this.port = port;
          }
        },
      );
    },
  },
];

function isMemberKey(key: string): boolean {
  return key.startsWith(`${ELECTION}/`) && /^\d{20}$/.test(key.slice(ELECTION.length + 1));
}

export const V2_ELECTION_DIR = ELECTION;
