// The report of a run in markdown: what `npm run bench` writes below the
// hand-written part of bench/README.md (or, for a partial run, to
// bench/results/quick.md). The header lines as the terminal prints them,
// the medians side by side, the ratios, every target and the chart; every
// figure comes from figures.ts, as the terminal report's do.
import {
  changeFailover, changeListings, changeRequestsPerFollower, changeUnaware, coldStartOf, coldStartSettle, crashFailover, crashReaction,
  gracefulFailover, idleRate, largestN, learnDelays, machineLine, mean, natsIdleRun, otherLoadLine, partitionFigures, ratioTable,
  runDescription, safetyTotal, scaleRun, storeIdleNsOf, storeIdleShares, subjectsRun, targetCounts,
} from "./figures";
import { isFullRun, type BenchResults } from "./results";
import { summarize } from "./stats";
import { SUBJECTS } from "./subjects/info";
import type { SubjectInfo } from "./subjects/types";

/**
 * The line that ends bench/README.md's hand-written part: the run rewrites
 * everything after it and keeps everything up to it as it is.
 */
export const GENERATED_MARKER =
  "<!-- Everything below this line is written by `npm run bench` (bench/markdown-report.ts) from the run's results: edits below it are lost. -->";

/** The N at which the idle load and the requests of a change are shown side by side. */
const SIDE_BY_SIDE_N = 100;

/** One subject's figure in a row: the value, its max (or longest) and n where the row has them. */
interface Figure {
  value: string;
  /** In brackets after the value: "max 2.31", "longest 36 ms". */
  spread?: string;
  n?: number;
  /** What else the reader must know: failures, followers never told. */
  note?: string;
}

interface Row {
  label: string;
  figure(subject: SubjectInfo): Figure | undefined;
}

/** A typographic minus for negative figures; none for one that rounds to zero ("0.00", not "−0.00"). */
const fixed = (v: number, digits: number) => {
  const text = v.toFixed(digits);
  return Number(text) === 0 ? text.replace(/^-/, "") : text.replace(/^-/, "−");
};
const msText = (v: number, digits: number) => `${fixed(v, digits)} ms`;
/** Milliseconds below a second, seconds above. */
const duration = (v: number) => (Math.abs(v) < 1000 ? msText(v, 0) : `${fixed(v / 1000, 1)} s`);

/** The hand-written part of a README: everything up to and including the marker line. */
export function handWrittenPart(readme: string): string {
  const at = readme.indexOf(GENERATED_MARKER);
  if (at < 0) throw new Error(`no line ${GENERATED_MARKER} in the README: its hand-written part cannot be told from the report`);
  return readme.slice(0, at + GENERATED_MARKER.length) + "\n";
}

/** bench/README.md: its hand-written part, then the report of a full run; `chart` is the chart's path from the README. */
export function renderReadme(readme: string, results: BenchResults, chart: string): string {
  return `${handWrittenPart(readme)}\n${renderReport(results, chart)}`;
}

/** bench/results/quick.md: the report of a partial run, alone. */
export function renderPartialReport(results: BenchResults, chart: string): string {
  return [
    `# Benchmark: a partial run (${runDescription(results)})`,
    "",
    "The figures of fewer trials, scenarios or subjects than a full run's; bench/README.md keeps those of the last full run.",
    "",
    renderReport(results, chart),
  ].join("\n");
}

function renderReport(results: BenchResults, chart: string): string {
  const { pass, miss } = targetCounts(results);
  const day = results.meta.startedAt.slice(0, 10);
  const ratios = ratioTable(results);
  return [
    `## ${isFullRun(results) ? "The last full run" : "This run"}: ${day}`,
    "",
    "As the run printed it:",
    "",
    "```text",
    `etcd-leader benchmark (${runDescription(results)}), ${results.meta.startedAt}`,
    machineLine(results),
    otherLoadLine(results),
    "```",
    "",
    `### Side by side`,
    "",
    "Medians; n (trials, or follower-changes for the follower row) in brackets after the row's name, or after a figure",
    "where the subjects differ; — where the subject has no figure (not measured for it, or not in this run).",
    "",
    markdownTable(["", ...subjectsOf(results).map((s) => s.label)], sideBySide(results)),
    "",
    ...(ratios.rows.length
      ? [
          `### Ratio of this library to each peer`,
          "",
          "Ours ÷ peer: below 1 is better on every row; · different APIs, not compared; — no figure for one side.",
          "",
          markdownTable(ratios.headers, ratios.rows),
          "",
        ]
      : []),
    `### Targets`,
    "",
    ...results.targets.map((t) => `- ${t.pass ? "PASS" : "MISS"} ${escapeInline(t.text)}`),
    "",
    `${pass} PASS, ${miss} MISS.`,
    "",
    `### Failover, trial by trial`,
    "",
    `![Graceful and crash failover per subject: every trial, the quartiles, the median and the 90th percentile](${chart})`,
    "",
  ].join("\n");
}

