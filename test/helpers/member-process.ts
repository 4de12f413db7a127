// Runs election members (test/fixtures/member.ts) as child processes and
// collects what they report, so that tests can kill, freeze and thaw them like
// real services and then check their histories with leadership-history.ts.
//
// Every child is tracked until it exits. `killAllMembers()` belongs in an
// `after` hook; a process "exit" hook SIGKILLs whatever is left if a test run
// ends without it, and a child whose stdin closes (the parent died) leaves
// and exits by itself.
import { spawn, type ChildProcessWithoutNullStreams } from "node:child_process";
import { join } from "node:path";
import { createInterface } from "node:readline";
import type { HistoryEvent, MemberHistory } from "./leadership-history";
import { encodeCommand, parseEvent } from "./member-protocol";

export interface MemberConfig {
  backend: "v2" | "v3" | "nats";
  /** host:port pairs of etcd or nats-server (or of fault proxies in front of them). */
  hosts: string[];
  /** NATS only: the KV bucket the election key is in (it must exist, with a TTL). */
  bucket?: string;
  key: string;
  name: string;
  ttl: number;
  /** Passed to etcdLeader as its options argument (refreshInterval, stepDownMargin, …, in ms). */
  options?: Record<string, unknown>;
  /** What the member does (see test/fixtures/member.ts): "events" (default), "lead" or "abandon-wait". */
  mode?: "events" | "lead" | "abandon-wait";
  /** In "lead" mode: whileLeading's onLoss. */
  onLoss?: "rerun" | "reject";
  /** In "lead" mode: the routine keeps running after its signal aborts, until the "finish" command. */
  ignoreSignal?: boolean;
}

/** What a member process reports: the history events plus the ones only tests care about. */
export type MemberEvent =
  | HistoryEvent
  | { type: "leader"; at: number; leader: string }
  | { type: "left"; at: number }
  | RoutineEvent
  | { type: "scope-settled"; at: number; outcome: "resolved" | "rejected"; error?: string; cause?: string }
  | { type: "wait-resolved"; at: number; token: number }
  | { type: "wait-rejected"; at: number; error: string; cause?: string };

/** What a routine run by whileLeading() reports in "lead" mode. */
export type RoutineEvent =
  | { type: "routine-start" | "act" | "act-refused" | "routine-end"; at: number; token: number }
  | { type: "routine-abort"; at: number; token: number; reason: string };

/** The ops a member process takes (sent as {"op": …}, see member-protocol.ts). */
export type MemberCommand = "start" | "stop" | "leave" | "exit" | "finish";

const FIXTURE = join(__dirname, "..", "fixtures", "member.ts");
const REPO_ROOT = join(__dirname, "..", "..");
/** Lines of output kept for error messages. */
const RECENT_LINES = 40;

const running = new Set<MemberProcess>();

export class MemberProcess {
  readonly name: string;
  readonly pid: number;
  /** Every event so far, in arrival order; an `exit` event is appended when the process ends. */
  readonly events: MemberEvent[] = [];
  /** Resolves with the exit event once the process is gone and its output read. */
  readonly exited: Promise<Extract<MemberEvent, { type: "exit" }>>;
  private readonly child: ChildProcessWithoutNullStreams;
  private readonly recent: string[] = [];
  private readonly listeners = new Set<() => void>();
  private paused = false;

  constructor(readonly config: MemberConfig) {
    this.name = config.name;
    // tsx resolves from the working directory, so the child runs from the repository root.
    this.child = spawn(process.execPath, ["--import", "tsx", FIXTURE, JSON.stringify(config)], {
      cwd: REPO_ROOT,
      stdio: ["pipe", "pipe", "pipe"],
    });
    if (this.child.pid === undefined) throw new Error(`could not start member ${this.name}`);
    this.pid = this.child.pid;
    running.add(this);

    createInterface({ input: this.child.stdout }).on("line", (line) => this.onStdout(line));
    createInterface({ input: this.child.stderr }).on("line", (line) => this.remember(`stderr: ${line}`));
    // Writing to a child that just died must not take the test process down with EPIPE.
    this.child.stdin.on("error", () => {});

    let exitAt = Date.now();
    this.child.on("exit", () => {
      exitAt = Date.now();
    });
    this.exited = new Promise((resolve) => {
      // "close" comes after the output is drained, so the exit event is always last.
      this.child.on("close", (code, signal) => {
        running.delete(this);
        const event = { type: "exit" as const, at: exitAt, code, signal };
        this.events.push(event);
        this.notify();
        resolve(event);
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

  send(command: MemberCommand): void {
    if (!this.running || this.child.stdin.destroyed) throw new Error(`member ${this.name} is not running`);
    this.child.stdin.write(encodeCommand({ op: command }));
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
    this.child.kill(signal);
    if (signal === "SIGSTOP" || signal === "SIGCONT") {
      this.paused = signal === "SIGSTOP";
      return;
    }
    // A frozen process only acts on SIGTERM once thawed.
    if (this.paused) this.resume();
    await this.exited;
  }

  /** Freezes the process (SIGSTOP): it neither renews nor notices that it should step down. */
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

  /** Asks the member to leave and exit; SIGKILLs it if it has not exited within `graceMs`. */
  async stop(graceMs = 5_000): Promise<void> {
    if (!this.running) {
      await this.exited;
      return;
    }
    if (this.paused) this.resume();
    try {
      this.send("exit");
    } catch {
      // It died between the check and the write; the exit event is on its way.
    }
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

  private onStdout(line: string): void {
    this.remember(line);
    const event = parseEvent(line);
    if (!event) return; // a stray console.log in the library; it is in the recent output
    this.events.push(event as MemberEvent);
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
});

const HISTORY_TYPES = new Set<string>(["elected", "unelected", "believed", "error", "crash", "exit"] satisfies HistoryEvent["type"][]);

function isHistoryEvent(event: MemberEvent): event is HistoryEvent {
  return HISTORY_TYPES.has(event.type);
}
