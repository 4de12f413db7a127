// Plain-text tables for the terminal.

export type Cell = string | number | undefined;

/** Formats a number with `digits` decimals; NaN and undefined as "—". */
export function num(value: number | undefined, digits = 1): string {
  if (value === undefined || !Number.isFinite(value)) return "—";
  return value.toFixed(digits);
}

export function table(headers: string[], rows: Cell[][], indent = "  "): string {
  const text = rows.map((row) => row.map((cell) => (cell === undefined ? "—" : String(cell))));
  const widths = headers.map((h, i) => Math.max(h.length, ...text.map((r) => (r[i] ?? "").length)));
  const numeric = headers.map((_, i) => text.every((r) => /^[-+]?[\d.,×%<>≤ —·]*( ms)?$/.test(r[i] ?? "")));
  const line = (cells: string[]) =>
    indent +
    cells
      .map((c, i) => (i > 0 && numeric[i] ? c.padStart(widths[i]!) : c.padEnd(widths[i]!)))
      .join("  ")
      .trimEnd();
  return [line(headers), line(widths.map((w) => "-".repeat(w))), ...text.map(line)].join("\n");
}
