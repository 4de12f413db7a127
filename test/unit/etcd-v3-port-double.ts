// An etcd in memory behind the v3 recipe's port (src/stores/etcd-v3/port.ts),
// for tests of the recipe's pieces without a server: keys with create and mod
// revisions, a history that watches replay from any revision not compacted,
// the events of one revision delivered together, and leases whose revocation
// deletes their keys. It counts the requests made, by kind.
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
} from "../../src/stores/etcd-v3/port";
import { WatchCancelledError } from "../../src/stores/etcd-v3/port";
import { untilAborted } from "../../src/util/abort";

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

export class EtcdDouble implements EtcdV3Port {
  revision = 1;
  /** Nothing before this revision can be watched from: etcd cancels such a watch. */
  compactedTo = 0;
  readonly requests = { range: 0, campaign: 0, watch: 0, keepAlive: 0, revoke: 0 };
  private readonly held = new Map<string, Held>();
  private readonly history: Array<{ revision: number; changes: Change[] }> = [];
  private readonly sets = new Set<DoubleWatchSet<string>>();
  private readonly leases = new Map<string, number>();
  private nextLease = 0x694d7f0a1b2c3d00n;

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

  /** Forgets the history up to now: watches from before now are cancelled. */
  compact(): void {
    this.compactedTo = this.revision;
  }

  async range(request: RangeRequest, _operation: string, signal: AbortSignal): Promise<RangeAnswer> {
    signal.throwIfAborted();
    this.requests.range++;
    return this.read(request);
  }

  async campaign({ key, value, leaseId, reads }: CampaignRequest): Promise<CampaignAnswer> {
    this.requests.campaign++;
    const existing = this.get(key);
    if (existing) return { succeeded: false, revision: this.revision, reads: [], existing };
    const revision = this.put({ [key]: value }, leaseId);
    return { succeeded: true, revision, reads: reads.map((read) => this.read(read)), existing: undefined };
  }

  awaitAnswer<T>(operation: string, answer: Promise<T>, signal: AbortSignal): Promise<T> {
    return untilAborted(operation, answer, signal);
  }

  watches<Name extends string>(signal: AbortSignal): WatchSet<Name> {
    const set = new DoubleWatchSet<Name>(this, signal, () => this.sets.delete(set as DoubleWatchSet<string>));
    this.sets.add(set as DoubleWatchSet<string>);
    return set;
  }

  async grantLease(ttlSeconds: number): Promise<GrantedLease> {
    const id = String(++this.nextLease);
    this.leases.set(id, ttlSeconds);
    return { id, ttlSeconds };
  }

  async keepAlive(leaseId: string): Promise<number> {
    this.requests.keepAlive++;
    return this.leases.get(leaseId) ?? 0;
  }

  async revokeLease(leaseId: string): Promise<void> {
    this.requests.revoke++;
    this.leases.delete(leaseId);
    const keys = [...this.held].filter(([, held]) => held.lease === leaseId).map(([key]) => key);
    if (keys.length > 0) this.delete(...keys);
  }

  abandonLease(leaseId: string): void {
    void this.revokeLease(leaseId);
  }

  /** The changes since `from` (included) to keys in `target`, by revision; undefined if compacted. */
  changesSince(from: number, target: WatchTarget): Change[][] | undefined {
    if (from <= this.compactedTo) return undefined;
    return this.history.filter((h) => h.revision >= from).map((h) => h.changes.filter((c) => matches(target, c)));
  }

  /** Open watches in every set. */
  get openWatches(): number {
    let open = 0;
    for (const set of this.sets) open += set.size;
    return open;
  }

  private commit(revision: number, changes: Change[]): void {
    this.history.push({ revision, changes });
    for (const set of this.sets) set.deliver(changes);
  }

  private read(request: RangeRequest): RangeAnswer {
    let kvs: KeyValue[] = [...this.held].map(([key, held]) => ({ key, ...held })).filter((kv) => inKeys(request, kv.key));
    if (request.minCreateRevision !== undefined) kvs = kvs.filter((kv) => kv.createRevision >= request.minCreateRevision!);
    if (request.maxCreateRevision !== undefined) kvs = kvs.filter((kv) => kv.createRevision <= request.maxCreateRevision!);
    if (request.sortByCreate === "ascend") kvs.sort((a, b) => a.createRevision - b.createRevision);
    else if (request.sortByCreate === "descend") kvs.sort((a, b) => b.createRevision - a.createRevision);
    else kvs.sort((a, b) => (a.key < b.key ? -1 : 1));
    if (request.key !== undefined) kvs = kvs.slice(0, 1);
    else if (request.limit) kvs = kvs.slice(0, request.limit);
    return { kvs, revision: this.revision };
  }
}

class DoubleWatchSet<Name extends string> implements WatchSet<Name> {
  private readonly targets = new Map<Name, WatchTarget>();
  private queue: Array<WatchEvent<Name>> = [];
  private failure: unknown;
  private wake: (() => void) | undefined;
  private closed = false;
  private readonly onAbort = () => {
    this.fail(this.signal.reason);
    this.close();
  };

  constructor(
    private readonly etcd: EtcdDouble,
    private readonly signal: AbortSignal,
    private readonly onClose: () => void,
  ) {
    signal.addEventListener("abort", this.onAbort, { once: true });
  }

  get size(): number {
    return this.targets.size;
  }

  add(name: Name, target: WatchTarget, from: number): void {
    if (this.closed) return;
    this.remove(name);
    this.etcd.requests.watch++;
    const replay = this.etcd.changesSince(from, target);
    if (!replay) {
      const error = new WatchCancelledError("");
      if (!target.reportCancel) return this.fail(error);
      this.queue.push({ watch: name, type: "cancelled", error });
      return this.wakeUp();
    }
    this.targets.set(name, target);
    for (const changes of replay) this.push(name, changes);
  }

  remove(name: Name): void {
    if (!this.targets.delete(name)) return;
    this.queue = this.queue.filter((event) => event.watch !== name);
  }

  deliver(changes: Change[]): void {
    for (const [name, target] of this.targets) this.push(name, changes.filter((c) => matches(target, c)));
  }

  anyQueued(test: (event: WatchEvent<Name>) => boolean): boolean {
    return this.queue.some(test);
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
    this.targets.clear();
    this.onClose();
    this.fail(new Error("watches closed"));
  }

  closeSoon(): void {
    process.nextTick(() => this.close());
  }

  private push(name: Name, changes: Change[]): void {
    for (const { type, kv } of changes) this.queue.push({ watch: name, type, kv });
    if (changes.length > 0) this.wakeUp();
  }

  private fail(error: unknown): void {
    this.failure ??= error;
    this.wakeUp();
  }

  private wakeUp(): void {
    const wake = this.wake;
    this.wake = undefined;
    wake?.();
  }
}

function inKeys(keys: Keys, key: string): boolean {
  if (keys.key !== undefined) return key === keys.key;
  if (keys.prefix !== undefined) return key.startsWith(keys.prefix);
  return keys.range !== undefined && key >= keys.range.start && key < keys.range.end;
}

function matches(target: WatchTarget, change: Change): boolean {
  return inKeys(target, change.kv.key) && !(target.deletesOnly && change.type !== "delete");
}
