// What a command tells the operator about its state: one line per change on
// stderr, with an ISO timestamp, readable by default, JSON lines with --json,
// nothing with --quiet. stdout stays the child's (run) or the command's
// answer (who, watch).

export type ReportFormat = "text" | "json" | "quiet";

export type ReportFields = Record<string, string | number | boolean | null | undefined>;

export class Reporter {
  constructor(
    private readonly format: ReportFormat,
    private readonly write: (line: string) => void = writeStderr,
  ) {}

  /** `event` names the change for JSON readers; `text` says it for people. */
  state(event: string, text: string, fields: ReportFields = {}): void {
    if (this.format === "quiet") return;
    const at = new Date().toISOString();
    this.write(this.format === "json" ? JSON.stringify({ at, event, ...fields }) : `${at} ${text}`);
  }
}

function writeStderr(line: string): void {
  try {
    process.stderr.write(`${line}\n`);
  } catch {
    // A closed stderr must not end the election.
  }
}
