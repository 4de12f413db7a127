// Election members in processes of their own, so that tests can kill, freeze
// and thaw them like real services: each member is the `etcd-leader run`
// command (from the build: built-cli.ts), the one member program
// the project has. It runs with --json --verbose, and what it reports on
// stderr becomes the events the history checker (leadership-history.ts)
// reads:
//   elected {token, until}   → elected, then believed {until}
//   renewed {until}          → believed {until}
//   unelected, leader, left  → the same
//   error {error}            → error {message}
//   joining, command-*, hook-*, error-state → kept as they are
// Its command is test/fixtures/cli-child.cjs, which appends its start, its
// SIGTERM and its exit to a command log (CommandLog in cli-process.ts), so a
// test can also check that the commands never ran at once (or, with `work`,
// a shell around it as the command or as the --on-elected hook).
//
// Every member is tracked until it exits. `killAllMembers()` belongs in an
// `after` hook; a process "exit" hook SIGKILLs whatever is left if a test run
// ends without it (the orphan guard of each CLI then stops its command).
import { spawn, type ChildProcessWithoutNullStreams } from "node:child_process";
import { createInterface } from "node:readline";
import { builtCli } from "./built-cli";
import { CHILD, CommandLog } from "./cli-process";
import type { HistoryEvent, MemberHistory } from "./leadership-history";
import { REPO_ROOT } from "./paths";

export interface MemberConfig {
  backend: "v2" | "v3" | "nats";
  /** host:port pairs of etcd or nats-server (or of fault proxies in front of them). */
  hosts: string[];
  /** NATS only: the KV bucket the election key is in (it must exist, with the TTL as its max age). */
  bucket?: string;
  key: string;
  name: string;
  /** Seconds; on NATS the bucket's TTL rules and this is not passed. */
  ttl: number;
  /** etcd: the election's watchRearmInterval in ms (run --watch-rearm). */
  watchRearmMs?: number;
  /** The log the member's command appends to; default: one shared by this test process. */
  commandLog?: CommandLog;
  /** What it runs while it leads; default "command". */
  work?: LeaderWork;
}

/**
 * What a member runs while it leads, each appending to the command log:
 * - "command": test/fixtures/cli-child.cjs as the command;
 * - "shell-group": the command is a shell whose child (cli-child.cjs with
 *   CHILD_GROUP) ignores SIGTERM and has a child of its own that ignores it
 *   too, so that the shell dies of the stop signal and the rest of its group
 *   must be SIGKILLed;
 * - "hook-group": no command; the --on-elected hook is such a shell, and so
 *   hangs until it is stopped.
 */
export type LeaderWork = "command" | "shell-group" | "hook-group";

/** What a member reports: the history events plus the ones only tests care about. */
export type MemberEvent =
  | HistoryEvent
  | { type: "leader"; at: number; leader: string }
  | { type: "left"; at: number }
  | CommandEvent;

/** What the CLI says about its command, its hooks and its own steps. */
export interface CommandEvent {
  type:
    | "joining"
    | "command-start"
    | "command-stop"
    | "command-runs-on"
    | "command-exit"
    | "hook-start"
    | "hook-ok"
    | "hook-failed"
    | "error-state";
  at: number;
  [field: string]: unknown;
}

/** Lines of output kept for error messages. */
const RECENT_LINES = 40;
/** The command gets this long after SIGTERM (cli-child.cjs exits at once unless told to ignore it). */
export const MEMBER_GRACE_SECONDS = 1;
/** After the CLI exits, its command and guard must be gone (and its pipes closed) within this. */
const PIPES_HELD_MS = 10_000;

const running = new Set<MemberProcess>();
let sharedLog: CommandLog | undefined;