/** The subjects this run measured, in the order of SUBJECTS: this library on v2, v3 and NATS KV, then the peers. */
function subjectsOf(results: BenchResults): SubjectInfo[] {
  const ran = subjectsRun(results);
  return SUBJECTS.filter((s) => ran.has(s.id));
}

function sideBySide(results: BenchResults): string[][] {
  const p = results.meta.params;
  const coldN = p.coldStart.n;
  const bigN = largestN(results);
  const changeWindowS = p.scale.changeWindowS;
  const failedNote = (list: Array<{ subject: string; failures: unknown[] }>, id: string) => {
    const failed = list.find((r) => r.subject === id)?.failures.length ?? 0;
    return failed ? `${failed} failed` : undefined;
  };
  const rows: Row[] = [
    {
      label: "failover after `stop()`",
      figure: (s) => {
        const f = gracefulFailover(results, s.id);
        return f.n ? { value: msText(f.median, 1), n: f.n, note: failedNote(results.graceful, s.id) } : undefined;
      },
    },
    {
      label: `failover after SIGKILL, TTL ${p.ttl} s`,
      figure: (s) => {
        const f = crashFailover(results, s.id);
        return f.n ? { value: `${fixed(f.median / 1000, 2)} s`, spread: `max ${fixed(f.max / 1000, 2)}`, n: f.n, note: failedNote(results.crash, s.id) } : undefined;
      },
    },
    {
      label: "... of which after etcd removed the key",
      figure: (s) => {
        const f = crashReaction(results, s.id);
        return f.n ? { value: msText(f.median, 1), spread: `max ${fixed(f.max, 1)}`, n: f.n } : undefined;
      },
    },
    {
      label: `idle requests per member per second, N = ${SIDE_BY_SIDE_N}, TTL ${p.scale.ttl} s`,
      figure: (s) => {
        if (s.api === "nats") {
          const r = natsIdleRun(results, s.id, SIDE_BY_SIDE_N);
          if (r?.followerSent === undefined || r.leaderSent === undefined) return undefined;
          return { value: `${fixed(r.followerSent, 3)} sent by a follower, ${fixed(r.leaderSent, 3)} by the leader (NATS messages)` };
        }
        if (s.api === "postgres" || s.api === "redis") {
          // The server counts for the whole election: a follower's share at the largest N measured, the lone leader's.
          const n = storeIdleNsOf(results, s.id).at(-1);
          const shares = n === undefined ? {} : storeIdleShares(results, s.id, n);
          if (n === undefined || shares.follower === undefined || shares.leader === undefined) return undefined;
          const unit = s.api === "redis" ? "Redis commands" : "PostgreSQL statements";
          return { value: `${fixed(shares.follower, 3)} by a follower at N = ${n}, ${fixed(shares.leader, 3)} by the leader (${unit})` };
        }
        const rate = idleRate(scaleRun(results, s.id, SIDE_BY_SIDE_N));
        return rate === undefined ? undefined : { value: fixed(rate, 3) };
      },
    },
    {
      label: `a change of leader, N = ${coldN}: stop → next elected`,
      figure: (s) => {
        const f = changeFailover(results, s.id);
        return f.n ? { value: msText(f.median, 1), spread: `max ${fixed(f.max, 1)}`, n: f.n } : undefined;
      },
    },
    {
      label: `requests per follower for a change of leader, N = ${SIDE_BY_SIDE_N}`,
      figure: (s) => {
        const run = scaleRun(results, s.id, SIDE_BY_SIDE_N);
        const perFollower = changeRequestsPerFollower(run);
        if (!perFollower.length) return undefined;
        const { unaware, of } = changeUnaware(run);
        return { value: fixed(mean(perFollower), 2), note: unaware ? `${unaware} of ${of} followers not told within ${changeWindowS} s` : undefined };
      },
    },
    {
      label: `listings after a change of leader, N = ${bigN ?? "—"}`,
      figure: (s) => {
        const listings = bigN === undefined ? undefined : changeListings(scaleRun(results, s.id, bigN));
        return listings === undefined ? undefined : { value: fixed(listings, 0) };
      },
    },
    {
      label: `follower learns the new leader, N = ${coldN}`,
      figure: (s) => {
        const d = learnDelays(coldStartOf(results, s.id));
        const f = summarize(d.fromStop);
        if (!f.n && !d.unaware) return undefined;
        const never = d.unaware ? `${d.unaware} never` : undefined;
        return f.n ? { value: msText(f.median, 0), spread: `max ${fixed(f.max, 0)}`, n: f.n + d.unaware, note: never } : { value: "none learned", n: d.unaware };
      },
    },
    {
      label: `cold start, N = ${coldN}, until every member follows`,
      figure: (s) => {
        if (!coldStartOf(results, s.id)) return undefined;
        const f = coldStartSettle(results, s.id);
        const failed = p.coldStart.trials - f.n;
        const note = failed > 0 ? `failed ${failed} of ${p.coldStart.trials}` : undefined;
        return f.n ? { value: msText(f.median, 0), n: f.n, note } : { value: note ?? "—" };
      },
    },
    {
      label: `heap per member, N = ${bigN ?? "—"} in one process`,
      figure: (s) => {
        const heap = bigN === undefined ? undefined : scaleRun(results, s.id, bigN)?.memory?.heapPerMemberKiB;
        return heap === undefined ? undefined : { value: `${fixed(heap, 1)} KiB` };
      },
    },
    {
      label: `sockets per member, N = ${bigN ?? "—"} in one process`,
      figure: (s) => {
        const sockets = bigN === undefined ? undefined : scaleRun(results, s.id, bigN)?.memory?.socketsPerMember;
        return sockets === undefined ? undefined : { value: fixed(sockets, 2) };
      },
    },
    {
      label: "leader cut off: steps down this long before a successor is elected",
      figure: (s) => {
        const f = partitionFigures(results, s.id);
        if (!f.trials) return undefined;
        const note = f.neverSteppedDown ? `${f.neverSteppedDown} never stepped down` : undefined;
        if (!f.margin.n) return { value: "—", n: f.trials, note };
        return { value: `${msText(f.margin.median, 0)}${f.margin.median < 0 ? " (two leaders)" : ""}`, n: f.trials, note };
      },
    },
    {
      label: "... and is a follower again after the heal, slowest",
      figure: (s) => {
        const f = partitionFigures(results, s.id);
        if (!f.trials) return undefined;
        const never = f.trials - f.rejoin.n;
        const note = never ? `${never} of ${f.trials} never` : undefined;
        return f.rejoin.n ? { value: duration(f.rejoin.max), n: f.trials, note } : { value: "never", n: f.trials };
      },
    },
    {
      label: "instants with two leaders, all scenarios",
      figure: (s) => {
        const t = safetyTotal(results, s.id);
        if (!t.trials) return undefined;
        return { value: String(t.instants), spread: t.instants ? `longest ${msText(t.longestMs, 0)}` : undefined, n: t.trials };
      },
    },
  ];
  const subjects = subjectsOf(results);
  // A full run shows every row, a gap included; a partial one only what it measured.
  const shown = isFullRun(results) ? rows : rows.filter((row) => subjects.some((s) => row.figure(s)));
  return shown.map((row) => {
    const figures = subjects.map((s) => row.figure(s));
    const ns = new Set(figures.flatMap((f) => (f?.n === undefined ? [] : [f.n])));
    const sameN = ns.size === 1 ? [...ns][0] : undefined;
    return [
      sameN === undefined ? row.label : `${row.label} (${sameN})`,
      ...figures.map((f) => (f ? figureText(f, sameN === undefined) : "—")),
    ];
  });
}

function figureText(f: Figure, withN: boolean): string {
  const bracket = [f.spread ?? "", withN && f.n !== undefined ? `n ${f.n}` : ""].filter(Boolean).join(", ");
  return `${f.value}${bracket ? ` (${bracket})` : ""}${f.note ? `; ${f.note}` : ""}`;
}

function markdownTable(headers: string[], rows: string[][]): string {
  const line = (cells: string[]) => `| ${cells.map((c) => c.replace(/\|/g, "\\|")).join(" | ")} |`;
  return [line(headers), line(headers.map(() => "---")), ...rows.map(line)].join("\n");
}

/** A target's text as markdown shows it: no emphasis, code or tags where it has none. */
function escapeInline(text: string): string {
  return text.replace(/[\\`*_[\]<>|]/g, (c) => `\\${c}`);
}
