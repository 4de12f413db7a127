// etcd's v3 API in memory, behind the v3 recipe's port (src/stores/etcd-v3/port.ts):
// one revision counter, keys with create and mod revisions, a history that
// watches replay from any revision not compacted (and are cancelled from one
// that is), the events of one revision delivered together, leases whose
// expiry a sweep notices as etcd's lessor does (every 500 ms) and whose
// revocation deletes their keys in one revision, and a restart after which
// every lease has its whole TTL again (etcd's new leader refreshes them).
//
// The store itself is the port with no network between (for the unit tests
// of the recipe's pieces); portOver(link) is the port of a member of the
// simulation, whose every request, answer and watch event travels its link.
// The facts it keeps are checked against a real etcd by the same cases
// (test/stores/etcd-v3/etcd-v3-facts.test.ts).
import type { ElectionBackend } from "../../../src/contract/backend";
import { resolveOptions, type ResolvedOptions } from "../../../src/election/options";
import { Follower } from "../../../src/stores/etcd-v3/follower";
import type { V3Membership } from "../../../src/stores/etcd-v3/membership";
import { LineReader, type PlaceInLine } from "../../../src/stores/etcd-v3/place-in-line";
import { EtcdV3Backend } from "../../../src/stores/etcd-v3/recipe";
import type {
  CampaignAnswer,
  CampaignRequest,
  EtcdV3Port,
  GrantedLease,
  KeyValue,
  Keys,
  RangeAnswer,
  RangeRequest,
  WatchEvent,
  WatchSet,
  WatchTarget,
} from "../../../src/stores/etcd-v3/port";
import { LeaseNotFoundError, WatchCancelledError } from "../../../src/stores/etcd-v3/port";
import { untilAborted } from "../../../src/util/abort";
import type { Link } from "../network";
import { patch } from "../mutations";
import type { FaultContext, Mutation, SimStore, StoreFault } from "../store";
import type { Random, Scheduler, SimProcess } from "../world";
import { MembershipLog } from "./membership-log";

interface Change {
  type: "put" | "delete";
  kv: KeyValue;
}

interface Held {
  value: string;
  createRevision: number;
  modRevision: number;
  lease: string | undefined;
}

interface Lease {
  ttlSeconds: number;
  /** Virtual time at which it expires unless kept alive; Infinity without a scheduler. */
  expiresAt: number;
}

/** A watcher registered at the store: where its events go. */
interface Watcher {
  target: WatchTarget;
  deliver(changes: Change[]): void;
}

/** etcd's lessor looks for expired leases this often. */
const LEASE_SWEEP_MS = 500;

export class EtcdV3Store implements EtcdV3Port {
  revision = 1;
  /** Nothing before this revision can be watched from: etcd cancels such a watch. */
  compactedTo = 0;
  readonly requests = { range: 0, campaign: 0, watch: 0, keepAlive: 0, revoke: 0 };
  private readonly held = new Map<string, Held>();
  private readonly history: Array<{ revision: number; changes: Change[] }> = [];
  private readonly watchers = new Set<Watcher>();
  private readonly leases = new Map<string, Lease>();
  private nextLease = 0x694d7f0a1b2c3d00n;
  /** Direct watch sets (no network), for openWatches. */
  private readonly directSets = new Set<StoreWatchSet<string>>();

  /**
   * `scheduler`: the virtual time leases expire in (none: they never do);
   * `onChange`: told of every change, for the simulation's membership log.
   */
  constructor(
    private readonly scheduler?: Scheduler,
    private readonly onChange?: (change: Change, revision: number) => void,
  ) {
    if (scheduler) this.sweep();
  }

  // The store's own operations, as etcd applies them.

