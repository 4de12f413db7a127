// The benchmark's side of a member process (bench/member-process.ts): spawns
// it, sends commands, parses its events, kills it. Every process spawned here
// is killed when the benchmark exits, however it exits. The lines both ways
// are the member programs' dialect (bench/member-protocol.ts).
import { spawn, type ChildProcess } from "node:child_process";
import { join } from "node:path";
import { encodeCommand, parseEvent, type EventLine } from "./member-protocol";
import type { SubjectId } from "./subjects/types";
import { now, withDeadline } from "./util";

type Listener = (event: EventLine) => void;

const repoRoot = join(__dirname, "..");
const live = new Set<Host>();

class Semaphore {
  private waiting: Array<() => void> = [];
  constructor(private free: number) {}
  async acquire(): Promise<void> {
    if (this.free > 0) {
      this.free--;
      return;
    }
    await new Promise<void>((resolve) => this.waiting.push(resolve));
  }
  release(): void {
    const next = this.waiting.shift();
    if (next) next();
    else this.free++;
  }
}
const startSlot = new Semaphore(4);
let nextHostNumber = 1;
/** Where bench/compile.ts put the JavaScript of the member process; until set, it runs through tsx. */
let compiledRoot: string | undefined;

export function useCompiledMembers(root: string): void {
  compiledRoot = root;
}

export class Host {
  readonly label: string;
  private nextId = 1;
  private readonly pending = new Map<number, { resolve: (v: Record<string, unknown>) => void; reject: (e: Error) => void }>();
  private readonly listeners = new Set<Listener>();
  private readonly batchListeners = new Set<() => void>();
  private buffer = "";
  private stderr = "";
  /** When the process went away, and how. */
  exit: { t: number; code: number | null; signal: NodeJS.Signals | null } | undefined;
  /** A message the process sent before dying of an uncaught error. */
  fatal: string | undefined;
  killedAt: number | undefined;
  readonly ready: Promise<void>;

  private constructor(private readonly child: ChildProcess, readonly subject: SubjectId) {
    this.label = `${subject}#${nextHostNumber++}`;
    live.add(this);
    let markReady!: () => void;
    let failReady!: (err: Error) => void;
    this.ready = new Promise((resolve, reject) => {
      markReady = resolve;
      failReady = reject;
    });
    this.ready.catch(() => undefined);
    child.stdout!.setEncoding("utf8");
    child.stdout!.on("data", (chunk: string) => this.read(chunk, markReady));
    child.stderr!.setEncoding("utf8");
    child.stderr!.on("data", (chunk: string) => {
      this.stderr = (this.stderr + chunk).slice(-6000);
    });
    child.stdin!.on("error", () => undefined);
    child.once("exit", (code, signal) => {
      this.exit = { t: now(), code, signal };
      live.delete(this);
      const err = new Error(`${this.label} exited (${this.describeExit()})`);
      failReady(err);
      for (const { reject } of this.pending.values()) reject(err);
      this.pending.clear();
      for (const listener of this.listeners) listener({ type: "exit", at: this.exit.t, code, signal });
      for (const listener of this.batchListeners) listener();
    });
  }

  static async spawn(subject: SubjectId, hosts: string[], sampleMs: number): Promise<Host> {
    // A few at a time: a dozen node processes starting at once on two cores would each take seconds.
    await startSlot.acquire();
    try {
      return await Host.spawnNow(subject, hosts, sampleMs);
    } finally {
      startSlot.release();
    }
  }

  private static async spawnNow(subject: SubjectId, hosts: string[], sampleMs: number): Promise<Host> {
    const config = JSON.stringify({ subject, hosts, sampleMs });
    const entry = compiledRoot
      ? [join(compiledRoot, "bench", "member-process.js")]
      : ["--import", "tsx", join("bench", "member-process.ts")];
    const child = spawn(process.execPath, ["--expose-gc", "--max-old-space-size=2048", ...entry, config], {
      cwd: repoRoot,
      stdio: ["pipe", "pipe", "pipe"],
      env: { ...process.env, DEBUG: "" },
    });
    const host = new Host(child, subject);
    try {
      await withDeadline(host.ready, 20_000, `starting a ${subject} member process`);
    } catch (err) {
      host.kill();
      throw err;
    }
    return host;
  }

