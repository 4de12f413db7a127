// An etcd v3 session, as etcd's concurrency.Session: one lease, one
// keep-alive, one deadline that every election made on it counts from
// (lease-session.ts). A service that shards its work runs one election per
// shard on one session: the idle cost is one LeaseKeepAlive per refresh
// interval for all of them, and close() is one LeaseRevoke that hands every
// election over at once. Each election is a full Election (events,
// whileLeading, whenElected, leaderChanges, fencing tokens) on etcd's recipe,
// keys `<key>/<lease id in hex>`, so `etcdctl elect` shares them.
import { Election, type StartOptions } from "../../../election/election";
import type { ResolvedOptions } from "../../../election/options";
import { defineAsyncDispose } from "../../../util/dispose";
import { systemClock } from "../../../util/clock";
import { etcd3Port } from "../etcd3/port";
import type { Etcd3Client } from "../etcd3/client";
import { leaseHex } from "../member-keys";
import type { V3Membership } from "../membership";
import { EtcdV3Backend } from "../recipe";
import { processTurns } from "../../../util/turns";
import { LeaseSession, SessionClosedError } from "./lease-session";
import { SessionMemberLease } from "./session-member-lease";
import type { SessionRenewalSetting } from "./session-renewal";
import { resolveElectionOnSession, type SessionElectionOptions, type SessionOptions } from "./session-options";

export { SessionClosedError };

export class EtcdSession {
  private readonly lease: LeaseSession;
  /** The elections running on the session, by key: close() stops them, and one key has one election. */
  private readonly running = new Map<string, SessionElection>();
  private closing: Promise<void> | undefined;
  /** The renewal timing of an election given no options of its own: one object for all of them. */
  private readonly defaultTiming: SessionRenewalSetting;

  constructor(
    private readonly client: Etcd3Client,
    /** The options as given, for the elections' own. */
    private readonly given: SessionOptions,
    private readonly resolved: ResolvedOptions,
  ) {
    const { ttlSeconds, refreshInterval, requestTimeout, retryInitialDelay, retryMaxDelay } = resolved;
    this.lease = new LeaseSession(etcd3Port(client), { ttlSeconds, refreshInterval, requestTimeout, retryInitialDelay, retryMaxDelay }, systemClock);
    this.defaultTiming = { ...pickTiming(resolved), clock: systemClock };
  }

  /** The session's lease ID in hex, as it ends every member key (`<key>/<lease id>`); undefined until the first election joins. */
  get leaseId(): string | undefined {
    const id = this.lease.leaseId;
    return id === undefined ? undefined : leaseHex(id);
  }

  /** True once close() was called. */
  get closed(): boolean {
    return this.lease.isClosed;
  }

  /**
   * A member named `name` of the election at `key`, on this session's lease.
   * Call `.start()` to join. One election per key runs on a session at a time
   * (etcd's recipe names the key after the lease, so a second would be the
   * same key): starting another throws.
   */
  election(key: string, name: string, options?: SessionElectionOptions): Election {
    if (this.closed) throw new SessionClosedError();
    checkString("key", key);
    checkString("name", name);
    // An election given no options has the session's, resolved once: a
    // session may hold ten thousand elections, most of them alike.
    const resolved = options === undefined ? this.resolved : resolveElectionOnSession(this.given, options);
    const timing = options === undefined ? this.defaultTiming : { ...pickTiming(resolved), clock: systemClock };
    const memberLease = new SessionMemberLease(this.lease, key, timing);
    const port = etcd3Port(this.client);
    const backend = new EtcdV3Backend(port, key, name, this.resolved.ttlSeconds, processTurns, systemClock, Math.random, memberLease);
    return new SessionElection(backend, name, resolved, key, this.running, this.lease);
  }

  /**
   * Leaves every election on the session: each leader steps down (its
   * `unelected` comes first), then, once the leaders' whileLeading routines
   * have settled (each bounded by its drainTimeout), one LeaseRevoke deletes
   * every key, so every election's next member takes over at once. Resolves once etcd
   * answered (or the request timed out); never rejects. Elections cannot be
   * made or started on a closed session.
   */
  close(): Promise<void> {
    this.closing ??= this.closeOnce();
    return this.closing;
  }

  private async closeOnce(): Promise<void> {
    const elections = [...this.running.values()];
    // The leaders step down at once; the revoke waits for those draining
    // their whileLeading routines (see Election.stop()), the lease kept
    // alive meanwhile, so that no successor's routine starts before ours
    // have settled.
    // Each stop is halved (Election.halt()): every term ends before the
    // revoke, and the runs are unwound after it has gone out, so that the
    // successors do not wait for ten thousand runs to be taken apart first.
    const rests: Array<() => void> = [];
    const revoked = this.lease.close(
      async () => {
        for (const election of elections) {
          const rest = election.halt();
          if (rest) rests.push(rest);
        }
        await Promise.all(elections.map((election) => election.drained()));
      },
      () => {
        for (const rest of rests.splice(0)) rest();
      },
    );
    await revoked;
    await Promise.all(elections.map((election) => election.leave()));
  }

  /** For `await using`: close() (Symbol.asyncDispose). */
  declare [Symbol.asyncDispose]: () => Promise<void>;
}

defineAsyncDispose(EtcdSession, function (this: EtcdSession) {
  return this.close();
});

/** An Election that tells its session when it runs, so that close() can stop it. */
class SessionElection extends Election<V3Membership> {
  constructor(
    backend: EtcdV3Backend,
    name: string,
    options: ResolvedOptions,
    private readonly key: string,
    private readonly running: Map<string, SessionElection>,
    private readonly session: LeaseSession,
  ) {
    super(backend, name, options);
  }

  override start(options?: StartOptions): this {
    if (this.isRunning()) return this;
    if (this.session.isClosed) throw new SessionClosedError();
    const other = this.running.get(this.key);
    if (other && other !== this) {
      throw new Error(
        `an election at ${JSON.stringify(this.key)} already runs on this session: its key would be this one's ` +
          "(<key>/<lease id>); stop it first, or use another session",
      );
    }
    super.start(options);
    if (this.isRunning()) this.running.set(this.key, this);
    return this;
  }

  /** stop()'s first half (see Election.halt()), public for the session's close(); the election no longer runs on the session. */
  override halt(): (() => void) | undefined {
    const rest = super.halt();
    if (this.running.get(this.key) === this) this.running.delete(this.key);
    return rest;
  }

  /** Resolves once a drain that stop() began is over (at once if none). */
  drained(): Promise<void> {
    return this.draining ?? Promise.resolve();
  }
}

function checkString(what: "key" | "name", value: unknown): void {
  if (typeof value !== "string" || value.trim() === "") {
    throw new TypeError(`the election's ${what} must be a non-empty string, got ${typeof value === "string" ? JSON.stringify(value) : typeof value}`);
  }
}

function pickTiming(options: ResolvedOptions): Omit<SessionRenewalSetting, "clock"> {
  const { refreshInterval, requestTimeout, retryInitialDelay, retryMaxDelay } = options;
  return { refreshInterval, requestTimeout, retryInitialDelay, retryMaxDelay };
}
