// What the commands run under `etcd-leader run` in the tests did: each is
// test/fixtures/cli-child.cjs, which appends its start, its SIGTERM and its
// exit to a log file shared by the members of one election, so that a test
// can check that no two members' commands ever ran at once.
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { livingProcesses } from "../fixtures/process-table.cjs";
import { FIXTURES } from "./paths";
import { waitFor } from "./waiting";

/** The command: `node CHILD logPath`. */
export const CHILD = join(FIXTURES, "cli-child.cjs");

/** One line of the command log. */
export interface ChildRecord {
  /** The command's own events, and "begin" and "end" from the hooks of test/cli/cli-hooks.test.ts. */
  event: "start" | "sigterm" | "exit" | "begin" | "end";
  name: string;
  token: number;
  pid: number;
  at: number;
  key?: string;
  /** A start's process group, with CHILD_GROUP. */
  pgid?: number;
  /** With CHILD_GROUP: the processes of earlier starts' groups that still ran when this one started (ps; no zombies). */
  earlierGroupsRunning?: string[];
}

/** A temporary file the commands of one test append to. */
export class CommandLog {
  private readonly dir = mkdtempSync(join(tmpdir(), "etcd-leader-cli-"));
  readonly path = join(this.dir, "commands.log");

  records(): ChildRecord[] {
    let text = "";
    try {
      text = readFileSync(this.path, "utf8");
    } catch {
      return [];
    }
    return text.split("\n").filter((line) => line !== "").map((line) => JSON.parse(line) as ChildRecord);
  }

  /** The first record `probe` picks from the log, waiting up to `ms` for it. */
  waitFor(what: string, ms: number, probe: (records: ChildRecord[]) => ChildRecord | undefined): Promise<ChildRecord> {
    return waitFor(`${what} in the command log`, ms, () => probe(this.records()), {
      detail: () => JSON.stringify(this.records(), null, 1),
    });
  }

  remove(): void {
    rmSync(this.dir, { recursive: true, force: true });
  }
}

/**
 * Whether process `pid` still runs. A zombie does not: an orphan's zombie
 * stays until PID 1 reaps it, which in many containers it never does.
 */
export function alive(pid: number): boolean {
  return livingProcesses().some((process) => process.pid === pid);
}

/**
 * Checks that no two members' commands ran at once: each command runs from its
 * `start` until its `sigterm` (the moment it was told to stop) or `exit`, and
 * no other member's command starts within that span (by more than
 * `allowedMs`). Returns the violations.
 */
export function overlaps(records: ChildRecord[], now = Date.now(), allowedMs = 0): string[] {
  const spans = new Map<number, { name: string; from: number; to: number }>();
  for (const record of records) {
    if (record.event === "start") spans.set(record.pid, { name: record.name, from: record.at, to: now });
    else {
      const span = spans.get(record.pid);
      if (span && span.to === now) span.to = record.at;
    }
  }
  const list = [...spans.values()].sort((a, b) => a.from - b.from);
  const problems: string[] = [];
  let latest: { name: string; from: number; to: number } | undefined;
  for (const span of list) {
    if (latest && latest.name !== span.name && latest.to - span.from > allowedMs) {
      problems.push(`${span.name}'s command started at ${span.from}, while ${latest.name}'s ran until ${latest.to}`);
    }
    if (!latest || span.to > latest.to) latest = span;
  }
  return problems;
}
