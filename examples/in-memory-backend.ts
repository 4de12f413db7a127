// An election on a store of your own: every member of one process races for
// one in-memory key. A toy (the store dies with the process), but each method
// keeps the contract a real store's backend must keep.
import etcdLeader = require("etcd-leader");

interface Holder {
  name: string;
  /** The revision of the write that won the key: the holder's fencing token. */
  token: number;
  /** The revision of its latest write. */
  revision: number;
  expiresAt: number;
}

/** The shared store: one key, its holder, and a revision that only grows. */
export class MemoryStore {
  revision = 0;
  private holder: Holder | undefined;
  private readonly waiters = new Set<() => void>();

  /** The holder, unless its time to live ran out. */
  current(): Holder | undefined {
    if (this.holder && this.holder.expiresAt <= performance.now()) this.holder = undefined;
    return this.holder;
  }

  set(holder: Holder | undefined): void {
    this.holder = holder;
    for (const wake of this.waiters) wake();
  }

  /** Resolves on the next change, or after `ms` (an expiry tells nobody), or rejects when `signal` aborts. */
  changed(signal: AbortSignal, ms: number): Promise<void> {
    return new Promise((resolve, reject) => {
      const settle = (outcome: () => void) => () => {
        clearTimeout(timer);
        this.waiters.delete(wake);
        signal.removeEventListener("abort", abort);
        outcome();
      };
      const wake = settle(resolve);
      const abort = settle(() => reject(signal.reason));
      const timer = setTimeout(wake, ms);
      this.waiters.add(wake);
      if (signal.aborted) abort();
      else signal.addEventListener("abort", abort, { once: true });
    });
  }
}

/** What a member holds once it won: the key at the revision it last wrote. */
interface Won extends etcdLeader.Membership {
  revision: number;
}

export class MemoryBackend implements etcdLeader.ElectionBackend<Won> {
  constructor(
    private readonly store: MemoryStore,
    private readonly name: string,
    private readonly ttlMs = 2_000,
  ) {}

  // Race-style: no join. Wait while someone holds the key, then take it.
  // Handed back what it won (a phase started over): ours still, or lost.
  async awaitTurn(held: etcdLeader.Claim<Won> | undefined, onLeader: etcdLeader.LeaderListener, signal: AbortSignal) {
    if (held) {
      const holder = this.store.current();
      if (holder?.revision !== held.membership.revision) throw new etcdLeader.MembershipLostError(`${held.membership.id} is no longer ours`);
      return held;
    }
    for (;;) {
      signal.throwIfAborted();
      const holder = this.store.current();
      if (!holder) {
        const sentAt = performance.now();
        const revision = ++this.store.revision;
        this.store.set({ name: this.name, token: revision, revision, expiresAt: sentAt + this.ttlMs });
        return { membership: { id: `key@${revision}`, revision }, token: revision, sentAt, ttlMs: this.ttlMs };
      }
      onLeader({ name: holder.name, token: holder.token });
      await this.store.changed(signal, holder.expiresAt - performance.now());
    }
  }

  async renew(won: Won) {
    const sentAt = performance.now();
    const holder = this.store.current();
    if (holder?.revision !== won.revision) throw new etcdLeader.MembershipLostError(`${won.id} is no longer ours`);
    won.revision = ++this.store.revision;
    this.store.set({ ...holder, revision: won.revision, expiresAt: sentAt + this.ttlMs });
  }

  async awaitLoss(won: Won, signal: AbortSignal) {
    for (;;) {
      const holder = this.store.current();
      if (holder?.revision !== won.revision) return;
      await this.store.changed(signal, holder.expiresAt - performance.now());
    }
  }

  async leave(won: Won) {
    if (this.store.current()?.revision === won.revision) this.store.set(undefined);
  }

  async observe(onLeader: etcdLeader.LeaderListener, signal: AbortSignal) {
    for (;;) {
      const holder = this.store.current();
      onLeader(holder && { name: holder.name, token: holder.token });
      await this.store.changed(signal, holder ? holder.expiresAt - performance.now() : 60_000);
    }
  }

  async readLeader() {
    const holder = this.store.current();
    return holder && { name: holder.name, token: holder.token };
  }
}