  /** Puts keys (with their values) in one revision; returns it. */
  put(entries: Record<string, string>, lease?: string): number {
    const revision = ++this.revision;
    const changes: Change[] = [];
    for (const [key, value] of Object.entries(entries)) {
      const before = this.held.get(key);
      const held = { value, createRevision: before?.createRevision ?? revision, modRevision: revision, lease: before?.lease ?? lease };
      this.held.set(key, held);
      changes.push({ type: "put", kv: { key, ...held } });
    }
    this.commit(revision, changes);
    return revision;
  }

  /** Deletes keys in one revision, as `etcdctl del --prefix` or a lease's revocation does; returns it. */
  delete(...keys: string[]): number {
    const revision = ++this.revision;
    const changes: Change[] = [];
    for (const key of keys) {
      if (!this.held.delete(key)) continue;
      changes.push({ type: "delete", kv: { key, value: "", createRevision: 0, modRevision: revision } });
    }
    this.commit(revision, changes);
    return revision;
  }

  get(key: string): (Held & { key: string }) | undefined {
    const held = this.held.get(key);
    return held && { key, ...held };
  }

  /** The keys held under `prefix`, in key order. */
  keysUnder(prefix: string): string[] {
    return [...this.held.keys()].filter((key) => key.startsWith(prefix)).sort();
  }

  /**
   * Forgets the history up to now: a watch from before now is cancelled.
   * (Registered watchers here are always caught up, so none of them is.)
   */
  compact(): void {
    this.compactedTo = this.revision;
  }

  /** Every lease gets its whole TTL again, as etcd's new leader gives them after a restart. */
  refreshLeases(): void {
    const now = this.scheduler?.now ?? 0;
    for (const lease of this.leases.values()) if (this.scheduler) lease.expiresAt = now + lease.ttlSeconds * 1000;
  }

  grant(ttlSeconds: number): GrantedLease {
    const id = String(++this.nextLease);
    this.leases.set(id, { ttlSeconds, expiresAt: this.scheduler ? this.scheduler.now + ttlSeconds * 1000 : Infinity });
    return { id, ttlSeconds };
  }

  /** One keep-alive: the TTL the lease has from now, or 0 if etcd no longer knows it. */
  keepAliveNow(leaseId: string): number {
    this.requests.keepAlive++;
    const lease = this.leases.get(leaseId);
    if (!lease) return 0;
    if (this.scheduler) lease.expiresAt = this.scheduler.now + lease.ttlSeconds * 1000;
    return lease.ttlSeconds;
  }

  revoke(leaseId: string): void {
    this.requests.revoke++;
    if (!this.leases.delete(leaseId)) throw new LeaseNotFoundError(leaseId);
    const keys = [...this.held].filter(([, held]) => held.lease === leaseId).map(([key]) => key);
    if (keys.length > 0) this.delete(...keys);
  }

  read(request: RangeRequest): RangeAnswer {
    this.requests.range++;
    const at = request.revision;
    if (at !== undefined && at < this.compactedTo) throw new Error("etcdserver: mvcc: required revision has been compacted");
    const held = at === undefined || at >= this.revision ? this.held : this.heldAt(at);
    let kvs: KeyValue[] = [...held].map(([key, h]) => ({ key, ...h })).filter((kv) => inKeys(request, kv.key));
    if (request.minCreateRevision !== undefined) kvs = kvs.filter((kv) => kv.createRevision >= request.minCreateRevision!);
    if (request.maxCreateRevision !== undefined) kvs = kvs.filter((kv) => kv.createRevision <= request.maxCreateRevision!);
    if (request.sortByCreate === "ascend") kvs.sort((a, b) => a.createRevision - b.createRevision);
    else if (request.sortByCreate === "descend") kvs.sort((a, b) => b.createRevision - a.createRevision);
    else kvs.sort((a, b) => (a.key < b.key ? -1 : 1));
    if (request.key !== undefined) kvs = kvs.slice(0, 1);
    else if (request.limit) kvs = kvs.slice(0, request.limit);
    // The header is etcd's revision now, whatever revision was read at.
    return { kvs, revision: this.revision };
  }

