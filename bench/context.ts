// What every scenario gets from the orchestrator, and the run's parameters.
import type { Etcd3 } from "etcd3";
import type { CountingProxy } from "../test/kit/counting-proxy";
import type { OverloadCase } from "./scenarios/overload";
import type { SessionsCase } from "./scenarios/sessions";
import { storeOf, type SubjectInfo } from "./subjects/types";
import { now } from "./util";

export interface Params {
  quick: boolean;
  /** Seconds: failovers, cold start, follower learn delays, partition. */
  ttl: number;
  graceful: { trials: number; budgetS: number };
  /** Cold start at N, then `changes` leader changes with the same members (follower learn delays). */
  coldStart: { n: number; trials: number; changes: number; budgetS: number };
  scale: {
    /**
     * Seconds, for idle load, leader change cost and memory. 10 s (the default of this library and of 0.0.1): at
     * 2 s a thousand members renew 1000 times a second, more than one process on this machine can send.
     */
    ttl: number;
    ns: number[];
    /** Members start spread evenly over this long, so that their renewals are spread too. */
    spreadMs: number;
    /**
     * After every member knows the leader, wait this long before measuring.
     * More than TTL/8: a v3 member's keep-alive stream opens up to TTL/8
     * after its lease is granted, once per client, and is no idle traffic.
     */
    extraSettleS: number;
    /** Idle measurement window. Starts spread over a whole renewal interval make every phase equally likely, so any length is unbiased. */
    windowS: number;
    /** Leader changes per run, and how long after each one requests are counted. */
    changes: number;
    changeWindowS: number;
  };
  /**
   * Members that all start at once, more than can be answered in time if
   * sent together (bench/scenarios/overload.ts). Peers run only the cases
   * marked `peers`, and only in a full run.
   */
  overload: Array<OverloadCase & { peers?: boolean }>;
  /** Many elections on one etcd v3 session per process (bench/scenarios/sessions.ts). */
  sessions: SessionsCase;
  /** The drain before release (bench/scenarios/drain.ts): trials per subject of this library. */
  drain: { trials: number };
  crash: { trials: number; budgetS: number };
  partition: { trials: number; budgetS: number };
}

export function paramsFor(quick: boolean): Params {
  return quick
    ? {
        quick,
        ttl: 2,
        graceful: { trials: 6, budgetS: 20 },
        coldStart: { n: 100, trials: 2, changes: 1, budgetS: 20 },
        scale: { ttl: 10, ns: [10, 100], spreadMs: 5000, extraSettleS: 1.5, windowS: 2, changes: 1, changeWindowS: 2 },
        overload: [
          { n: 1000, processes: 1, ttl: 2, stayS: 10, convergeTimeoutS: 60 },
          { n: 1000, processes: 1, ttl: 10, stayS: 0, convergeTimeoutS: 60 },
          { n: 5000, processes: 5, ttl: 10, stayS: 5, convergeTimeoutS: 180 },
        ],
        sessions: { elections: 1000, batch: 500, processes: 3, ttl: 10, windowS: 10, changeWindowS: 3, deliveryTrials: 1 },
        drain: { trials: 4 },
        crash: { trials: 3, budgetS: 30 },
        partition: { trials: 2, budgetS: 30 },
      }
    : {
        quick,
        ttl: 2,
        graceful: { trials: 25, budgetS: 120 },
        // Medians of five cold starts moved by a third from run to run (this
        // library on v2: 124, 157 and 186 ms; 0.0.1: 121, 138 and 128), more
        // than the subjects differ: eleven, with 22 leader changes after them.
        coldStart: { n: 100, trials: 11, changes: 2, budgetS: 300 },
        // An idle window of two renewal intervals of ours and six of Election's
        // still moved the ratio of the two by ±0.5 % from run to run, as much
        // as the idle-load target leaves above the ratio of their schedules
        // (2/3 against 0.67): twice as long halves that.
        scale: { ttl: 10, ns: [10, 100, 1000], spreadMs: 5000, extraSettleS: 2, windowS: 20, changes: 2, changeWindowS: 3 },
        overload: [
          { n: 1000, processes: 1, ttl: 2, stayS: 30, convergeTimeoutS: 60, peers: true },
          { n: 1000, processes: 1, ttl: 10, stayS: 0, convergeTimeoutS: 60 },
          { n: 5000, processes: 5, ttl: 10, stayS: 10, convergeTimeoutS: 180 },
        ],
        sessions: { elections: 10_000, batch: 500, processes: 3, ttl: 10, windowS: 20, changeWindowS: 3, deliveryTrials: 3 },
        // At least 40, so that medians a few tens of milliseconds apart can be told apart.
        drain: { trials: 12 },
        crash: { trials: 40, budgetS: 300 },
        partition: { trials: 6, budgetS: 150 },
      };
}

export interface BenchContext {
  params: Params;
  subjects: readonly SubjectInfo[];
  /** etcd's client URL (http://127.0.0.1:port). */
  etcdUrl: string;
  /** nats-server's client URL (nats://127.0.0.1:port), when a NATS subject runs. */
  natsUrl?: string;
  /** nats-server's monitoring URL (http://127.0.0.1:port), for its per-connection message counters. */
  natsMonitorUrl?: string;
  /** PostgreSQL's connection string (postgres://postgres@127.0.0.1:port/postgres), when a PostgreSQL subject runs. */
  postgresUrl?: string;
  /** redis-server's URL (redis://127.0.0.1:port), when a Redis subject runs. */
  redisUrl?: string;
  countingProxy: CountingProxy;
  /** For reading election state directly (v3). */
  probe: Etcd3;
  log(message: string): void;
}

/** Counts the members a subject holds in etcd under `prefix` (v2 directory or v3 prefix); etcd subjects only. */
export async function storeMemberCount(ctx: BenchContext, subject: SubjectInfo, prefix: string): Promise<number> {
  if (subject.api === "v2") {
    const response = await fetch(`${ctx.etcdUrl}/v2/keys${prefix}?sorted=true`, { signal: AbortSignal.timeout(3_000) });
    if (response.status === 404) return 0;
    const body = (await response.json()) as { node?: { nodes?: unknown[] } };
    return body.node?.nodes?.length ?? 0;
  }
  return Number(await ctx.probe.getAll().prefix(prefix).count());
}

/** Where a subject's members connect: etcd, nats-server, PostgreSQL or redis-server. */
export function storeHosts(ctx: BenchContext, subject: SubjectInfo): string[] {
  const store = storeOf(subject);
  const url = { etcd: ctx.etcdUrl, nats: ctx.natsUrl, postgres: ctx.postgresUrl, redis: ctx.redisUrl }[store];
  if (!url) throw new Error(`${subject.label} needs a ${store} server, and none was started`);
  return [url];
}

/** The same store URL with `hostPort` (a proxy in front of the store) for its host and port; user, path and scheme kept. */
export function throughProxy(url: string, hostPort: string): string {
  const through = new URL(url);
  through.host = hostPort;
  return through.toString();
}

export function elapsedS(since: number): number {
  return (now() - since) / 1000;
}
