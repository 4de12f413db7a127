import { test } from "node:test";
import assert from "node:assert/strict";
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { GENERATED_MARKER, renderReadme } from "../../bench/markdown-report";
import type { BenchResults } from "../../bench/results";
import { writeReport } from "../../bench/write-report";
import { REPO_ROOT } from "../kit/paths";

// The markdown report of bench/results/latest.json (a real full run), checked
// against figures worked out here from the JSON itself, not through the
// benchmark's own functions.

const BENCH = join(REPO_ROOT, "bench");
const results = JSON.parse(readFileSync(join(BENCH, "results", "latest.json"), "utf8")) as BenchResults;
const committedReadme = readFileSync(join(BENCH, "README.md"), "utf8");
const readme = renderReadme(committedReadme, results, "results/failover.svg");

const SUBJECTS = ["ours-v2", "ours-v3", "ours-nats", "ours-postgres", "ours-redis", "original", "etcd3-election", "advisory-lock", "redlock", "redis-leader"] as const;
const COLUMNS = [
  "etcd-leader v2", "etcd-leader v3", "etcd-leader NATS KV", "etcd-leader PostgreSQL", "etcd-leader Redis",
  "etcd-leader 0.0.1", "etcd3 Election", "advisory-lock", "redlock", "redis-leader",
];
/** The PostgreSQL and Redis subjects, whose idle load the server counts for the whole election. */
const STORE_IDLE: Record<string, string> = {
  "ours-postgres": "PostgreSQL statements", "advisory-lock": "PostgreSQL statements",
  "ours-redis": "Redis commands", redlock: "Redis commands", "redis-leader": "Redis commands",
};

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}
const sum = (values: number[]) => values.reduce((a, b) => a + b, 0);
const avg = (values: number[]) => sum(values) / values.length;
const signed = (text: string) => text.replace(/^-/, "−");
const of = <T extends { subject: string }>(list: T[], id: string) => list.find((r) => r.subject === id);
const scale = (id: string, n: number) => results.scale.runs.find((r) => r.subject === id && r.n === n);
/** What the server counted per second for the election of `id` at `n` members. */
const storeIdle = (id: string, n: number) => results.storeIdle?.find((r) => r.subject === id && r.n === n)?.requestsPerS;

/**
 * Two texts are the same; if not, the first line that differs. (assert.equal's
 * own diff of two long texts can take minutes.)
 */
function sameText(actual: string, expected: string, what: string): void {
  if (actual === expected) return;
  const a = actual.split("\n");
  const e = expected.split("\n");
  const i = a.findIndex((line, j) => line !== e[j]);
  const at = i < 0 ? a.length : i;
  assert.fail(`${what}: line ${at + 1} is ${JSON.stringify(a[at])}, expected ${JSON.stringify(e[at])}`);
}

/** The rows of the markdown table that follows `heading`, as cells. */
function tableAfter(text: string, heading: string): string[][] {
  const lines = text.split("\n");
  const start = lines.indexOf(heading);
  assert.ok(start >= 0, `no heading ${heading}`);
  const rows: string[][] = [];
  for (const line of lines.slice(start + 1)) {
    if (line.startsWith("#")) break;
    if (line.startsWith("| ")) rows.push(line.slice(2, -2).split(" | "));
  }
  return rows;
}

/** What each subject's cell must say, or undefined where it has no figure ("—"); n: the trials behind it. */
type Expect = { parts: string[]; n?: number } | undefined;

