// One worker of runSeeds (seeds.ts): the seeds first+index, first+index+stride, ...
//
// Errors made in a run (a refused connection, an election's error events)
// carry no stack here: a run's trace holds their messages, and capturing
// stacks was a tenth of a seed's time. A replay of one seed keeps them.
Error.stackTraceLimit = 0;
import { parentPort, workerData } from "node:worker_threads";
import { findMutation } from "./catalogue";
import { runSeed } from "./run-seed";
import type { SeedsOutcome, SeedsRequest } from "./seeds";
import { SIM_STORES } from "./stores";

async function main(): Promise<void> {
  const { request, index, stride } = workerData as { request: SeedsRequest; index: number; stride: number };
  const factory = SIM_STORES[request.store];
  if (!factory) throw new Error(`no simulated store ${request.store}`);
  const mutation = request.mutation === undefined ? undefined : findMutation(request.store, request.mutation);
  const outcome: SeedsOutcome = { store: request.store, seeds: 0, violations: 0, violatingSeeds: [], first: undefined, drawn: {}, events: 0, ms: 0 };
  const started = performance.now();
  for (let i = index; i < request.seeds; i += stride) {
    const seed = request.firstSeed + i;
    const result = await runSeed(factory, seed, { mutation, skew: request.skew });
    outcome.seeds++;
    outcome.events += result.events;
    for (const [kind, n] of Object.entries(result.drawn)) outcome.drawn[kind] = (outcome.drawn[kind] ?? 0) + n;
    if (result.violations.length === 0) continue;
    outcome.violations++;
    if (outcome.violatingSeeds.length < 20) outcome.violatingSeeds.push(seed);
    if (!outcome.first) outcome.first = { seed, rules: result.violations.map((v) => `${v.rule}: ${v.detail}`), trace: result.trace.lines() };
    if (request.stopAtFirst) break;
  }
  outcome.ms = performance.now() - started;
  parentPort!.postMessage(outcome);
}

main().catch((err: unknown) => {
  // Reported to the parent as the worker's error.
  throw err;
});
