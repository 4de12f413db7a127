// The backend conformance suite: every backend runs these same cases, on a
// real store, through a target (target.ts) that says how to reach the store
// and how to act on it from outside.
import { describe } from "node:test";
import { backendCases } from "./backend-cases";
import { claimCases } from "./claim-cases";
import { electionCases } from "./election-cases";
import { Harness } from "./harness";
import { stopCases } from "./stop-cases";
import type { ConformanceTarget } from "./target";

export type { ConformanceTarget, TargetElection, StoreOperation } from "./target";

/** Declares the whole suite for `target` in the calling test file. */
export function runConformance(target: ConformanceTarget): void {
  describe(`backend conformance: ${target.name}`, () => {
    const harness = new Harness(target);
    harness.hooks();
    electionCases(harness);
    stopCases(harness);
    backendCases(harness);
    claimCases(harness);
  });
}
