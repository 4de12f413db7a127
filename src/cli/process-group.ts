// One command the CLI starts, in a process group of its own: so that a shell
// command's own children are stopped with it, and so that a Ctrl-C at the
// terminal reaches the CLI alone, which then stops the command in order
// (signal, grace period, SIGKILL) after it has decided to.
import { spawn, type ChildProcess } from "node:child_process";
import { constants } from "node:os";
import { CliError, EXIT } from "./exit";
import type { OrphanGuard } from "./orphan-guard-client";

export interface CommandSpec {
  command: string;
  args: string[];
  env: NodeJS.ProcessEnv;
  /** The signal that asks it to stop, and how long it gets before SIGKILL. */
  stopSignal: NodeJS.Signals;
  graceMs: number;
}

export interface Exit {
  /** The exit code, or 128 + the signal's number if a signal ended it (as shells report it). */
  code: number;
  signal: NodeJS.Signals | null;
}

export class ProcessGroup {
  /** Resolves once the command has exited. */
  readonly exited: Promise<Exit>;
  private killTimer: NodeJS.Timeout | undefined;
  private stopSentAt: number | undefined;

  private constructor(
    private readonly child: ChildProcess,
    private readonly spec: CommandSpec,
    guard: OrphanGuard,
  ) {
    this.exited = new Promise((resolve) => {
      child.once("exit", (code, signal) => {
        clearTimeout(this.killTimer);
        guard.forget(this.pid);
        resolve({ code: code ?? 128 + (signal ? (constants.signals[signal] ?? 0) : 0), signal });
      });
    });
  }

  /** Starts the command; rejects with exit code 127 or 126 if it cannot be run. */
  static start(spec: CommandSpec, guard: OrphanGuard): Promise<ProcessGroup> {
    return new Promise((resolve, reject) => {
      const child = spawn(spec.command, spec.args, {
        detached: true,
        // The command reads no terminal: a background process group that did would be stopped (SIGTTIN).
        stdio: ["ignore", "inherit", "inherit"],
        env: spec.env,
      });
      // The guard hears of the group in the same synchronous step as the spawn
      // (its pid is known once spawn() returns; the "spawn" event comes a tick
      // later), so that no moment exists where the CLI could die with the
      // command running and the guard not knowing it.
      if (child.pid !== undefined) guard.watch(child.pid, spec.stopSignal, spec.graceMs);
      child.once("error", (err: NodeJS.ErrnoException) => {
        if (child.pid !== undefined) guard.forget(child.pid);
        reject(cannotRun(spec.command, err));
      });
      child.once("spawn", () => resolve(new ProcessGroup(child, spec, guard)));
    });
  }

  get pid(): number {
    return this.child.pid!;
  }

  /** When the stop signal was sent (Date.now()), if it was. */
  get stoppingSince(): number | undefined {
    return this.stopSentAt;
  }

  /**
   * Sends the stop signal to the whole group now, and SIGKILL after the grace
   * period if the command is still running. Resolves when it has exited.
   */
  stop(): Promise<Exit> {
    if (this.stopSentAt === undefined && this.child.exitCode === null && this.child.signalCode === null) {
      this.stopSentAt = Date.now();
      signalGroup(this.pid, this.spec.stopSignal);
      this.killTimer = setTimeout(() => signalGroup(this.pid, "SIGKILL"), this.spec.graceMs);
    }
    return this.exited;
  }
}

function signalGroup(pgid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(-pgid, signal);
  } catch {
    // The group is gone already.
  }
}

function cannotRun(command: string, err: NodeJS.ErrnoException): CliError {
  if (err.code === "ENOENT") {
    return new CliError(EXIT.notFound, `${command}: command not found (check the name, or give its full path)`);
  }
  if (err.code === "EACCES") {
    return new CliError(EXIT.notExecutable, `${command}: permission denied (is it executable? chmod +x)`);
  }
  return new CliError(EXIT.notExecutable, `${command}: cannot be run: ${err.message}`);
}