const expectedRows: Array<{ label: string; cell: (id: string) => Expect }> = [
  {
    label: "failover after `stop()`",
    cell: (id) => {
      const v = of(results.graceful, id)?.failoverMs ?? [];
      return v.length ? { parts: [`${median(v).toFixed(1)} ms`], n: v.length } : undefined;
    },
  },
  {
    label: `failover after SIGKILL, TTL ${results.meta.params.ttl} s`,
    cell: (id) => {
      const v = (of(results.crash, id)?.failoverMs ?? []).map((x) => x / 1000);
      return v.length ? { parts: [`${median(v).toFixed(2)} s`, `max ${Math.max(...v).toFixed(2)}`], n: v.length } : undefined;
    },
  },
  {
    label: "... of which after etcd removed the key",
    cell: (id) => {
      const v = of(results.crash, id)?.reactionMs ?? [];
      return v.length ? { parts: [`${median(v).toFixed(1)} ms`, `max ${Math.max(...v).toFixed(1)}`], n: v.length } : undefined;
    },
  },
  {
    label: "idle requests per member per second, N = 100",
    cell: (id) => {
      if (id === "ours-nats") {
        const r = results.natsIdle.find((x) => x.subject === id && x.n === 100)!;
        return { parts: [`${r.followerSent!.toFixed(3)} sent by a follower`, `${r.leaderSent!.toFixed(3)} by the leader`] };
      }
      if (STORE_IDLE[id]) {
        // A follower's share at the largest N measured: what N members sent beyond the lone leader, over N - 1.
        const n = Math.max(...results.storeIdle!.filter((r) => r.subject === id).map((r) => r.n));
        const leader = storeIdle(id, 1)!;
        const follower = (storeIdle(id, n)! - leader) / (n - 1);
        return { parts: [`${follower.toFixed(3)} by a follower at N = ${n}`, `${leader.toFixed(3)} by the leader (${STORE_IDLE[id]})`] };
      }
      const idle = scale(id, 100)!.idle!;
      return { parts: [(idle.requests / idle.n / idle.seconds).toFixed(3)] };
    },
  },
  {
    label: `a change of leader, N = ${results.meta.params.coldStart.n}: stop → next elected`,
    cell: (id) => {
      if (!of(results.coldStart, id)) return undefined;
      const v = (of(results.coldStart, id)?.changes ?? []).map((c) => c.failoverMs);
      return { parts: [`${median(v).toFixed(1)} ms`, `max ${Math.max(...v).toFixed(1)}`], n: v.length };
    },
  },
  {
    label: "requests per follower for a change of leader, N = 100",
    cell: (id) => {
      const run = scale(id, 100);
      if (!run) return undefined;
      const unaware = sum(run.changes.map((c) => c.unaware));
      const parts = [avg(run.changes.map((c) => c.excessRequests / (run.n - 1))).toFixed(2)];
      if (unaware) parts.push(`${unaware} of ${run.changes.length * (run.n - 1)} followers not told`);
      return { parts };
    },
  },
  {
    label: "listings after a change of leader, N = 1000",
    cell: (id) => {
      const run = scale(id, 1000);
      return run ? { parts: [avg(run.changes.map((c) => c.load.listings)).toFixed(0)] } : undefined;
    },
  },
  {
    label: `follower learns the new leader, N = ${results.meta.params.coldStart.n}`,
    cell: (id) => {
      const changes = of(results.coldStart, id)?.changes;
      if (!changes) return undefined;
      const v = changes.flatMap((c) => c.learnFromStopMs);
      const never = sum(changes.map((c) => c.unaware));
      const parts = [`${median(v).toFixed(0)} ms`, `max ${Math.max(...v).toFixed(0)}`];
      if (never) parts.push(`${never} never`);
      return { parts, n: v.length + never };
    },
  },
  {
    label: `cold start, N = ${results.meta.params.coldStart.n}, until every member follows`,
    cell: (id) => {
      const v = of(results.coldStart, id)?.settleMs;
      if (!v) return undefined;
      const trials = results.meta.params.coldStart.trials;
      if (!v.length) return { parts: [`failed ${trials} of ${trials}`] };
      return { parts: [`${median(v).toFixed(0)} ms`], n: v.length };
    },
  },
  {
    label: "heap per member, N = 1000 in one process",
    cell: (id) => {
      const heap = scale(id, 1000)?.memory?.heapPerMemberKiB;
      return heap === undefined ? undefined : { parts: [`${heap.toFixed(1)} KiB`] };
    },
  },
  {
    label: "sockets per member, N = 1000 in one process",
    cell: (id) => {
      const sockets = scale(id, 1000)?.memory?.socketsPerMember;
      return sockets === undefined ? undefined : { parts: [sockets.toFixed(2)] };
    },
  },
  {
    label: "leader cut off: steps down this long before a successor is elected",
    cell: (id) => {
      const trials = of(results.partition, id)?.trials;
      if (!trials) return undefined;
      const margins = trials.flatMap((t) => (t.marginMs === undefined ? [] : [t.marginMs]));
      const margin = median(margins);
      const parts = [margins.length ? `${signed(margin.toFixed(0))} ms${margin < 0 ? " (two leaders)" : ""}` : "—"];
      const never = trials.filter((t) => t.stepDownMs === undefined).length;
      if (never) parts.push(`${never} never stepped down`);
      return { parts, n: trials.length };
    },
  },
  {
    label: "... and is a follower again after the heal, slowest",
    cell: (id) => {
      const trials = of(results.partition, id)?.trials;
      if (!trials) return undefined;
      const rejoins = trials.flatMap((t) => (t.rejoinMs === undefined ? [] : [t.rejoinMs]));
      if (!rejoins.length) return { parts: ["never"], n: trials.length };
      const slowest = Math.max(...rejoins);
      const parts = [slowest < 1000 ? `${slowest.toFixed(0)} ms` : `${(slowest / 1000).toFixed(1)} s`];
      if (rejoins.length < trials.length) parts.push(`${trials.length - rejoins.length} of ${trials.length} never`);
      return { parts, n: trials.length };
    },
  },
  {
    label: "instants with two leaders, all scenarios",
    cell: (id) => {
      const all = [results.graceful, results.crash, results.coldStart, results.scale.runs, results.natsIdle, results.storeIdle ?? [], results.overload ?? [], results.partition]
        .flatMap((list: Array<{ subject: string; safety: { trials: number; instants: number } }>) => list.filter((r) => r.subject === id));
      return { parts: [`${sum(all.map((r) => r.safety.instants))}`], n: sum(all.map((r) => r.safety.trials)) };
    },
  },
];

