// What one run produces: the object bench/results/latest.json holds, which
// the terminal report, the markdown report, the targets and the chart read.
import type { Params } from "./context";
import type { ColdStartResult } from "./scenarios/cold-start";
import type { CrashResult } from "./scenarios/crash";
import type { GracefulResult } from "./scenarios/graceful";
import type { NatsIdleRun } from "./scenarios/nats-idle";
import type { StoreIdleRun } from "./scenarios/store-idle";
import type { OverloadRun } from "./scenarios/overload";
import type { DrainRun } from "./scenarios/drain";
import type { SessionsRun } from "./scenarios/sessions";
import type { PartitionResult } from "./scenarios/partition";
import type { ScaleRun } from "./scenarios/scale";
import { SUBJECTS } from "./subjects/info";

export const SCENARIOS = ["graceful", "cold", "scale", "overload", "sessions", "drain", "crash", "partition"] as const;
export type Scenario = (typeof SCENARIOS)[number];

export interface BenchResults {
  meta: {
    startedAt: string;
    quick: boolean;
    /** The scenarios and subjects the run measured; results from before they were recorded measured all of them. */
    scenarios?: Scenario[];
    subjects?: string[];
    durationS?: number;
    machine: { nproc: number; cpu: string; memoryGiB: number; node: string; etcd: string; os: string };
    params: Params;
    /** Percent of the machine's CPUs used by processes other than the benchmark's, per scenario. */
    otherLoad: Record<string, number>;
    notes: string[];
  };
  graceful: GracefulResult[];
  coldStart: ColdStartResult[];
  scale: { baseline?: { seconds: number; proposals: number; grpcReceived: number }; runs: ScaleRun[] };
  /** NATS KV idle load (its own table: NATS messages, not etcd requests); results from before it was measured lack it. */
  natsIdle: NatsIdleRun[];
  /** PostgreSQL and Redis idle load (what the server counted); results from before those subjects existed lack it. */
  storeIdle?: StoreIdleRun[];
  /** Results from before overload was measured lack it. */
  overload?: OverloadRun[];
  /** Results from before sessions were measured lack it. */
  sessions?: SessionsRun[];
  /** Results from before the drain was measured lack it. */
  drain?: DrainRun[];
  crash: CrashResult[];
  partition: PartitionResult[];
  targets: TargetLine[];
}

export interface TargetLine {
  pass: boolean;
  text: string;
}

/** What a run left out of a full run: `--quick`, `--only=…`, `--subjects=…` as given; empty for a full run. */
export function partialArgs(results: BenchResults): string[] {
  const args: string[] = [];
  if (results.meta.quick) args.push("--quick");
  const scenarios = results.meta.scenarios;
  // A run from before a scenario existed (no figures of it at all, not even none) left nothing out by not running it.
  const known = SCENARIOS.filter(
    (s) =>
      (s !== "overload" || results.overload !== undefined) &&
      (s !== "sessions" || results.sessions !== undefined) &&
      (s !== "drain" || results.drain !== undefined),
  );
  if (scenarios && known.some((s) => !scenarios.includes(s))) args.push(`--only=${scenarios.join(",")}`);
  const subjects = results.meta.subjects;
  // A run from before the PostgreSQL and Redis subjects existed left none of them out.
  const existed = SUBJECTS.filter((s) => results.storeIdle !== undefined || (s.api !== "postgres" && s.api !== "redis"));
  if (subjects && existed.some((s) => !subjects.includes(s.id))) args.push(`--subjects=${subjects.join(",")}`);
  return args;
}

/** A full run: every scenario, every subject, full trial counts. Only its figures belong in bench/README.md. */
export function isFullRun(results: BenchResults): boolean {
  return partialArgs(results).length === 0;
}
