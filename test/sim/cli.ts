// `npm run sim`: the deterministic simulation from the command line.
//
//   npm run sim -- --seeds N --store etcd-v3|etcd-v2|nats-kv|redis|postgres|all [--first S] [--skew]
//       runs N seeds per store; prints, last, one line per store and the
//       faults drawn by kind; exits 1 when any seed violates (with the first
//       violating seed's trace and the command that replays it).
//   npm run sim -- --seed S --store X [--mutation NAME] [--skew] --trace
//       replays one seed and prints its trace.
//   npm run sim -- --mutation NAME --seeds N --store X
//       runs with one seam broken; prints the first violating seed; exits 0
//       only when it found one. `--mutation list` lists the names.
import { parseArgs } from "node:util";
import { findMutation, mutationsOf } from "./catalogue";
import { runSeed } from "./run-seed";
import { runSeeds, type SeedsOutcome } from "./seeds";
import type { StoreKind } from "./store";
import { SIM_STORES } from "./stores";

const USAGE =
  "usage: npm run sim -- --seeds N --store etcd-v3|etcd-v2|nats-kv|redis|postgres|all [--first S] [--skew]\n" +
  "       npm run sim -- --seed S --store STORE [--mutation NAME] [--skew] --trace\n" +
  "       npm run sim -- --mutation NAME|list --seeds N --store STORE";

function fail(message: string): never {
  process.stderr.write(`sim: ${message}\n${USAGE}\n`);
  process.exit(2);
}

function stores(name: string | undefined): StoreKind[] {
  const known = Object.keys(SIM_STORES) as StoreKind[];
  if (name === undefined) fail("--store is required");
  if (name === "all") return known;
  if (!known.includes(name as StoreKind)) fail(`no simulated store ${JSON.stringify(name)}: the stores are ${known.join(", ")}`);
  return [name as StoreKind];
}

function count(text: string | undefined, flag: string): number | undefined {
  if (text === undefined) return undefined;
  const value = Number(text);
  if (!Number.isInteger(value) || value < 0) fail(`--${flag} must be a whole number, got ${JSON.stringify(text)}`);
  return value;
}

/** The command that replays one seed of a run, for a violation's report. */
export function replayCommand(store: StoreKind, seed: number, options: { mutation?: string | undefined; skew?: boolean | undefined }): string {
  const extra = `${options.mutation ? ` --mutation ${options.mutation}` : ""}${options.skew ? " --skew" : ""}`;
  return `npm run sim -- --seed ${seed} --store ${store}${extra} --trace`;
}

/** The last line for one store, and what was drawn. */
export function summary(outcome: SeedsOutcome): string {
  const perSecond = outcome.seeds / (outcome.ms / 1000);
  const drawn = Object.entries(outcome.drawn)
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([kind, n]) => `${kind} ${n}`)
    .join(", ");
  return `sim ${outcome.store}: ${outcome.seeds} seeds, ${outcome.violations} violations, ${perSecond.toFixed(0)} seeds/s\n  faults drawn: ${drawn}`;
}

async function main(): Promise<number> {
  const { values } = parseArgs({
    options: {
      seeds: { type: "string" },
      seed: { type: "string" },
      first: { type: "string" },
      store: { type: "string" },
      mutation: { type: "string" },
      skew: { type: "boolean" },
      trace: { type: "boolean" },
      workers: { type: "string" },
      help: { type: "boolean", short: "h" },
    },
    strict: true,
  });
  if (values.help) {
    process.stdout.write(`${USAGE}\n`);
    return 0;
  }
  const kinds = stores(values.store);
  if (values.mutation === "list") {
    for (const kind of kinds) for (const m of mutationsOf(kind)) process.stdout.write(`${kind}  ${m.name}: ${m.description}\n`);
    return 0;
  }
  const workers = count(values.workers, "workers");
  const seed = count(values.seed, "seed");
  if (seed !== undefined) {
    if (kinds.length !== 1) fail(`--seed replays one store's seed: give --store and one of ${Object.keys(SIM_STORES).join(", ")}`);
    const kind = kinds[0]!;
    const mutation = values.mutation === undefined ? undefined : findMutation(kind, values.mutation);
    const result = await runSeed(SIM_STORES[kind]!, seed, { mutation, skew: values.skew, fullTrace: true });
    if (values.trace) process.stdout.write(`${result.trace.lines().join("\n")}\n`);
    process.stdout.write(`seed ${seed} on ${kind}: ${result.events} events, ${result.violations.length} violations\n`);
    for (const v of result.violations) process.stdout.write(`  ${v.rule} at ${v.at.toFixed(3)} ms: ${v.detail}\n`);
    return result.violations.length > 0 && !values.mutation ? 1 : 0;
  }
  const seeds = count(values.seeds, "seeds") ?? fail("--seeds N is required (or --seed S to replay one)");
  const firstSeed = count(values.first, "first") ?? 1;
  let failed = false;
  const lines: string[] = [];
  for (const kind of kinds) {
    if (values.mutation !== undefined) {
      findMutation(kind, values.mutation);
      const outcome = await runSeeds({ store: kind, firstSeed, seeds, mutation: values.mutation, skew: values.skew, stopAtFirst: true }, workers);
      if (outcome.first) {
        process.stdout.write(`${kind} ${values.mutation}: found by seed ${outcome.first.seed}: ${outcome.first.rules.join("; ")}\n`);
        process.stdout.write(`  replay: ${replayCommand(kind, outcome.first.seed, { mutation: values.mutation, skew: values.skew })}\n`);
      } else {
        process.stdout.write(`${kind} ${values.mutation}: no violation in ${outcome.seeds} seeds from ${firstSeed}\n`);
        failed = true;
      }
      continue;
    }
    const outcome = await runSeeds({ store: kind, firstSeed, seeds, skew: values.skew }, workers);
    if (outcome.first) {
      failed = true;
      process.stdout.write(`\n${kind}: seed ${outcome.first.seed} violates: ${outcome.first.rules.join("; ")}\n`);
      process.stdout.write(`${outcome.first.trace.slice(-60).join("\n")}\n`);
      process.stdout.write(`replay: ${replayCommand(kind, outcome.first.seed, { skew: values.skew })}\n`);
      process.stdout.write(`violating seeds: ${outcome.violatingSeeds.join(" ")}\n`);
    }
    lines.push(summary(outcome));
  }
  if (lines.length > 0) process.stdout.write(`${lines.join("\n")}\n`);
  return failed ? 1 : 0;
}

if (require.main === module) {
  main().then(
    (code) => process.exit(code),
    (err: unknown) => {
      process.stderr.write(`sim: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
      process.exit(1);
    },
  );
}
