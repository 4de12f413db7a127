// failover.svg: the graceful and crash failover distributions per subject,
// one dot per trial, a box from the 25th to the 75th percentile, a bar at
// the median, a tick at the 90th percentile and a line from min to max.
// Plain SVG, written by hand.
import { runDescription } from "./figures";
import type { BenchResults } from "./results";
import { quantile } from "./stats";
import { SUBJECTS } from "./subjects/info";

export interface ChartPanel {
  title: string;
  unit: string;
  /** Vertical reference lines (targets, TTL). */
  marks: Array<{ value: number; label: string }>;
  rows: Array<{ label: string; values: number[]; ours: boolean; note?: string }>;
}

const WIDTH = 1080;
const LEFT = 170;
/** Room on the right for each row's figures. */
const RIGHT = 250;
const ROW = 46;
const PANEL_TOP = 62;

function esc(text: string): string {
  return text.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;");
}

function niceMax(value: number): number {
  if (!(value > 0)) return 1;
  const power = 10 ** Math.floor(Math.log10(value));
  for (const step of [1, 1.5, 2, 2.5, 3, 4, 5, 6, 8, 10]) if (value <= step * power) return step * power;
  return 10 * power;
}

function ticks(max: number): number[] {
  const raw = max / 5;
  const power = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 2.5, 5, 10].map((s) => s * power).find((s) => s >= raw) ?? raw;
  const out: number[] = [];
  for (let v = 0; v <= max + 1e-9; v += step) out.push(Number(v.toFixed(6)));
  return out;
}

function fmt(value: number): string {
  if (value >= 100) return value.toFixed(0);
  if (value >= 10) return value.toFixed(1).replace(/\.0$/, "");
  return value.toFixed(2).replace(/0$/, "").replace(/\.0$/, "");
}

