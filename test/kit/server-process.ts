// The part every store server the tests start has in common: one child
// process with its output appended to a log file, started (and restarted) on
// demand, stopped with a signal and a SIGKILL if it lingers, paused and
// resumed to stage outages. etcd-server.ts and nats-server.ts say what to run.
import { spawn, type ChildProcess } from "node:child_process";
import { createWriteStream, readdirSync, readFileSync } from "node:fs";

/** How long a server gets to act on SIGTERM (or SIGKILL) before it is killed outright. */
const STOP_GRACE_MS = 5_000;

export class ServerProcess {
  private child: ChildProcess | undefined;

  /** `logPath` collects stdout and stderr across restarts. */
  constructor(private readonly logPath: string) {}

  get pid(): number | undefined {
    return this.child?.pid;
  }

  get running(): boolean {
    return this.child !== undefined && this.child.exitCode === null && this.child.signalCode === null;
  }

  /**
   * Spawns `binary args` unless it is running; resolves once the process
   * exists (not once it serves). `as` runs it as another user (a server that
   * refuses to run as root, such as PostgreSQL).
   */
  async start(binary: string, args: string[], as: { uid?: number; gid?: number } = {}): Promise<void> {
    if (this.running) return;
    const log = createWriteStream(this.logPath, { flags: "a" });
    // The log is best effort: a server that failed to start has its dir removed under it.
    log.on("error", () => undefined);
    const child = spawn(binary, args, { stdio: ["ignore", "pipe", "pipe"], ...as });
    child.stdout!.pipe(log);
    child.stderr!.pipe(log);
    child.once("exit", () => log.end());
    this.child = child;
    await new Promise<void>((resolve, reject) => {
      child.once("spawn", resolve);
      child.once("error", reject);
    });
  }

  /** SIGTERM (a clean shutdown), then SIGKILL if it lingers; resolves when the process is gone. */
  async stop(): Promise<void> {
    await this.signal("SIGTERM");
  }

  /** SIGKILL: a crash. */
  async kill(): Promise<void> {
    await this.signal("SIGKILL");
  }

  /**
   * SIGSTOP: the process hangs with its sockets open, so clients see timeouts,
   * not disconnects. Returns once every thread of it has stopped: the signal
   * is only queued when kill() returns, and a thread running on the other
   * core could still answer a request sent just after.
   */
  pause(): void {
    const child = this.child;
    if (!child?.pid) return;
    child.kill("SIGSTOP");
    const deadline = performance.now() + 1_000;
    while (!allThreadsStopped(child.pid) && performance.now() < deadline) {
      // A few microseconds, usually; the check reads /proc.
    }
  }

  resume(): void {
    this.child?.kill("SIGCONT");
  }

  /** The last lines of the log, for error messages. */
  logTail(lines = 30): string {
    try {
      return readFileSync(this.logPath, "utf8").split("\n").slice(-lines).join("\n");
    } catch {
      return "";
    }
  }

  private async signal(signal: NodeJS.Signals): Promise<void> {
    const child = this.child;
    if (!child || !this.running) return;
    const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
    // A paused server would not act on SIGTERM.
    child.kill("SIGCONT");
    child.kill(signal);
    const timer = setTimeout(() => child.kill("SIGKILL"), STOP_GRACE_MS);
    await exited;
    clearTimeout(timer);
  }
}

/** Whether every thread of `pid` is stopped (state T), from /proc; true where /proc cannot tell. */
function allThreadsStopped(pid: number): boolean {
  try {
    return readdirSync(`/proc/${pid}/task`).every((tid) => {
      const stat = readFileSync(`/proc/${pid}/task/${tid}/stat`, "utf8");
      // The state follows the command name, which is in parentheses and may hold spaces.
      return stat.slice(stat.lastIndexOf(")") + 2, stat.lastIndexOf(")") + 3) === "T";
    });
  } catch {
    return true;
  }
}
