// One command the CLI starts, in a process group of its own: so that a shell
// command's own children are stopped with it, and so that a Ctrl-C at the
// terminal reaches the CLI alone, which then stops the command in order
// (signal, grace period, SIGKILL) after it has decided to.
//
// The group is what counts, not its first process: a shell that dies of the
// stop signal leaves behind a child that ignores it, and a command that forks
// a daemon and exits leaves the daemon. So the command is done (`gone`) only
// once no process of its group runs; until then the kill timer stays set, the
// orphan guard keeps watching the group, and stop() goes on to SIGKILL. The
// exit reported is always the first process's.
import { spawn, type ChildProcess } from "node:child_process";
import { constants } from "node:os";
import { CliError, EXIT } from "../exit";
import { groupIsAlive } from "./group-liveness";
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

/**
 * After the first process exited, how often the rest of the group is looked
 * for: often while it is being stopped (the term's end waits for it), seldom
 * while it runs on by itself (a daemon the command forked).
 */
const STOPPING_POLL_MS = 50;
const RUNNING_ON_POLL_MS = 500;

export class ProcessGroup {
  /** Resolves when the first process (the command itself) has exited, with how it exited. */
  readonly exited: Promise<Exit>;
  /** Resolves once no process of the group runs (zombies aside), with how its first process exited. */
  readonly gone: Promise<Exit>;
  private firstExit: Exit | undefined;
  private ended = false;
  private stopSent = false;
  private killTimer: NodeJS.Timeout | undefined;
  private poll: NodeJS.Timeout | undefined;
  private resolveGone!: (exit: Exit) => void;

  private constructor(
    private readonly child: ChildProcess,
    private readonly spec: CommandSpec,
    private readonly guard: OrphanGuard,
  ) {
    this.gone = new Promise((resolve) => (this.resolveGone = resolve));
    this.exited = new Promise((resolve) => {
      child.once("exit", (code, signal) => {
        this.firstExit = { code: code ?? 128 + (signal ? (constants.signals[signal] ?? 0) : 0), signal };
        resolve(this.firstExit);
        this.checkGone();
      });
    });
  }

  /** Starts the command; rejects with exit code 127 or 126 if it cannot be run. */
  static start(spec: CommandSpec, guard: OrphanGuard): Promise<ProcessGroup> {
    return new Promise((resolve, reject) => {
      const child = spawn(spec.command, spec.args, {
        detached: true,
        // The command reads no terminal: a background process group that did
        // would be stopped (SIGTTIN).
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

  /** Whether no process of the group runs any more; `gone` has resolved, or will in this tick. */
  get isGone(): boolean {
    return this.ended;
  }

  /**
   * Sends the stop signal to the whole group now, and SIGKILL after the grace
   * period if any process of it still runs. Resolves when the group is gone.
   */
  stop(): Promise<Exit> {
    if (!this.stopSent && !this.ended) {
      this.stopSent = true;
      signalGroup(this.pid, this.spec.stopSignal);
      this.killTimer = setTimeout(() => signalGroup(this.pid, "SIGKILL"), this.spec.graceMs);
      // Already polling for the rest of the group: poll faster from now on.
      if (this.poll !== undefined) this.checkGone();
    }
    return this.gone;
  }

  /** Once the first process has exited: whether the rest of the group is gone too, and if not, when to look again. */
  private checkGone(): void {
    clearTimeout(this.poll);
    this.poll = undefined;
    if (groupIsAlive(this.pid)) {
      this.poll = setTimeout(() => this.checkGone(), this.stopSent ? STOPPING_POLL_MS : RUNNING_ON_POLL_MS);
      return;
    }
    this.ended = true;
    clearTimeout(this.killTimer);
    this.guard.forget(this.pid);
    this.resolveGone(this.firstExit!);
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
