// Where a run's results, chart and report go. A full run's: results/latest.json,
// results/failover.svg and bench/README.md (its report below the README's
// hand-written part). A partial run's (--quick, --only, --subjects):
// results/quick.json, quick.svg and quick.md, git-ignored, so that it never
// replaces a full run's figures with fewer.
//
//   node --import tsx bench/write-report.ts bench/results/latest.json
//
// writes the report of a results file again (bench/README.md for a full
// run's), without running anything: after the hand-written part or the
// rendering changed.
import { readFileSync, renameSync, writeFileSync } from "node:fs";
import { dirname, join, relative } from "node:path";
import { renderPartialReport, renderReadme } from "./markdown-report";
import { isFullRun, type BenchResults } from "./results";

export interface Outputs {
  results: string;
  chart: string;
  report: string;
}

export function outputsFor(results: BenchResults, benchDir = __dirname): Outputs {
  const dir = join(benchDir, "results");
  return isFullRun(results)
    ? { results: join(dir, "latest.json"), chart: join(dir, "failover.svg"), report: join(benchDir, "README.md") }
    : { results: join(dir, "quick.json"), chart: join(dir, "quick.svg"), report: join(dir, "quick.md") };
}

/** Writes the report of `results` where it belongs and returns that path. */
export function writeReport(results: BenchResults, benchDir = __dirname): string {
  const { chart, report } = outputsFor(results, benchDir);
  const chartLink = relative(dirname(report), chart).split("\\").join("/");
  writeAtomically(
    report,
    isFullRun(results) ? renderReadme(readFileSync(report, "utf8"), results, chartLink) : renderPartialReport(results, chartLink),
  );
  return report;
}

export function writeAtomically(path: string, text: string): void {
  writeFileSync(`${path}.tmp`, text);
  renameSync(`${path}.tmp`, path);
}

if (require.main === module) {
  const file = process.argv[2];
  if (!file || process.argv.length > 3) {
    process.stderr.write("usage: node --import tsx bench/write-report.ts <results.json>\n");
    process.exit(2);
  }
  const written = writeReport(JSON.parse(readFileSync(file, "utf8")) as BenchResults);
  process.stdout.write(`wrote ${relative(process.cwd(), written)}\n`);
}