  /** The keys as they stood at `revision`, from the history. */
  private heldAt(revision: number): Map<string, Held> {
    const held = new Map<string, Held>();
    for (const entry of this.history) {
      if (entry.revision > revision) break;
      for (const { type, kv } of entry.changes) {
        if (type === "delete") held.delete(kv.key);
        else held.set(kv.key, { value: kv.value, createRevision: kv.createRevision, modRevision: kv.modRevision, lease: undefined });
      }
    }
    return held;
  }

  transact({ key, value, leaseId }: CampaignRequest): CampaignAnswer {
    this.requests.campaign++;
    if (!this.leases.has(leaseId)) throw new LeaseNotFoundError(leaseId);
    const existing = this.get(key);
    if (existing) return { succeeded: false, revision: this.revision, existing };
    const revision = this.put({ [key]: value }, leaseId);
    return { succeeded: true, revision, existing: undefined };
  }

  /**
   * Registers a watcher from revision `from`: what happened since is
   * replayed at once; false if that history is compacted (etcd cancels it).
   */
  watch(target: WatchTarget, from: number, deliver: (changes: Change[]) => void): { cancel(): void } | undefined {
    this.requests.watch++;
    if (from <= this.compactedTo) return undefined;
    for (const { revision, changes } of this.history) {
      if (revision < from) continue;
      const matching = changes.filter((c) => matches(target, c));
      if (matching.length > 0) deliver(matching);
    }
    const watcher: Watcher = { target, deliver };
    this.watchers.add(watcher);
    return { cancel: () => this.watchers.delete(watcher) };
  }

  // The port, with no network between: what the unit tests of the recipe's pieces use.

  async range(request: RangeRequest, _operation: string, signal: AbortSignal): Promise<RangeAnswer> {
    signal.throwIfAborted();
    return this.read(request);
  }

  async campaign(request: CampaignRequest): Promise<CampaignAnswer> {
    return this.transact(request);
  }

  awaitAnswer<T>(operation: string, answer: Promise<T>, signal: AbortSignal): Promise<T> {
    return untilAborted(operation, answer, signal);
  }

  watches<Name extends string>(signal: AbortSignal): WatchSet<Name> {
    const set: StoreWatchSet<Name> = new StoreWatchSet<Name>(
      signal,
      (target, from, deliver) => this.watch(target, from, deliver),
      () => this.directSets.delete(set as StoreWatchSet<string>),
    );
    this.directSets.add(set as StoreWatchSet<string>);
    return set;
  }

  async grantLease(ttlSeconds: number): Promise<GrantedLease> {
    return this.grant(ttlSeconds);
  }

  async keepAlive(leaseId: string): Promise<number> {
    return this.keepAliveNow(leaseId);
  }

  async revokeLease(leaseId: string): Promise<void> {
    try {
      this.revoke(leaseId);
    } catch (err) {
      if (!(err instanceof LeaseNotFoundError)) throw err;
    }
  }

  abandonLease(leaseId: string): void {
    void this.revokeLease(leaseId);
  }

  /** Open watches in every set made through the store itself. */
  get openWatches(): number {
    let open = 0;
    for (const set of this.directSets) open += set.size;
    return open;
  }

  private commit(revision: number, changes: Change[]): void {
    if (changes.length === 0) return;
    this.history.push({ revision, changes });
    for (const change of changes) this.onChange?.(change, revision);
    for (const watcher of [...this.watchers]) {
      const matching = changes.filter((c) => matches(watcher.target, c));
      if (matching.length > 0) watcher.deliver(matching);
    }
  }

  /** etcd's lessor: every 500 ms, each lease past its time to live is revoked, its keys deleted in one revision. */
  private sweep(): void {
    const scheduler = this.scheduler!;
    scheduler.at(scheduler.now + LEASE_SWEEP_MS, () => {
      for (const [id, lease] of [...this.leases]) {
        if (lease.expiresAt > scheduler.now) continue;
        this.leases.delete(id);
        const keys = [...this.held].filter(([, held]) => held.lease === id).map(([key]) => key);
        if (keys.length > 0) this.delete(...keys);
      }
      this.sweep();
    });
  }
}

