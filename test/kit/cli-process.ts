// The `etcd-leader` command as a real process, for the CLI tests: started from
// the build (built-cli.ts), its state changes read as JSON lines from stderr (pass
// --json), its stdout kept, and every process started here SIGKILLed by
// `killAllClis()` in an after hook. Also the shared command log that the
// commands run under `run` (test/fixtures/cli-child.cjs) append to.
import { spawn, type ChildProcessWithoutNullStreams } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { after, afterEach, before } from "node:test";
import { connect } from "@nats-io/transport-node";
import { Kvm } from "@nats-io/kv";
import { livingProcesses } from "../fixtures/process-table.cjs";
import { builtCli } from "./built-cli";
import { startEtcd, type EtcdCluster } from "./etcd-server";
import { startNats, type NatsServer } from "./nats-server";
import { REPO_ROOT } from "./paths";
import { exitOrFail, sleep } from "./waiting";

export const CHILD = join(REPO_ROOT, "test", "fixtures", "cli-child.cjs");

/** A state change the CLI reported (run --json): `event` as in src/cli/commands/run.ts, `at` as Date.now(). */
export interface CliEvent {
  event: string;
  atMs: number;
  [field: string]: unknown;
}

const running = new Set<CliProcess>();

export class CliProcess {
  readonly events: CliEvent[] = [];
  readonly stdout: string[] = [];
  readonly stderr: string[] = [];
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  private readonly child: ChildProcessWithoutNullStreams;
  private readonly listeners = new Set<() => void>();

  /** `ownGroup`: start the CLI as the leader of a process group of its own, as a supervisor or a shell would. */
  constructor(readonly args: string[], env: NodeJS.ProcessEnv = {}, ownGroup = false) {
    this.child = spawn(process.execPath, [builtCli(), ...args], {
      cwd: REPO_ROOT,
      env: { ...process.env, ...env },
      detached: ownGroup,
    }) as ChildProcessWithoutNullStreams;
    this.child.stdin.end();
    running.add(this);
    createInterface({ input: this.child.stdout }).on("line", (line) => {
      this.stdout.push(line);
      this.notify();
    });
    createInterface({ input: this.child.stderr }).on("line", (line) => {
      this.stderr.push(line);
      try {
        const parsed = JSON.parse(line) as { at?: string; event?: string };
        if (typeof parsed.event === "string" && typeof parsed.at === "string") {
          this.events.push({ ...parsed, event: parsed.event, atMs: Date.parse(parsed.at) });
        }
      } catch {
        // a readable line or an error message
      }
      this.notify();
    });
    this.exited = new Promise((resolve) => {
      this.child.on("close", (code, signal) => {
        running.delete(this);
        resolve({ code, signal });
        this.notify();
      });
    });
  }

  get pid(): number {
    return this.child.pid!;
  }

  get running(): boolean {
    return this.child.exitCode === null && this.child.signalCode === null;
  }

  kill(signal: NodeJS.Signals): void {
    if (this.running) this.child.kill(signal);
  }

  /**
   * As a terminal that closes (an ssh session dropped): the CLI's stdout and
   * stderr are closed under it, then it gets SIGHUP. Nothing it writes after
   * that is read.
   */
  hangUp(): void {
    this.child.stdout.destroy();
    this.child.stderr.destroy();
    this.kill("SIGHUP");
  }

  /** Signals the CLI's whole process group (started with `ownGroup`). */
  killGroup(signal: NodeJS.Signals): void {
    try {
      process.kill(-this.pid, signal);
    } catch {
      // gone already
    }
  }

  /** The first event named `event` (from index `from`), waiting up to `timeoutMs`. */
  waitForEvent(event: string, timeoutMs: number, from = 0): Promise<CliEvent> {
    return this.waitUntil(`event ${event}`, timeoutMs, () => this.events.slice(from).find((e) => e.event === event));
  }

  waitUntil<T>(what: string, timeoutMs: number, probe: () => T | undefined): Promise<T> {
    return new Promise((resolve, reject) => {
      const check = () => {
        const value = probe();
        if (value !== undefined && value !== false) finish(() => resolve(value));
        else if (!this.running && this.child.stdout.readableEnded && this.child.stderr.readableEnded) {
          finish(() => reject(new Error(`cli exited before ${what}\n${this.output()}`)));
        }
      };
      const timer = setTimeout(() => finish(() => reject(new Error(`no ${what} within ${timeoutMs} ms\n${this.output()}`))), timeoutMs);
      const finish = (settle: () => void) => {
        clearTimeout(timer);
        this.listeners.delete(check);
        settle();
      };
      this.listeners.add(check);
      check();
    });
  }