  get alive(): boolean {
    return this.exit === undefined;
  }

  get pid(): number | undefined {
    return this.child.pid;
  }

  describeExit(): string {
    if (!this.exit) return "running";
    const how = this.exit.signal ? `killed by ${this.exit.signal}` : `exit code ${this.exit.code}`;
    const why = this.fatal ? `; ${this.fatal}` : "";
    return `${how}${why}`;
  }

  stderrTail(lines = 8): string {
    return this.stderr.trimEnd().split("\n").slice(-lines).join("\n");
  }

  onEvent(listener: Listener): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** Called after each chunk of events has been dispatched. */
  onBatch(listener: () => void): () => void {
    this.batchListeners.add(listener);
    return () => this.batchListeners.delete(listener);
  }

  /** Sends a command and resolves with the reply's fields; rejects on failure, exit or deadline. */
  async request(op: string, args: Record<string, unknown> = {}, timeoutMs = 15_000): Promise<Record<string, unknown>> {
    if (!this.alive) throw new Error(`${this.label} is not running (${this.describeExit()})`);
    const id = this.nextId++;
    const reply = new Promise<Record<string, unknown>>((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
    });
    this.child.stdin!.write(encodeCommand({ ...args, op, id }));
    try {
      return await withDeadline(reply, timeoutMs, `${this.label} ${op}`);
    } finally {
      this.pending.delete(id);
    }
  }

  /** SIGKILL: a crash. Returns when the signal was sent. */
  kill(): number {
    const t = now();
    this.killedAt ??= t;
    if (this.alive) this.child.kill("SIGKILL");
    return t;
  }

  /** Asks the process to close its members and exit; kills it if that takes too long. */
  async shutdown(timeoutMs = 15_000): Promise<void> {
    if (!this.alive) return;
    const exited = new Promise<void>((resolve) => this.child.once("exit", () => resolve()));
    try {
      await this.request("close", {}, timeoutMs);
      this.child.stdin!.end();
      await withDeadline(exited, 3_000, `${this.label} exit`);
    } catch {
      this.kill();
      await withDeadline(exited, 3_000, `${this.label} exit after SIGKILL`).catch(() => undefined);
    }
  }

  private read(chunk: string, markReady: () => void): void {
    this.buffer += chunk;
    let newline: number;
    while ((newline = this.buffer.indexOf("\n")) >= 0) {
      const line = this.buffer.slice(0, newline);
      this.buffer = this.buffer.slice(newline + 1);
      if (!line.trim()) continue;
      const event = parseEvent(line);
      if (!event) {
        this.stderr += `\n(stdout) ${line}`;
        continue;
      }
      if (event.type === "ready") markReady();
      else if (event.type === "reply") {
        const waiter = this.pending.get(event.id as number);
        if (!waiter) continue;
        if (event.ok) waiter.resolve(event);
        else waiter.reject(new Error(`${this.label}: ${String(event.error)}`));
      } else {
        if (event.type === "fatal") this.fatal = String(event.message);
        for (const listener of this.listeners) listener(event);
      }
    }
    for (const listener of this.batchListeners) listener();
  }
}

/** Spawns several member processes at once. */
export function spawnHosts(subject: SubjectId, hosts: string[], count: number, sampleMs: number): Promise<Host[]> {
  return Promise.all(Array.from({ length: count }, () => Host.spawn(subject, hosts, sampleMs)));
}

/** SIGKILLs every member process still running (exit and signal handlers). */
export function killAllHosts(): void {
  for (const host of live) host.kill();
}

export function liveHostCount(): number {
  return live.size;
}