/**
 * A set of named watches on one stream. `register` asks the store for a
 * watcher (at once, or once the request has travelled); events come in
 * through its `deliver`, a revision's together; undefined means etcd
 * cancelled it (compacted history).
 */
class StoreWatchSet<Name extends string> implements WatchSet<Name> {
  private readonly watchers = new Map<Name, { cancel(): void } | "pending">();
  private queue: Array<WatchEvent<Name>> = [];
  private failure: unknown;
  private wake: (() => void) | undefined;
  private closed = false;
  /** Bumped by each add of a name, so that a late registration of a replaced watch is dropped. */
  private readonly generation = new Map<Name, number>();
  private readonly onAbort = () => {
    this.fail(this.signal.reason);
    this.close();
  };

  constructor(
    private readonly signal: AbortSignal,
    private readonly register: (target: WatchTarget, from: number, deliver: (changes: Change[]) => void) => { cancel(): void } | undefined | Promise<{ cancel(): void } | undefined>,
    private readonly onClose: () => void,
  ) {
    if (signal.aborted) this.onAbort();
    else signal.addEventListener("abort", this.onAbort, { once: true });
  }

  get size(): number {
    return this.watchers.size;
  }

  add(name: Name, target: WatchTarget, from: number): void {
    if (this.closed) return;
    this.remove(name);
    const generation = (this.generation.get(name) ?? 0) + 1;
    this.generation.set(name, generation);
    const current = () => !this.closed && this.generation.get(name) === generation;
    const deliver = (changes: Change[]) => {
      if (!current()) return;
      for (const { type, kv } of changes) this.queue.push({ watch: name, type, kv });
      this.wakeUp();
    };
    this.watchers.set(name, "pending");
    const registered = (watcher: { cancel(): void } | undefined) => {
      if (!current()) {
        watcher?.cancel();
        return;
      }
      if (watcher) return void this.watchers.set(name, watcher);
      this.watchers.delete(name);
      const error = new WatchCancelledError("");
      if (!target.reportCancel) return this.fail(error);
      this.queue.push({ watch: name, type: "cancelled", error });
      this.wakeUp();
    };
    const outcome = this.register(target, from, deliver);
    if (outcome instanceof Promise) outcome.then(registered, (err: unknown) => this.fail(err));
    else registered(outcome);
  }

  remove(name: Name): void {
    const watcher = this.watchers.get(name);
    if (watcher === undefined) return;
    this.watchers.delete(name);
    this.generation.set(name, (this.generation.get(name) ?? 0) + 1);
    if (watcher !== "pending") watcher.cancel();
    this.queue = this.queue.filter((event) => event.watch !== name);
  }

  anyQueued(test: (event: WatchEvent<Name>) => boolean): boolean {
    return this.queue.some(test);
  }

  created(name: Name): boolean {
    const watcher = this.watchers.get(name);
    return watcher !== undefined && watcher !== "pending" && !this.closed && this.failure === undefined;
  }

  async next(): Promise<WatchEvent<Name>> {
    for (;;) {
      const event = this.queue.shift();
      if (event) return event;
      if (this.failure !== undefined) throw this.failure;
      await new Promise<void>((resolve) => (this.wake = resolve));
    }
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.signal.removeEventListener("abort", this.onAbort);
    for (const watcher of this.watchers.values()) if (watcher !== "pending") watcher.cancel();
    this.watchers.clear();
    this.onClose();
    this.fail(new Error("watches closed"));
  }

  closeSoon(): void {
    void Promise.resolve().then(() => this.close());
  }

  /** The stream failed: every watch of the set with it. */
  fail(error: unknown): void {
    this.failure ??= error;
    this.wakeUp();
  }