export class MemberProcess {
  readonly name: string;
  readonly pid: number;
  readonly commandLog: CommandLog;
  /** Every event so far, in arrival order; an `exit` event is appended when the process ends. */
  readonly events: MemberEvent[] = [];
  /** Output that is not a state report: stderr lines a member writes only when something is wrong, and stdout. */
  readonly unexpectedOutput: string[] = [];
  /** Resolves with the exit event once the process is gone and its output read. */
  readonly exited: Promise<Extract<MemberEvent, { type: "exit" }>>;
  private readonly child: ChildProcessWithoutNullStreams;
  private readonly recent: string[] = [];
  private readonly listeners = new Set<() => void>();
  private paused = false;

  constructor(readonly config: MemberConfig) {
    this.name = config.name;
    this.commandLog = config.commandLog ?? (sharedLog ??= new CommandLog());
    this.child = spawn(process.execPath, [builtCli(), ...cliArguments(config, this.commandLog.path)], {
      cwd: REPO_ROOT,
      stdio: ["pipe", "pipe", "pipe"],
    });
    if (this.child.pid === undefined) throw new Error(`could not start member ${this.name}`);
    this.pid = this.child.pid;
    this.child.stdin.end();
    running.add(this);

    createInterface({ input: this.child.stderr }).on("line", (line) => this.onStderr(line));
    createInterface({ input: this.child.stdout }).on("line", (line) => {
      this.remember(`stdout: ${line}`);
      this.unexpectedOutput.push(line);
    });

    let exitAt = Date.now();
    this.exited = new Promise((resolve) => {
      let settled = false;
      const settle = (code: number | null, signal: NodeJS.Signals | null) => {
        if (settled) return;
        settled = true;
        running.delete(this);
        const event = { type: "exit" as const, at: exitAt, code, signal };
        this.events.push(event);
        this.notify();
        resolve(event);
      };
      // "close" comes after the output is drained, so the exit event is always last.
      this.child.on("close", settle);
      this.child.on("exit", (code, signal) => {
        exitAt = Date.now();
        // Whatever still holds the CLI's stdout or stderr is a process it started: its command, or
        // its orphan guard, which both should be gone soon after it. Say so instead of waiting forever.
        setTimeout(() => {
          if (settled) return;
          this.unexpectedOutput.push(`stdout/stderr still held open ${PIPES_HELD_MS} ms after the CLI exited: a command or guard left running`);
          settle(code, signal);
        }, PIPES_HELD_MS).unref();
      });
    });
  }

  get running(): boolean {
    return this.child.exitCode === null && this.child.signalCode === null;
  }

  /** The record for checkHistories: the events that bear on leadership. */
  history(): MemberHistory {
    return { member: this.name, events: this.events.filter(isHistoryEvent) };
  }

  /** True if the member's latest word on leadership is that it leads. */
  isLeaderNow(): boolean {
    for (let i = this.events.length - 1; i >= 0; i--) {
      const type = this.events[i]!.type;
      if (type === "elected") return true;
      if (type === "unelected" || type === "crash" || type === "exit") return false;
    }
    return false;
  }

  /** The fencing token of the term the member last reported, if it leads. */
  currentToken(): number | undefined {
    if (!this.isLeaderNow()) return undefined;
    for (let i = this.events.length - 1; i >= 0; i--) {
      const event = this.events[i]!;
      if (event.type === "elected") return event.token;
    }
    return undefined;
  }

  /** Calls `listener` with every event from now on (the exit event last); returns the function that stops it. */
  onEvent(listener: (event: MemberEvent) => void): () => void {
    let seen = this.events.length;
    const deliver = (): void => {
      while (seen < this.events.length) listener(this.events[seen++]!);
    };
    this.listeners.add(deliver);
    return () => void this.listeners.delete(deliver);
  }

