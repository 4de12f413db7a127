// Shared vocabulary of the fault-injection scenarios (test/faults/*.ts).
import type { LeaderWork } from "../kit/member-process";
import type { ScenarioContext } from "./runner";

/** The etcd APIs: what the in-process tests that take etcd clients run on. */
export type Backend = "v2" | "v3";

export const BACKENDS: readonly Backend[] = ["v2", "v3"];

/**
 * What the fault suite runs on: both etcd APIs, NATS JetStream KV on one
 * server ("nats") and on a cluster of three with a bucket replicated on all
 * three ("nats-cluster", whose scenarios are apart: nats-cluster-faults.ts),
 * PostgreSQL and Redis.
 */
export type FaultBackend = Backend | "nats" | "nats-cluster" | "postgres" | "redis";

/** The backends the CLI's own fault tests (test/cli/) run on. */
export const FAULT_BACKENDS: readonly (Backend | "nats")[] = [...BACKENDS, "nats"];

/** Whether the members of `backend` are NATS KV members (a key of a bucket, no line). */
export function isNats(backend: FaultBackend): backend is "nats" | "nats-cluster" {
  return backend === "nats" || backend === "nats-cluster";
}

/** Whether `backend`'s members race for one key, so that a follower holds nothing in the store (NATS KV, PostgreSQL, Redis). */
export function isRaceStyle(backend: FaultBackend): boolean {
  return backend !== "v2" && backend !== "v3";
}

/**
 * What the members must do once the fault is over:
 * - required: somebody is elected at or after `healedAt` (a fail-over);
 * - optional: the leader may keep its term or hand over, but somebody leads;
 * - none: the leader that led before the fault leads throughout, unbroken.
 */
export type Reelection = "required" | "optional" | "none";

export interface ScenarioOutcome {
  /** When the fault began. */
  faultAt: number;
  /**
   * From when a working majority of members could elect again (for a fault
   * that only hits the leader, the moment it hits). The re-election bound and
   * the leaderless-gap bound are counted from here.
   */
  healedAt: number;
  reelection: Reelection;
  /**
   * The store was wiped and made again at this moment (a NATS bucket deleted
   * and re-created), so its revisions, and the tokens, start again: the first
   * term from here may carry a smaller token than the last one before.
   */
  tokensRestartAt?: number;
}

export interface Scenario {
  /** Short name, unique, used in reports and to select scenarios in the soak. */
  id: string;
  /** What happens and what is asserted beyond the common checks. */
  title: string;
  /** Election members, each in its own process behind its own fault proxy. Default 3. */
  members?: number;
  /** Membership TTL in seconds. Default 2. */
  ttlSeconds?: number;
  /** etcd servers; more than one makes a cluster. Default 1. (NATS runs use one nats-server.) */
  etcdServers?: number;
  /** What every member runs while it leads (see LeaderWork). Default "command". */
  work?: LeaderWork;
  /** etcd: every member's watchRearmInterval in ms (run --watch-rearm). Default the library's. */
  watchRearmMs?: number;
  /** Backends the scenario does not apply to, each with the reason (the suite reports it as a skip). */
  notFor?: Partial<Record<FaultBackend, string>>;
  /**
   * The re-election bound is the TTL plus this, from the heal. Default 2 s
   * (RECOVERY_SLACK_MS); more where a request sent while the store could not
   * answer waits out the client's own timeout.
   */
  recoverySlackMs?: number;
  /** Overlap of two members' terms that is tolerated. Default 0. */
  allowedOverlapMs?: number;
  /** The fault itself; the runner does the setup, the settling, the common checks and the teardown. */
  run(ctx: ScenarioContext): Promise<ScenarioOutcome>;
}