  private wakeUp(): void {
    const wake = this.wake;
    this.wake = undefined;
    wake?.();
  }
}

/** The port of a member of the simulation: every request, answer and watch event travels its link. */
class LinkedPort implements EtcdV3Port {
  constructor(
    private readonly store: EtcdV3Store,
    private readonly link: Link,
  ) {}

  range(request: RangeRequest, operation: string, signal: AbortSignal): Promise<RangeAnswer> {
    return untilAborted(operation, this.link.request(() => this.store.read(request)), signal);
  }

  campaign(request: CampaignRequest): Promise<CampaignAnswer> {
    return this.link.request(() => this.store.transact(request));
  }

  awaitAnswer<T>(operation: string, answer: Promise<T>, signal: AbortSignal): Promise<T> {
    return untilAborted(operation, answer, signal);
  }

  watches<Name extends string>(signal: AbortSignal): WatchSet<Name> {
    // One stream per set: a broken connection fails it.
    const set: StoreWatchSet<Name> = new StoreWatchSet<Name>(
      signal,
      (target, from, deliver) =>
        // The watch request travels to etcd, which replays from `from` and then sends as things happen; each message comes back over the link.
        this.link.request(() => this.store.watch(target, from, (changes) => this.link.push(() => deliver(changes)))),
      () => stopListening(),
    );
    const stopListening = this.link.onBroken((error) => set.fail(error));
    return set;
  }

  grantLease(ttlSeconds: number): Promise<GrantedLease> {
    return this.link.request(() => this.store.grant(ttlSeconds));
  }

  keepAlive(leaseId: string, signal: AbortSignal): Promise<number> {
    return untilAborted("keep-alive", this.link.request(() => this.store.keepAliveNow(leaseId)), signal);
  }

  revokeLease(leaseId: string, signal: AbortSignal): Promise<void> {
    const revoking = this.link.request(() => {
      try {
        this.store.revoke(leaseId);
      } catch (err) {
        if (!(err instanceof LeaseNotFoundError)) throw err;
      }
    });
    return untilAborted("revoke lease", revoking, signal);
  }

  abandonLease(leaseId: string): void {
    this.link.request(() => this.store.revokeLease(leaseId)).catch(() => undefined);
  }
}

/** The key of the election every simulated run holds. */
const ELECTION = "/sim/election";

/** A simulated etcd v3 with one election, for the simulation's runs. */
export function simEtcdV3(scheduler: Scheduler, random: Random): SimStore {
  const log = new MembershipLog(scheduler);
  const store = new EtcdV3Store(scheduler, (change) => {
    if (!isMemberKey(change.kv.key)) return;
    if (change.type === "put" && change.kv.createRevision === change.kv.modRevision) log.held(change.kv.key, change.kv.value);
    else if (change.type === "delete") log.released(change.kv.key);
  });
  const links = new Set<Link>();
  const options = resolveOptions(2, {});
  const deleteFromOutside = (context: FaultContext, keys: string[], what: string) => {
    if (keys.length === 0) return;
    context.note(`${what}: ${keys.map((k) => log.nameOf(k)).join(", ")}`);
    for (const key of keys) log.deletedFromOutside(key);
    store.delete(...keys);
  };
  const faults: StoreFault[] = [
    {
      kind: "leader's key deleted",
      weight: 1,
      apply: (context) => deleteFromOutside(context, store.keysUnder(`${ELECTION}/`).filter(isMemberKey).slice(0, 1), "etcdctl del of the oldest key"),
    },
    {
      kind: "election deleted",
      weight: 0.5,
      apply: (context) => deleteFromOutside(context, store.keysUnder(`${ELECTION}/`), "etcdctl del --prefix of the election"),
    },
    {
      kind: "compaction",
      weight: 1,
      apply: (context) => {
        context.note(`compaction at revision ${store.revision}`);
        store.compact();
      },
    },
  ];
  return {
    kind: "etcd-v3",
    transport: "multiplexed",
    options,
    faults,
    mutations: v3Mutations,
    holdsAtMostMs: options.ttlMs + LEASE_SWEEP_MS,
    backend(name: string, process: SimProcess, link: Link, memberRandom: Random): ElectionBackend {
      links.add(link);
      return new EtcdV3Backend(new LinkedPort(store, link), ELECTION, name, options.ttlSeconds, process.turns, process, memberRandom.source);
    },
    restart(downMs: number) {
      for (const link of links) link.reset();
      scheduler.at(scheduler.now + downMs, () => {
        store.refreshLeases();
        for (const link of links) link.restore();
      });
    },
    followersHold: true,
    deleteMembershipOf(name: string) {
      const keys = store.keysUnder(`${ELECTION}/`).filter((key) => isMemberKey(key) && log.nameOf(key) === name);
      for (const key of keys) log.deletedFromOutside(key);
      if (keys.length > 0) store.delete(...keys);
    },
    holders: () => log.holders(),
    heldDuring: (name, from, to) => log.heldDuring(name, from, to),
    deletedFromOutsideAt: (name) => log.deletedFromOutsideAt(name),
  };
  void random;
}