test("the side-by-side table has every row, with the run's medians, maxima and n for each subject", () => {
  const rows = tableAfter(readme, "### Side by side");
  assert.deepEqual(rows[0], ["", ...COLUMNS]);
  const body = rows.slice(2);
  assert.equal(body.length, expectedRows.length, "one row per figure");
  expectedRows.forEach((expected, i) => {
    const [label, ...cells] = body[i]!;
    assert.ok(label!.startsWith(expected.label), `row ${i}: ${label} is not ${expected.label}`);
    SUBJECTS.forEach((id, column) => {
      const want = expected.cell(id);
      const cell = cells[column]!;
      if (!want) return assert.equal(cell, "—", `${label}, ${id}`);
      // The report writes a typographic minus, and no sign on a figure that rounds to zero.
      const plain = (text: string) => text.replace(/−/g, "-").replace(/-(0(?:\.0+)?)(?![\d.])/g, "$1");
      for (const part of want.parts) assert.ok(plain(cell).includes(plain(part)), `${label}, ${id}: ${JSON.stringify(cell)} lacks ${JSON.stringify(part)}`);
      if (want.n !== undefined) {
        assert.ok(label!.endsWith(`(${want.n})`) || cell.includes(`n ${want.n}`), `${label}, ${id}: n ${want.n} neither in the row's name nor in ${cell}`);
      }
    });
  });
});

test("the ratio table divides this library's medians by each peer's", () => {
  const rows = tableAfter(readme, "### Ratio of this library to each peer");
  assert.deepEqual(rows[0], [
    "metric", "v2 ÷ etcd-leader 0.0.1", "v2 ÷ etcd3 Election", "v3 ÷ etcd-leader 0.0.1", "v3 ÷ etcd3 Election",
    "PostgreSQL ÷ advisory-lock", "Redis ÷ redlock", "Redis ÷ redis-leader",
  ]);
  const graceful = rows.find((r) => r[0] === "graceful failover, median");
  const medianOf = (id: string) => median(of(results.graceful, id)!.failoverMs);
  assert.deepEqual(graceful, [
    "graceful failover, median",
    ...[
      ["ours-v2", "original"], ["ours-v2", "etcd3-election"], ["ours-v3", "original"], ["ours-v3", "etcd3-election"],
      ["ours-postgres", "advisory-lock"], ["ours-redis", "redlock"], ["ours-redis", "redis-leader"],
    ].map(
      ([ours, peer]) => `${(medianOf(ours!) / medianOf(peer!)).toFixed(2)}×`,
    ),
  ]);
  const idle = rows.find((r) => r[0] === "idle requests per member, N=100");
  assert.deepEqual(idle?.slice(2, 4), ["·", "·"], "v2 and v3 are not compared on idle load");
});