  /**
   * Resolves with the first matching event, looking at the events from index
   * `fromIndex` on (default 0: those already received count too, so there is
   * no race between causing an event and waiting for it). Rejects after
   * `timeoutMs`, once the process is gone without a match, or when `signal`
   * aborts; the error carries the member's recent output.
   */
  waitFor(
    predicate: (event: MemberEvent) => boolean,
    timeoutMs = 10_000,
    { fromIndex = 0, signal }: { fromIndex?: number; signal?: AbortSignal } = {},
  ): Promise<MemberEvent> {
    return new Promise((resolve, reject) => {
      let checked = fromIndex;
      const fail = (why: string): void =>
        finish(() => reject(new Error(`member ${this.name}: ${why}\n${this.recentOutput()}`)));
      const check = (): void => {
        for (; checked < this.events.length; checked++) {
          const event = this.events[checked]!;
          if (predicate(event)) return finish(() => resolve(event));
        }
        if (this.events.at(-1)?.type === "exit") fail("exited before the awaited event");
      };
      const onAbort = (): void => fail("wait aborted");
      const timer = setTimeout(() => fail(`no matching event within ${timeoutMs} ms`), timeoutMs);
      const finish = (settle: () => void): void => {
        clearTimeout(timer);
        signal?.removeEventListener("abort", onAbort);
        this.listeners.delete(check);
        settle();
      };
      if (signal?.aborted) return onAbort();
      signal?.addEventListener("abort", onAbort);
      this.listeners.add(check);
      check();
    });
  }

  /** Sends a signal; for the signals that end the process, resolves once it is gone. */
  async kill(signal: NodeJS.Signals = "SIGKILL"): Promise<void> {
    if (!this.running) return;
    if (signal === "SIGSTOP") return this.pause();
    if (signal === "SIGCONT") return this.resume();
    this.child.kill(signal);
    // A frozen process only acts on SIGTERM once thawed.
    if (this.paused) this.resume();
    await this.exited;
  }

  /** Freezes the CLI (SIGSTOP): it neither renews nor stops its command itself; its orphan guard still does at the deadline. */
  pause(): void {
    if (!this.running) return;
    this.child.kill("SIGSTOP");
    this.paused = true;
  }

  resume(): void {
    if (!this.running) return;
    this.child.kill("SIGCONT");
    this.paused = false;
  }

  /** SIGTERM, as a supervisor stops it: stop the command, leave, exit 0; SIGKILL if it has not exited within `graceMs`. */
  async stop(graceMs = 8_000): Promise<void> {
    if (!this.running) {
      await this.exited;
      return;
    }
    if (this.paused) this.resume();
    this.child.kill("SIGTERM");
    const timer = setTimeout(() => this.child.kill("SIGKILL"), graceMs);
    await this.exited;
    clearTimeout(timer);
  }

  /** The last lines the member wrote, stdout and stderr, for error messages. */
  recentOutput(): string {
    return this.recent.length === 0 ? "(no output)" : this.recent.map((line) => `  ${this.name}| ${line}`).join("\n");
  }

  /** @internal: used by the exit hook, which cannot wait. */
  killNow(): void {
    if (this.running) this.child.kill("SIGKILL");
  }

  private onStderr(line: string): void {
    this.remember(line);
    const events = toMemberEvents(line);
    if (!events) {
      if (line.trim()) this.unexpectedOutput.push(line);
      return;
    }
    this.events.push(...events);
    this.notify();
  }

  private remember(line: string): void {
    this.recent.push(line);
    if (this.recent.length > RECENT_LINES) this.recent.shift();
  }

  private notify(): void {
    for (const listener of [...this.listeners]) listener();
  }
}

function cliArguments(config: MemberConfig, logPath: string): string[] {
  const store =
    config.backend === "nats"
      ? ["--backend", "nats", "--server", config.hosts.join(","), "--bucket", config.bucket ?? missing("bucket")]
      : ["--api", config.backend, "--endpoints", config.hosts.join(","), "--ttl", String(config.ttl)];
  const rearm = config.watchRearmMs === undefined ? [] : ["--watch-rearm", String(config.watchRearmMs / 1000)];
  const child = [process.execPath, CHILD, logPath];
  const shellGroup = `CHILD_GROUP=1 ${child.map((word) => `'${word}'`).join(" ")} & wait`;
  const work = config.work ?? "command";
  return [
    "run", "--json", "--verbose", ...store, ...rearm,
    "--name", config.name, "--grace", String(MEMBER_GRACE_SECONDS),
    ...(work === "hook-group" ? ["--on-elected", shellGroup, config.key] : []),
    ...(work === "shell-group" ? [config.key, "--", "/bin/sh", "-c", shellGroup] : []),
    ...(work === "command" ? [config.key, "--", ...child] : []),
  ];
}