/** What a follower is, seen from a mutation. */
interface FollowerInside {
  watches: WatchSet<"line" | "leader">;
}

/** Breaks of the v3 recipe, for the simulation to find. */
const v3Mutations: readonly Mutation[] = [
  {
    name: "skip-own-key-check",
    description: "a follower takes the turn when the member before it goes, without checking that its own key did not go with it",
    patch: () =>
      patch(Follower.prototype as unknown as { onLineWatchEvent: (...args: unknown[]) => unknown }, "onLineWatchEvent", (original) =>
        function (this: FollowerInside, ...args: unknown[]) {
          const watches = this.watches;
          const anyQueued = watches.anyQueued;
          watches.anyQueued = () => false;
          try {
            return original.apply(this, args);
          } finally {
            watches.anyQueued = anyQueued;
          }
        },
      ),
  },
  {
    name: "waits-on-deleted-key",
    description: "a follower whose own key is deleted while it waits goes on waiting, as etcd's Campaign does (etcd issue 19597)",
    patch: () =>
      patch(Follower.prototype as unknown as { onLineWatchEvent: (...args: unknown[]) => unknown }, "onLineWatchEvent", (original) =>
        function (this: FollowerInside & { ours: V3Membership }, ...args: unknown[]) {
          const [type, kv] = args as ["put" | "delete", KeyValue];
          if (type === "delete" && kv.key === this.ours.id) return undefined;
          return original.apply(this, args);
        },
      ),
  },
  {
    name: "stale-line",
    description: "a follower that lists the line again reuses its first listing, a stale read, and names a leader from it",
    patch: () => {
      const first = new WeakMap<V3Membership, PlaceInLine>();
      return patch(LineReader.prototype, "placeInLine", (original) =>
        async function (this: LineReader, membership, signal) {
          const stale = first.get(membership);
          if (stale) return stale;
          const place = await original.call(this, membership, signal);
          first.set(membership, place);
          return place;
        },
      );
    },
  },
];

function isMemberKey(key: string): boolean {
  return key.startsWith(`${ELECTION}/`) && /^[0-9a-f]+$/.test(key.slice(ELECTION.length + 1));
}

function inKeys(keys: Keys, key: string): boolean {
  if (keys.key !== undefined) return key === keys.key;
  if (keys.prefix !== undefined) return key.startsWith(keys.prefix);
  return keys.range !== undefined && key >= keys.range.start && key < keys.range.end;
}

function matches(target: WatchTarget, change: Change): boolean {
  return inKeys(target, change.kv.key) && !(target.deletesOnly && change.type !== "delete");
}

export type { Change };
export const V3_ELECTION_KEY = ELECTION;
export { LEASE_SWEEP_MS, type ResolvedOptions };
