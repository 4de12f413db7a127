// `npm run soak`: what `npm test` proves once, many times over, for the
// failures that show one run in many and for the spread of the figures.
//
// - faults: every fault scenario on both etcd APIs and NATS KV (where it
//   applies), and the cluster's on NATS KV with a bucket replicated on three
//   servers (nats-cluster-faults.ts), N times in a row each (default 10),
//   then a table per scenario:
//   passes, the time to a leader after the fault (median and max), the
//   longest leaderless stretch, the longest overlap of two terms, and the
//   errors members reported. One line per run, and for a failed run its
//   problems and the full timeline of every member.
// - cli: the tests that repeat a scenario (test/kit/repetitions.ts: the CLI's
//   leader cut off, frozen, SIGKILLed), run N times each with their variable
//   set, through node --test; they print their figures as diagnostics.
// - conformance: the test files under test/soak/ (the conformance suite on a
//   three-server JetStream cluster), too slow for `npm test`, N times in a
//   row each through node --test, one line per run.
//
// Usage: node --import tsx test/faults/soak.ts [--runs N] [--part faults|cli|conformance]...
//          [--backend v2|v3|nats|nats-cluster|postgres|redis]... [--scenario id]... [--json file]
// --backend and --scenario choose fault scenarios, and without --part mean
// the fault part alone.
//
// Exits 1 if any run failed. Every process, proxy and etcd is gone
// afterwards, also on Ctrl-C.
import { spawn, type ChildProcess } from "node:child_process";
import { writeFileSync } from "node:fs";
import { killAllClis } from "../kit/cli-process";
import { REPO_ROOT } from "../kit/paths";
import { REPEATED_TEST_PATTERN, REPEATING_TESTS } from "../kit/repetitions";
import { cleanupEverything, runScenario, type ScenarioResult } from "./runner";
import { CLUSTER_SCENARIOS } from "./nats-cluster-faults";
import { SCENARIOS } from "./scenarios";
import { FAULT_BACKENDS, type FaultBackend, type Scenario } from "./types";

/** Every scenario: those of scenarios.ts on one server of each store, then the cluster's. */
const ALL_SCENARIOS: readonly Scenario[] = [...SCENARIOS, ...CLUSTER_SCENARIOS];

/** The cluster's scenarios run on the cluster alone, and only they do. */
function appliesTo(scenario: Scenario, backend: FaultBackend): boolean {
  return CLUSTER_SCENARIOS.includes(scenario) === (backend === "nats-cluster") && !scenario.notFor?.[backend];
}

type Part = "faults" | "cli" | "conformance";

/** The test files only the soak runs (conformance part). */
const SOAK_TEST_FILES = ["test/soak/conformance-nats-kv-cluster.test.ts"];

interface Args {
  runs: number;
  parts: Part[];
  backends: FaultBackend[];
  scenarios: string[];
  json: string | undefined;
}

function parseArgs(argv: string[]): Args {
  const args: Args = { runs: 10, parts: [], backends: [], scenarios: [], json: undefined };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    const value = (): string => {
      const v = argv[++i];
      if (v === undefined) usage(`${arg} needs a value`);
      return v;
    };
    if (arg === "--runs") {
      args.runs = Number(value());
      if (!Number.isInteger(args.runs) || args.runs < 1 || args.runs > 1000) usage("--runs takes a whole number from 1 to 1000");
    } else if (arg === "--part") {
      const part = value();
      if (part !== "faults" && part !== "cli" && part !== "conformance") usage("--part takes faults, cli or conformance");
      args.parts.push(part);
    } else if (arg === "--backend") {
      const b = value();
      const known: readonly FaultBackend[] = ["v2", "v3", "nats", "nats-cluster", "postgres", "redis"];
      if (!known.includes(b as FaultBackend)) usage(`--backend takes ${known.join(", ")}`);
      args.backends.push(b as FaultBackend);
    } else if (arg === "--scenario") {
      const id = value();
      if (!ALL_SCENARIOS.some((s) => s.id === id)) usage(`unknown scenario ${id}; known: ${ALL_SCENARIOS.map((s) => s.id).join(", ")}`);
      args.scenarios.push(id);
    } else if (arg === "--json") {
      args.json = value();
    } else if (arg === "-h" || arg === "--help") {
      process.stdout.write(`${USAGE}\n`);
      process.exit(0);
    } else {
      usage(`unknown argument ${arg}`);
    }
  }
  if (args.parts.length === 0) args.parts = args.backends.length > 0 || args.scenarios.length > 0 ? ["faults"] : ["faults", "cli", "conformance"];
  if (args.backends.length === 0) args.backends = [...FAULT_BACKENDS, "postgres", "redis", "nats-cluster"];
  return args;
}

