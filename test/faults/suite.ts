// Fault injection: every scenario of test/faults/scenarios.ts on one backend,
// with members in their own processes, each behind its own fault proxy, and a
// checker over what each member recorded about its own leadership. The
// scenarios and the checks are described in test/faults/runner.ts and in each
// scenario's title. One test file per backend (faults-*.test.ts), so that the
// three run side by side in `npm test`; `npm run soak` runs them many times over.
import assert from "node:assert/strict";
import { after, describe, it } from "node:test";
import { killAllClis } from "../kit/cli-process";
import { cleanupEverything, runScenario } from "./runner";
import { SCENARIOS } from "./scenarios";
import type { FaultBackend, Scenario } from "./types";

/** A run takes 3 to 15 s; the runner bounds each of its own steps well within this. */
const SCENARIO_TIMEOUT_MS = 120_000;

/** Cleanup that takes longer than this has hung; failing the hook says so instead of holding the run. */
const CLEANUP_TIMEOUT_MS = 60_000;

async function cleanUp(): Promise<void> {
  await cleanupEverything();
  await killAllClis();
}

const DESCRIPTIONS: Record<FaultBackend, string> = {
  v2: "etcd v2 API (node-etcd)",
  v3: "etcd v3 API (etcd3)",
  nats: "NATS JetStream KV (nats-server 2.9)",
  "nats-cluster": "NATS JetStream KV, a bucket with three replicas on three nats-servers (2.9)",
  postgres: "PostgreSQL (15, through pg)",
  redis: "Redis (redis-server 7 with appendfsync always, through ioredis)",
};

/** Declares every scenario of `scenarios` that applies to `backend` (the others as skips, with the reason) in the calling test file. */
export function runFaultSuite(backend: FaultBackend, scenarios: readonly Scenario[] = SCENARIOS): void {
  after(cleanUp, { timeout: CLEANUP_TIMEOUT_MS });

  describe(`fault injection, ${DESCRIPTIONS[backend]}`, () => {
    for (const scenario of scenarios) {
      it(scenario.id, { timeout: SCENARIO_TIMEOUT_MS, skip: scenario.notFor?.[backend] ?? false }, async (t) => {
        const result = await runScenario(scenario, backend);
        // One line per scenario; the problems and the timeline go with the failure.
        t.diagnostic(`${result.summary.split("\n")[0]} [${(result.durationMs / 1000).toFixed(1)} s]`);
        assert.ok(result.ok, `${result.summary}\n--- timeline:\n${result.timeline}`);
      });
    }
  });
}
