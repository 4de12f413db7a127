// The deterministic simulation as part of the suite: on each simulated store,
// 10,000 seeds (SIM_SEEDS) with no violation; every mutation found within a
// stated number of seeds; clock rates beyond the documented bound violating
// the guarantee (so the bound is tight); the public record's bugs as
// regression schedules, passing, and failing under the mutation that makes
// them; and a seed that replays to the same trace, byte for byte.
import assert from "node:assert/strict";
import { availableParallelism } from "node:os";
import { describe, it } from "node:test";
import { mutationsOf } from "./catalogue";
import { replayCommand, summary } from "./cli";
import { REGRESSIONS } from "./regressions";
import { runSchedule, runSeed, traceDigest } from "./run-seed";
import { runSeeds } from "./seeds";
import type { StoreKind } from "./store";
import { SIM_STORES } from "./stores";
import { simEtcdV3 } from "./stores/etcd-v3";
import { simNatsKvWithBucketRemade } from "./stores/nats-kv";

const SEEDS = Number(process.env.SIM_SEEDS ?? 10_000);
/** A worker per core: the suite's other files spend most of their time waiting on timers, and the seeds take up what they leave. */
const WORKERS = availableParallelism();
/** Every mutation is found within this many seeds, from seed 1. */
const FIND_WITHIN = 3_000;
/** With clock rates beyond the bound, violations come within this many seeds. */
const SKEW_SEEDS = 300;
/** The mutation each regression schedule fails under, where a store has one. */
const REGRESSION_MUTATIONS: Partial<Record<string, string>> = { "etcd-19597": "waits-on-deleted-key" };

for (const store of Object.keys(SIM_STORES) as StoreKind[]) {
  const factory = SIM_STORES[store]!;

  describe(`simulation: ${store}`, { timeout: 300_000 }, () => {
    it(`${SEEDS} seeds, each a schedule of faults, break no rule of the checker`, async (t) => {
      const outcome = await runSeeds({ store, firstSeed: 1, seeds: SEEDS }, WORKERS);
      t.diagnostic(summary(outcome));
      assert.equal(outcome.seeds, SEEDS);
      if (outcome.first) {
        assert.fail(
          `seed ${outcome.first.seed} violates: ${outcome.first.rules.join("; ")}\n${outcome.first.trace.slice(-60).join("\n")}\n` +
            `replay: ${replayCommand(store, outcome.first.seed, {})}\nviolating seeds: ${outcome.violatingSeeds.join(" ")}`,
        );
      }
    });

    for (const mutation of mutationsOf(store)) {
      it(`finds the mutation ${mutation.name} within ${FIND_WITHIN} seeds: ${mutation.description}`, async (t) => {
        const outcome = await runSeeds({ store, firstSeed: 1, seeds: FIND_WITHIN, mutation: mutation.name, stopAtFirst: true }, WORKERS);
        assert.ok(outcome.first, `no seed of ${FIND_WITHIN} found ${mutation.name}`);
        t.diagnostic(`found by seed ${outcome.first.seed}: ${outcome.first.rules.join("; ")}`);
      });
    }

    it(`finds violations within ${SKEW_SEEDS} seeds when clock rates differ beyond the documented bound`, async (t) => {
      const outcome = await runSeeds({ store, firstSeed: 1, seeds: SKEW_SEEDS, skew: true, stopAtFirst: true }, WORKERS);
      assert.ok(outcome.first, "clock rates beyond stepDownMargin over a TTL broke no rule: the bound is not tight, or the checker misses it");
      t.diagnostic(`found by seed ${outcome.first.seed}: ${outcome.first.rules.join("; ")}`);
    });

    for (const schedule of REGRESSIONS) {
      it(`regression ${schedule.name}: ${schedule.description}`, async () => {
        const result = await runSchedule(factory, schedule);
        assert.deepEqual(result.violations, [], result.trace.lines().join("\n"));
        const breaking = REGRESSION_MUTATIONS[schedule.name];
        const mutation = breaking === undefined ? undefined : mutationsOf(store).find((m) => m.name === breaking);
        if (mutation) {
          const broken = await runSchedule(factory, schedule, 1, { mutation });
          assert.notDeepEqual(broken.violations, [], `the schedule passes under ${mutation.name}, which it is there to catch`);
        }
      });
    }

    it("replays a violating seed to the same trace, byte for byte", async () => {
      const mutation = mutationsOf(store)[0]!;
      const found = await runSeeds({ store, firstSeed: 1, seeds: FIND_WITHIN, mutation: mutation.name, stopAtFirst: true }, WORKERS);
      assert.ok(found.first);
      const once = await runSeed(factory, found.first.seed, { mutation, fullTrace: true });
      const again = await runSeed(factory, found.first.seed, { mutation, fullTrace: true });
      assert.notDeepEqual(once.violations, []);
      assert.equal(traceDigest(once), traceDigest(again));
      assert.deepEqual(once.trace.lines(), again.trace.lines());
    });
  });
}

// A known limit, kept as a case until it is fixed (docs/nats.md, "Tokens and
// a re-created bucket"): the runs above leave this fault out.
describe("simulation: nats-kv with its bucket deleted and made again", () => {
  const REMADE_SEEDS = 2_000;
  it(
    `${REMADE_SEEDS} seeds break no rule of the checker`,
    {
      todo:
        "revisions start over in a bucket made again: a member that did not see the deletion can write over another member's entry " +
        "when the revisions meet, and two lead, or a term's token is not above the last",
    },
    async () => {
      for (let seed = 1; seed <= REMADE_SEEDS; seed++) {
        const result = await runSeed(simNatsKvWithBucketRemade, seed);
        assert.deepEqual(result.violations, [], `seed ${seed}: ${result.violations.map((v) => v.rule).join("; ")}`);
      }
    },
  );
});

// Seeds of a million-seed run on etcd v3 that broke a rule of the real code:
// a member whose key was deleted from outside led beside its successor for
// longer than a TTL and a delivery, because its lease renewals went on being
// confirmed while the deletion had not reached it (its watch of its key
// broken by a store restart, or opened only after the deletion, by a member
// elected from a read that was in flight meanwhile). A renewal with no
// confirmed watch of the key now reads the key beside the keep-alive.
describe("simulation: etcd-v3, keys deleted from outside while the owner's watch of its key is down", () => {
  for (const seed of [12305, 102327, 288386]) {
    it(`seed ${seed} breaks no rule of the checker`, async () => {
      const result = await runSeed(simEtcdV3, seed);
      assert.deepEqual(result.violations, [], result.violations.map((v) => `${v.rule}: ${v.detail}`).join("; "));
    });
  }
});