const USAGE =
  "usage: node --import tsx test/faults/soak.ts [--runs N] [--part faults|cli|conformance]... [--backend v2|v3|nats|nats-cluster|postgres|redis]... [--scenario id]... [--json file]";

function usage(problem: string): never {
  process.stderr.write(`soak: ${problem}\n${USAGE}\n`);
  process.exit(2);
}

let interrupted = false;
/** The node --test run of the cli part, while it runs. */
let cliTests: ChildProcess | undefined;
for (const signal of ["SIGINT", "SIGTERM"] as const) {
  process.on(signal, () => {
    if (interrupted) return;
    interrupted = true;
    process.stdout.write(`\n${signal}: cleaning up\n`);
    cliTests?.kill(signal);
    void Promise.all([cleanupEverything(), killAllClis()]).finally(() => process.exit(signal === "SIGINT" ? 130 : 143));
  });
}

async function main(): Promise<void> {
  const args = parseArgs(process.argv.slice(2));
  const started = Date.now();
  const results = args.parts.includes("faults") ? await soakFaults(args) : [];
  const cliOk = args.parts.includes("cli") && !interrupted ? await soakCliTests(args.runs) : true;
  const conformanceOk = args.parts.includes("conformance") && !interrupted ? await soakTestFiles(args.runs) : true;
  process.stdout.write(`\ntotal ${((Date.now() - started) / 60_000).toFixed(1)} min\n`);
  process.exit(results.every((r) => r.ok) && cliOk && conformanceOk && !interrupted ? 0 : 1);
}

async function soakFaults(args: Args): Promise<ScenarioResult[]> {
  const scenarios = ALL_SCENARIOS.filter(
    (s) => (args.scenarios.length === 0 || args.scenarios.includes(s.id)) && args.backends.some((backend) => appliesTo(s, backend)),
  );
  const results: ScenarioResult[] = [];
  process.stdout.write(
    `soak: ${scenarios.length} scenarios x ${args.backends.join("+")} x ${args.runs} runs; ` +
      `TTL 2 s, re-election bound TTL + 2 s (on the cluster, TTL + 7 s from when its leaders are back)\n`,
  );
  for (const scenario of scenarios) {
    for (const backend of args.backends) {
      if (!appliesTo(scenario, backend)) continue;
      for (let run = 1; run <= args.runs && !interrupted; run++) {
        const result = await runScenario(scenario, backend);
        results.push(result);
        const f = result.figures;
        process.stdout.write(
          `[${backend} ${scenario.id} ${run}/${args.runs}] ${result.ok ? "ok" : "FAILED"} ` +
            `${(result.durationMs / 1000).toFixed(1)} s; recovery ${show(f.recoveryMs)}, longest leaderless ` +
            `${show(f.longestLeaderlessMs)}, longest overlap ${f.longestOverlapMs} ms, ${f.terms} terms, ${f.errors} errors` +
            `${Object.keys(f.extra).length ? `; ${Object.entries(f.extra).map(([k, v]) => `${k} ${Math.round(v)}`).join(", ")}` : ""}\n`,
        );
        if (!result.ok) process.stdout.write(`  ${result.summary}\n--- timeline:\n${result.timeline}\n`);
      }
    }
  }
  await cleanupEverything();
  await killAllClis();

  process.stdout.write(`\n${table(results)}\n`);
  process.stdout.write(`\n${extrasTable(results)}\n`);
  if (args.json) {
    writeFileSync(
      args.json,
      JSON.stringify(
        results.map(({ report: _report, ...rest }) => rest),
        null,
        1,
      ),
    );
  }
  return results;
}

/** The repeating tests, `runs` times each, as npm test runs its files; resolves with whether they all passed. */
async function soakCliTests(runs: number): Promise<boolean> {
  const env = { ...process.env, ...Object.fromEntries(REPEATING_TESTS.map((t) => [t.variable, String(runs)])) };
  const files = REPEATING_TESTS.map((t) => t.file);
  process.stdout.write(`\nsoak: the repeating tests, ${runs} runs each: ${files.join(", ")}\n`);
  const testArgs = ["--import", "tsx", "--test", "--test-concurrency=1", "--test-force-exit", "--test-reporter=spec"];
  cliTests = spawn(process.execPath, [...testArgs, `--test-name-pattern=${REPEATED_TEST_PATTERN}`, ...files], {
    cwd: REPO_ROOT,
    env,
    stdio: "inherit",
  });
  const child = cliTests;
  const code = await new Promise<number | null>((resolve) => child.on("close", (status) => resolve(status)));
  cliTests = undefined;
  return code === 0;
}

