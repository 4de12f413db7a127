// Runs many seeds of one store, in worker threads (one per core but one, at
// least one), each seed a run of its own (run-seed.ts): the figures of the
// whole (seeds, violations, seeds per second, faults drawn by kind) and the
// first violating seed with its trace. The same seeds give the same results
// however many workers share them.
import { availableParallelism } from "node:os";
import { Worker } from "node:worker_threads";
import type { StoreKind } from "./store";

export interface SeedsRequest {
  store: StoreKind;
  firstSeed: number;
  seeds: number;
  mutation?: string | undefined;
  skew?: boolean | undefined;
  /** Stop at the first violating seed (a mutation run). */
  stopAtFirst?: boolean | undefined;
}

export interface SeedsOutcome {
  store: StoreKind;
  seeds: number;
  violations: number;
  /** The violating seeds, in order (the first few). */
  violatingSeeds: number[];
  /** The first violation's rules and the trace of its seed. */
  first: { seed: number; rules: string[]; trace: string[] } | undefined;
  drawn: Record<string, number>;
  events: number;
  ms: number;
}

const WORKER = `${__dirname}/seeds-worker.cjs`;

/** Runs `request` over `workers` threads (default: the cores there are, less one, at least one). */
export async function runSeeds(request: SeedsRequest, workers = Math.max(1, availableParallelism() - 1)): Promise<SeedsOutcome> {
  const started = performance.now();
  const count = Math.max(1, Math.min(workers, request.seeds));
  // Interleaved slices: worker i runs seeds first+i, first+i+count, ...
  const parts = await Promise.all(
    Array.from({ length: count }, (_, index) => runWorker({ ...request }, index, count)),
  );
  const outcome: SeedsOutcome = { store: request.store, seeds: 0, violations: 0, violatingSeeds: [], first: undefined, drawn: {}, events: 0, ms: 0 };
  for (const part of parts) {
    outcome.seeds += part.seeds;
    outcome.violations += part.violations;
    outcome.violatingSeeds.push(...part.violatingSeeds);
    outcome.events += part.events;
    for (const [kind, n] of Object.entries(part.drawn)) outcome.drawn[kind] = (outcome.drawn[kind] ?? 0) + n;
    if (part.first && (!outcome.first || part.first.seed < outcome.first.seed)) outcome.first = part.first;
  }
  outcome.violatingSeeds.sort((a, b) => a - b);
  outcome.violatingSeeds.splice(20);
  outcome.ms = performance.now() - started;
  return outcome;
}

function runWorker(request: SeedsRequest, index: number, stride: number): Promise<SeedsOutcome> {
  return new Promise((resolve, reject) => {
    const worker = new Worker(WORKER, { workerData: { request, index, stride } });
    worker.once("message", (outcome: SeedsOutcome) => resolve(outcome));
    worker.once("error", reject);
    worker.once("exit", (code) => {
      if (code !== 0) reject(new Error(`a simulation worker exited with code ${code}`));
    });
  });
}