test("every target is a PASS or MISS line with its figures, in order, then the count of each", () => {
  const unescape = (s: string) => s.replace(/\\([\\`*_[\]<>|])/g, "$1");
  const lines = readme.split("\n").filter((l) => /^- (PASS|MISS) /.test(l));
  assert.equal(lines.length, results.targets.length, "one line per target");
  results.targets.forEach((target, i) => {
    assert.equal(lines[i]!.slice(0, 7), target.pass ? "- PASS " : "- MISS ", `target ${i + 1}: ${target.text}`);
    assert.equal(unescape(lines[i]!.slice(7)), target.text, `target ${i + 1}`);
  });
  const misses = results.targets.filter((t) => !t.pass).length;
  assert.ok(readme.includes(`\n${results.targets.length - misses} PASS, ${misses} MISS.\n`));
  assert.ok(readme.includes("](results/failover.svg)"), "the chart");
});

test("the header lines are the run's, as the terminal prints them", () => {
  const m = results.meta.machine;
  assert.ok(readme.includes(`\netcd-leader benchmark (full run), ${results.meta.startedAt}\n`));
  assert.ok(readme.includes(`\nmachine: ${m.nproc} × ${m.cpu}, ${m.memoryGiB} GiB, ${m.os}; Node ${m.node}; etcd ${m.etcd}`));
  const load = Object.entries(results.meta.otherLoad).map(([k, v]) => `${k} ${v}%`).join(", ");
  assert.ok(readme.includes(`\nCPU taken by other processes on this machine (% of its ${m.nproc} CPUs): ${load}\n`));
  assert.ok(readme.includes(`## The last full run: ${results.meta.startedAt.slice(0, 10)}`));
});

test("the hand-written part is kept as it is and the old report is replaced", () => {
  const handWritten = committedReadme.slice(0, committedReadme.indexOf(GENERATED_MARKER) + GENERATED_MARKER.length);
  assert.ok(handWritten.includes("## How to read the rows"));
  assert.ok(readme.startsWith(handWritten + "\n"));
  const edited = `# Benchmarks\n\nA sentence written by hand.\n\n${GENERATED_MARKER}\n\nA stale report.\n`;
  const rendered = renderReadme(edited, results, "results/failover.svg");
  assert.ok(rendered.startsWith(`# Benchmarks\n\nA sentence written by hand.\n\n${GENERATED_MARKER}\n`));
  assert.ok(!rendered.includes("A stale report."));
  assert.throws(() => renderReadme("# Benchmarks\n\nNo marker.\n", results, "x.svg"), /no line/);
});

test("bench/README.md is the report of bench/results/latest.json", () => {
  sameText(committedReadme, readme, "bench/README.md against the rendering of latest.json (node --import tsx bench/write-report.ts bench/results/latest.json)");
});

function benchCopy(): string {
  const dir = mkdtempSync(join(tmpdir(), "bench-report-"));
  mkdirSync(join(dir, "results"));
  cpSync(join(BENCH, "README.md"), join(dir, "README.md"));
  return dir;
}

test("writing the report twice gives the same text", (t) => {
  const dir = benchCopy();
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  assert.equal(writeReport(results, dir), join(dir, "README.md"));
  const first = readFileSync(join(dir, "README.md"), "utf8");
  writeReport(JSON.parse(JSON.stringify(results)) as BenchResults, dir);
  sameText(readFileSync(join(dir, "README.md"), "utf8"), first, "the second writing");
  sameText(first, readme, "the written README");
});

test("a --quick or --only run writes results/quick.md and leaves the README alone", (t) => {
  const dir = benchCopy();
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  writeFileSync(join(dir, "README.md"), committedReadme.replace("# Benchmarks", "# Benchmarks, untouched"));
  const before = readFileSync(join(dir, "README.md"), "utf8");
  const partials: BenchResults[] = [
    { ...results, meta: { ...results.meta, quick: true } },
    { ...results, meta: { ...results.meta, scenarios: ["graceful"] } },
  ];
  for (const partial of partials) {
    assert.equal(writeReport(partial, dir), join(dir, "results", "quick.md"));
    sameText(readFileSync(join(dir, "README.md"), "utf8"), before, "the README after a partial run");
    const quick = readFileSync(join(dir, "results", "quick.md"), "utf8");
    assert.match(quick, /^# Benchmark: a partial run \((--quick|--only=graceful)\)/);
    assert.ok(quick.includes("](quick.svg)"), "its own chart");
    assert.ok(!quick.includes(GENERATED_MARKER), "no hand-written part");
    rmSync(join(dir, "results", "quick.md"));
  }
  assert.ok(!existsSync(join(dir, "results", "quick.md")));
});