export function renderChart(title: string, panels: ChartPanel[]): string {
  const parts: string[] = [];
  let y = 40;
  const plotWidth = WIDTH - LEFT - RIGHT;
  for (const panel of panels) {
    const values = panel.rows.flatMap((r) => r.values).filter(Number.isFinite);
    const max = niceMax(Math.max(...values, ...panel.marks.map((m) => m.value), 0) * 1.05);
    const x = (v: number) => LEFT + (Math.min(Math.max(v, 0), max) / max) * plotWidth;
    const height = panel.rows.length * ROW;
    parts.push(`<text x="${LEFT}" y="${y + 22}" class="panel">${esc(panel.title)}</text>`);
    const top = y + PANEL_TOP;
    parts.push(`<rect x="${LEFT}" y="${top}" width="${plotWidth}" height="${height}" class="frame"/>`);
    for (const t of ticks(max)) {
      parts.push(`<line x1="${x(t).toFixed(1)}" y1="${top}" x2="${x(t).toFixed(1)}" y2="${top + height}" class="grid"/>`);
      parts.push(`<text x="${x(t).toFixed(1)}" y="${top + height + 16}" class="tick">${fmt(t)}</text>`);
    }
    parts.push(`<text x="${LEFT + plotWidth / 2}" y="${top + height + 34}" class="axis">${esc(panel.unit)}</text>`);
    const marks: Array<{ value: number; label: string }> = [];
    for (const mark of panel.marks) {
      const same = marks.find((m) => Math.abs(m.value - mark.value) < 1e-9);
      if (same) same.label = `${same.label} = ${mark.label}`;
      else marks.push({ ...mark });
    }
    marks.forEach((mark, i) => {
      const mx = x(mark.value).toFixed(1);
      parts.push(`<line x1="${mx}" y1="${top - 4}" x2="${mx}" y2="${top + height}" class="mark"/>`);
      parts.push(`<text x="${mx}" y="${top - 8 - (i % 2) * 11}" class="marklabel">${esc(mark.label)}</text>`);
    });
    panel.rows.forEach((row, i) => {
      const cy = top + i * ROW + ROW / 2;
      const cls = row.ours ? "ours" : "peer";
      parts.push(`<text x="${LEFT - 10}" y="${cy + 4}" class="rowlabel">${esc(row.label)}</text>`);
      const sorted = row.values.filter(Number.isFinite).sort((a, b) => a - b);
      if (sorted.length === 0) {
        parts.push(`<text x="${LEFT + 8}" y="${cy + 4}" class="none">${esc(row.note ?? "no data")}</text>`);
        return;
      }
      const [q25, median, q75, p90] = [0.25, 0.5, 0.75, 0.9].map((q) => quantile(sorted, q)) as [number, number, number, number];
      parts.push(`<line x1="${x(sorted[0]!).toFixed(1)}" y1="${cy}" x2="${x(sorted[sorted.length - 1]!).toFixed(1)}" y2="${cy}" class="whisker"/>`);
      parts.push(`<rect x="${x(q25).toFixed(1)}" y="${cy - 9}" width="${Math.max(1, x(q75) - x(q25)).toFixed(1)}" height="18" class="box ${cls}"/>`);
      parts.push(`<line x1="${x(median).toFixed(1)}" y1="${cy - 12}" x2="${x(median).toFixed(1)}" y2="${cy + 12}" class="median"/>`);
      parts.push(`<line x1="${x(p90).toFixed(1)}" y1="${cy - 7}" x2="${x(p90).toFixed(1)}" y2="${cy + 7}" class="p90"/>`);
      sorted.forEach((v, j) => {
        const jitter = ((j * 7919) % 13) - 6;
        parts.push(`<circle cx="${x(v).toFixed(1)}" cy="${(cy + jitter).toFixed(1)}" r="2.2" class="dot ${cls}"/>`);
      });
      const clipped = sorted.filter((v) => v > max).length;
      const summary = `n=${sorted.length}  median ${fmt(median)}  p90 ${fmt(p90)}  max ${fmt(sorted[sorted.length - 1]!)}${clipped ? `  (${clipped} off scale)` : ""}`;
      parts.push(`<text x="${LEFT + plotWidth + 12}" y="${cy + 4}" class="summary">${esc(summary)}</text>`);
    });
    y = top + height + 56;
  }
  const legend = "blue: this library · orange: peers · box: 25th–75th percentile · thick bar: median · short tick: 90th percentile · line: min–max · dots: trials";
  parts.push(`<text x="${LEFT}" y="${y}" class="legend">${esc(legend)}</text>`);
  const heightTotal = y + 20;
  return [
    `<?xml version="1.0" encoding="UTF-8"?>`,
    `<svg xmlns="http://www.w3.org/2000/svg" width="${WIDTH}" height="${heightTotal}" viewBox="0 0 ${WIDTH} ${heightTotal}" font-family="DejaVu Sans, Helvetica, Arial, sans-serif">`,
    `<style>`,
    `.title{font-size:17px;font-weight:bold;fill:#222}.panel{font-size:14px;font-weight:bold;fill:#333}`,
    `.frame{fill:#fafafa;stroke:#bbb}.grid{stroke:#e3e3e3}.tick{font-size:11px;fill:#555;text-anchor:middle}`,
    `.axis{font-size:12px;fill:#444;text-anchor:middle}.rowlabel{font-size:13px;fill:#222;text-anchor:end}`,
    `.whisker{stroke:#777;stroke-width:1.2}.box{stroke-width:1.2;fill-opacity:0.35}.box.ours{fill:#2b7bb9;stroke:#1b5a8a}`,
    `.box.peer{fill:#e08a2c;stroke:#a95f12}.median{stroke:#111;stroke-width:3}.p90{stroke:#111;stroke-width:1.5}`,
    `.dot{fill-opacity:0.75}.dot.ours{fill:#1b5a8a}.dot.peer{fill:#a95f12}.mark{stroke:#c0392b;stroke-dasharray:4 3}`,
    `.marklabel{font-size:10px;fill:#c0392b;text-anchor:middle}.summary{font-size:11px;fill:#444;text-anchor:start}`,
    `.legend{font-size:11px;fill:#555}.none{font-size:12px;fill:#a00}`,
    `</style>`,
    `<rect width="100%" height="100%" fill="#fff"/>`,
    `<text x="${LEFT}" y="26" class="title">${esc(title)}</text>`,
    ...parts,
    `</svg>`,
    "",
  ].join("\n");
}

/** bench/results/failover.svg: graceful and crash failover per subject. */
export function failoverChart(results: BenchResults): string {
  const ttl = results.meta.params.ttl;
  const rows = (list: Array<{ subject: string; failoverMs: number[] }>, scale: number) =>
    SUBJECTS.map((s) => {
      const r = list.find((x) => x.subject === s.id);
      return { label: s.label, ours: s.ours, values: (r?.failoverMs ?? []).map((v) => v / scale), note: r ? undefined : "not run" };
    });
  return renderChart(`Failover per subject (${runDescription(results)}, TTL ${ttl} s)`, [
    {
      title: "Graceful failover: stop() / resign() → next elected",
      unit: "milliseconds",
      marks: [{ value: 50, label: "target 50 ms" }],
      rows: rows(results.graceful, 1),
    },
    {
      title: "Crash failover: SIGKILL of the leader's process → next elected",
      unit: "seconds",
      marks: [
        { value: ttl, label: `TTL ${ttl} s` },
        { value: 0.75 * ttl + 0.5, label: "v2 median target" },
        { value: ttl + 1, label: "max target (v2 and v3)" },
      ],
      rows: rows(results.crash, 1000),
    },
  ]);
}