  output(): string {
    return [...this.stderr.slice(-30).map((l) => `  stderr| ${l}`), ...this.stdout.slice(-10).map((l) => `  stdout| ${l}`)].join("\n");
  }

  private notify(): void {
    for (const listener of [...this.listeners]) listener();
  }
}

export function startCli(args: string[], env: NodeJS.ProcessEnv = {}, ownGroup = false): CliProcess {
  return new CliProcess(args, env, ownGroup);
}

/** Runs the CLI to its end; `timeoutMs` bounds it (then SIGKILL and reject). */
export async function runCli(args: string[], timeoutMs = 30_000, env: NodeJS.ProcessEnv = {}): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const cli = startCli(args, env);
  const timer = setTimeout(() => cli.kill("SIGKILL"), timeoutMs);
  const { code } = await cli.exited;
  clearTimeout(timer);
  return { code, stdout: cli.stdout.join("\n"), stderr: cli.stderr.join("\n") };
}

export async function killAllClis(): Promise<void> {
  await Promise.all([...running].map((cli) => (cli.kill("SIGKILL"), cli.exited)));
}

/** One line of the shared command log (test/fixtures/cli-child.cjs). */
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

  async waitFor(what: string, timeoutMs: number, probe: (records: ChildRecord[]) => ChildRecord | undefined): Promise<ChildRecord> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const found = probe(this.records());
      if (found) return found;
      if (Date.now() > deadline) throw new Error(`no ${what} in the command log within ${timeoutMs} ms:\n${JSON.stringify(this.records(), null, 1)}`);
      await sleep(10);
    }
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

/** The stores a CLI test can point the command at: etcd through either API, or a NATS KV bucket. */
export type CliStore = "v2" | "v3" | "nats";

/** The KV bucket `useCliTestEnvironment({ nats: true })` makes, and its TTL (max_age). */
export const NATS_BUCKET = "cli_elections";
export const NATS_BUCKET_TTL_SECONDS = 2;

/**
 * The hooks every CLI test file needs: one etcd for the file (and, with
 * `nats`, one nats-server with the bucket NATS_BUCKET), every CLI SIGKILLed
 * after each test, the command logs removed at the end, and the test process
 * made to exit. `onEnd` runs before the servers stop.
 */
export function useCliTestEnvironment(
  onEnd: () => void | Promise<void> = () => undefined,
  { nats: withNats = false }: { nats?: boolean } = {},
): {
  etcd: () => EtcdCluster;
  /** The etcd's client URL, for --endpoints. */
  endpoint: () => string;
  nats: () => NatsServer;
  /** The flags that point the command at `store`. */
  storeArgs: (store: CliStore) => string[];
  newLog: () => CommandLog;
} {
  let etcd: EtcdCluster | undefined;
  let nats: NatsServer | undefined;
  const logs: CommandLog[] = [];
  before(async () => {
    etcd = await startEtcd();
    if (withNats) {
      nats = await startNats();
      const nc = await connect({ servers: nats.url });
      await new Kvm(nc).create(NATS_BUCKET, { ttl: NATS_BUCKET_TTL_SECONDS * 1000, history: 1 });
      await nc.close();
    }
  });
  afterEach(async () => {
    await killAllClis();
  });
  after(async () => {
    await killAllClis();
    await onEnd();
    await etcd?.close();
    await nats?.close();
    for (const log of logs) log.remove();
    exitOrFail();
  });
  return {
    etcd: () => etcd!,
    endpoint: () => etcd!.clientUrls[0]!,
    nats: () => nats!,
    storeArgs: (store) =>
      store === "nats" ? ["--backend", "nats", "--server", nats!.url, "--bucket", NATS_BUCKET] : ["--api", store, "--endpoints", etcd!.clientUrls[0]!],
    newLog: () => {
      const log = new CommandLog();
      logs.push(log);
      return log;
    },
  };
}