/** Each of SOAK_TEST_FILES `runs` times in a row, one node --test each; resolves with whether every run passed. */
async function soakTestFiles(runs: number): Promise<boolean> {
  let ok = true;
  for (const file of SOAK_TEST_FILES) {
    let passed = 0;
    process.stdout.write(`\nsoak: ${file}, ${runs} runs in a row\n`);
    for (let run = 1; run <= runs && !interrupted; run++) {
      const started = Date.now();
      const testArgs = ["--import", "tsx", "--test", "--test-force-exit", "--test-reporter=tap", file];
      cliTests = spawn(process.execPath, testArgs, { cwd: REPO_ROOT, stdio: ["ignore", "pipe", "inherit"] });
      const child = cliTests;
      let out = "";
      child.stdout!.on("data", (chunk: Buffer) => (out += chunk.toString()));
      const code = await new Promise<number | null>((resolve) => child.on("close", (status) => resolve(status)));
      cliTests = undefined;
      const count = (what: string) => new RegExp(`^# ${what} (\\d+)$`, "m").exec(out)?.[1] ?? "?";
      if (code === 0) passed++;
      process.stdout.write(
        `[${file} ${run}/${runs}] ${code === 0 ? "ok" : "FAILED"} ${((Date.now() - started) / 1000).toFixed(1)} s; ` +
          `pass ${count("pass")}, fail ${count("fail")}, skipped ${count("skipped")}\n`,
      );
      if (code !== 0) process.stdout.write(out.split("\n").filter((line) => /not ok|error:/.test(line)).join("\n") + "\n");
    }
    process.stdout.write(`${file}: ${passed} of ${runs} runs passed\n`);
    ok &&= passed === runs;
  }
  return ok;
}

function show(ms: number | undefined): string {
  return ms === undefined ? "-" : `${ms} ms`;
}

function groups(results: ScenarioResult[]): Map<string, ScenarioResult[]> {
  const byKey = new Map<string, ScenarioResult[]>();
  for (const r of results) {
    const key = `${r.scenario}\t${r.backend}`;
    byKey.set(key, [...(byKey.get(key) ?? []), r]);
  }
  return byKey;
}

function median(values: number[]): number | undefined {
  if (values.length === 0) return undefined;
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[mid]! : Math.round((sorted[mid - 1]! + sorted[mid]!) / 2);
}

function max(values: number[]): number | undefined {
  return values.length === 0 ? undefined : Math.max(...values);
}

function defined(values: Array<number | undefined>): number[] {
  return values.filter((v): v is number => v !== undefined);
}

function table(results: ScenarioResult[]): string {
  const header = ["scenario", "api", "passed", "recovery median", "recovery max", "leaderless max", "overlap max", "errors median"];
  const rows = [...groups(results)].map(([key, rs]) => {
    const [scenario, backend] = key.split("\t");
    const recovery = defined(rs.map((r) => r.figures.recoveryMs));
    return [
      scenario!,
      backend!,
      `${rs.filter((r) => r.ok).length}/${rs.length}`,
      show(median(recovery)),
      show(max(recovery)),
      show(max(defined(rs.map((r) => r.figures.longestLeaderlessMs)))),
      `${max(rs.map((r) => r.figures.longestOverlapMs))} ms`,
      String(median(rs.map((r) => r.figures.errors))),
    ];
  });
  return render([header, ...rows]) +
    "\nrecovery: for a fail-over, from the fault to the next election; otherwise from the heal to the first moment somebody led (0: the leader kept leading)";
}

function extrasTable(results: ScenarioResult[]): string {
  const lines = ["scenario figures (min / median / max over the runs):"];
  for (const [key, rs] of groups(results)) {
    const names = [...new Set(rs.flatMap((r) => Object.keys(r.figures.extra)))];
    if (names.length === 0) continue;
    const parts = names.map((name) => {
      const values = defined(rs.map((r) => r.figures.extra[name]));
      return `${name} ${values.length ? Math.min(...values) : "-"} / ${median(values)} / ${max(values)}`;
    });
    lines.push(`  ${key.replace("\t", " ")}: ${parts.join(", ")}`);
  }
  return lines.join("\n");
}

function render(rows: string[][]): string {
  const widths = rows[0]!.map((_, i) => Math.max(...rows.map((r) => r[i]!.length)));
  return rows.map((r) => r.map((cell, i) => cell.padEnd(widths[i]!)).join("  ").trimEnd()).join("\n");
}

void main().catch(async (err: unknown) => {
  process.stderr.write(`soak: ${err instanceof Error ? err.stack : String(err)}\n`);
  await cleanupEverything();
  await killAllClis();
  process.exit(1);
});