function missing(what: string): never {
  throw new Error(`a NATS member needs its ${what}`);
}

/** The events a line of `run --json --verbose` stands for; undefined for a line that is not a state report. */
export function toMemberEvents(line: string): MemberEvent[] | undefined {
  let report: Record<string, unknown>;
  try {
    report = JSON.parse(line) as Record<string, unknown>;
  } catch {
    return undefined;
  }
  if (typeof report !== "object" || report === null || typeof report.event !== "string" || typeof report.at !== "string") return undefined;
  const { event, at: stamp, ...fields } = report;
  const at = Date.parse(stamp as string);
  const until = typeof fields.until === "string" ? Date.parse(fields.until) : undefined;
  switch (event) {
    case "elected":
      return [{ type: "elected", at, token: Number(fields.token) }, ...(until === undefined ? [] : [{ type: "believed" as const, at, until }])];
    case "renewed":
      return until === undefined ? [] : [{ type: "believed", at, until }];
    case "unelected":
      return [{ type: "unelected", at }];
    case "leader":
      return [{ type: "leader", at, leader: String(fields.leader) }];
    case "left":
      return [{ type: "left", at }];
    case "error":
      return [{ type: "error", at, message: String(fields.error) }];
    default:
      return [{ ...fields, type: event as CommandEvent["type"], at }];
  }
}

export function spawnMember(config: MemberConfig): MemberProcess {
  return new MemberProcess(config);
}

/** `n` members named `${namePrefix}0`, `${namePrefix}1`, … (prefix default "m"), all on the same election. */
export function spawnMembers(
  n: number,
  baseConfig: Omit<MemberConfig, "name"> & { namePrefix?: string },
): MemberProcess[] {
  const { namePrefix = "m", ...config } = baseConfig;
  return Array.from({ length: n }, (_, i) => spawnMember({ ...config, name: `${namePrefix}${i}` }));
}

/**
 * Resolves with the first member and event matching `predicate` across
 * `members` (events already received count). Rejects after `timeoutMs` with
 * every member's recent output.
 */
export async function waitForAny(
  members: MemberProcess[],
  predicate: (event: MemberEvent, member: MemberProcess) => boolean,
  timeoutMs = 10_000,
): Promise<{ member: MemberProcess; event: MemberEvent }> {
  const controller = new AbortController();
  const tries = members.map((member) =>
    member
      .waitFor((event) => predicate(event, member), timeoutMs, { signal: controller.signal })
      .then((event) => ({ member, event })),
  );
  try {
    return await Promise.any(tries);
  } catch {
    const output = members.map((m) => m.recentOutput()).join("\n");
    throw new Error(`no member reported the awaited event within ${timeoutMs} ms\n${output}`);
  } finally {
    // Settle the other waits now rather than leave their timers running until the timeout.
    controller.abort();
  }
}

/** SIGKILLs every member still running and waits until they are gone. For `after` hooks. */
export async function killAllMembers(): Promise<void> {
  await Promise.all([...running].map((member) => member.kill("SIGKILL")));
}

/** Members still running, for tests that want to check they cleaned up. */
export function runningMembers(): MemberProcess[] {
  return [...running];
}

process.on("exit", () => {
  for (const member of running) member.killNow();
  sharedLog?.remove();
});

const HISTORY_TYPES = new Set<string>(["elected", "unelected", "believed", "error", "crash", "exit"] satisfies HistoryEvent["type"][]);

function isHistoryEvent(event: MemberEvent): event is HistoryEvent {
  return HISTORY_TYPES.has(event.type);
}
