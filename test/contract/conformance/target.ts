// What the conformance suite (suite.ts) needs from a store to check a backend
// on it: backends for the members of one fresh election, and a few things an
// operator (or a failing network) can do to that store from outside. A new
// backend joins the suite with one small file that builds a target and one
// test file that calls `runConformance(target)`; see README.md beside this.
import type { ElectionBackend } from "../../../src/contract/backend";

/** The store operations a target may be unable to perform, each with the reason why. */
export type StoreOperation = "deleteMember" | "expireMember" | "cutConnection" | "openWatches";

export interface ConformanceTarget {
  /** Shown in the suite's title: "etcd v3", "in-memory example". */
  readonly name: string;
  /**
   * Operations this store cannot perform, with the reason: the cases that need
   * them are reported as skipped with it, never passed without running. The
   * election's method of the same name is then left out.
   */
  readonly unsupported?: Partial<Record<StoreOperation, string>>;
  /**
   * Why a leave() hands over only once the leaver's membership has aged out,
   * where it does; undefined where the successor is elected at once. The
   * hand-over case then checks all but its speed, and reports the reason.
   */
  readonly handsOverAfterTtl?: string;
  /** Starts the store, once before every case (a `before` hook). */
  start(): Promise<void>;
  /** Stops the store and whatever `start` set up, once after every case (an `after` hook). */
  stop(): Promise<void>;
  /**
   * A fresh election, at a key no other case uses, whose memberships live
   * `ttlSeconds` without renewal.
   */
  election(label: string, ttlSeconds: number): Promise<TargetElection>;
}

/** One election on the store, for one case. Members are told apart by name: the store holds each member's name. */
export interface TargetElection {
  /**
   * A backend for a new member (or an observer) named `name`, on a connection
   * of its own where the store has connections, so that cutting one member
   * off leaves the others connected.
   */
  backend(name: string): Promise<ElectionBackend>;
  /** The names of the members the store holds a membership for now, read from the store itself (oldest first where the store keeps an order). */
  members(): Promise<string[]>;
  /** Who leads, read from the store itself, not through a backend; undefined when nobody does. */
  readLeader(): Promise<string | undefined>;
  /** Deletes the membership of member `name` as an operator would (its key, its entry). */
  deleteMember?(name: string): Promise<void>;
  /**
   * Makes the store drop the membership of member `name` the way it drops one
   * nobody renews (revoke its lease, let its TTL lapse). May take up to a TTL
   * to take effect; resolves once it is under way.
   */
  expireMember?(name: string): Promise<void>;
  /**
   * From now on, nothing member `name` sends reaches the store and nothing the
   * store sends reaches the member; requests neither succeed nor fail, they
   * go unanswered, as across a network partition. Lasts until `cleanup`.
   */
  cutConnection?(name: string): Promise<void>;
  /** How many watches (or other long waits) the store is serving now, for checking that nothing was left watching. */
  openWatches?(): Promise<number>;
  /** Closes connections and proxies this election opened. Members are stopped before it runs. */
  cleanup(): Promise<void>;
}
