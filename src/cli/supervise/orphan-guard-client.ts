// The CLI's side of the orphan guard (orphan-guard.ts): starts the guard
// process once, and tells it which process groups to stop, and by when,
// should the CLI die or freeze.
import { spawn, type ChildProcess } from "node:child_process";
import { extname, join } from "node:path";

export class OrphanGuard {
  /** The lease deadline last sent, as the guard has it (whole ms); undefined outside a term. */
  private leaseUntil: number | undefined;
  /** The groups the guard watches: told to watch, not yet to forget. */
  private readonly watched = new Set<number>();

  private constructor(private readonly guard: ChildProcess) {}

  static start(): OrphanGuard {
    // Run from the build (.js) or from source under tsx (.ts, with the same --import).
    const script = join(__dirname, `orphan-guard${extname(__filename)}`);
    const guard = spawn(process.execPath, [...process.execArgv, script], {
      // A process group of its own: a signal to the CLI's whole group (a
      // supervisor's SIGKILL included) must not take the guard with it.
      detached: true,
      stdio: ["pipe", "ignore", "inherit"],
    });
    guard.on("error", () => undefined);
    guard.stdin!.on("error", () => undefined);
    // Neither the guard nor its pipe keeps the CLI alive.
    guard.unref();
    (guard.stdin as unknown as { unref?: () => void }).unref?.();
    return new OrphanGuard(guard);
  }

  watch(pgid: number, signal: NodeJS.Signals, graceMs: number): void {
    this.watched.add(pgid);
    this.send(`watch ${pgid} ${signal} ${graceMs}`);
  }

  /** Once no process of the group runs. */
  forget(pgid: number): void {
    this.watched.delete(pgid);
    this.send(`forget ${pgid}`);
  }

  /**
   * The lease deadline (Date.now() ms) the member believes it leads until, or
   * undefined once the term is over: past it, the guard stops what it watches.
   */
  lease(until: number | undefined): void {
    this.leaseUntil = until === undefined ? undefined : Math.floor(until);
    this.send(`lease ${this.leaseUntil ?? "none"}`);
  }

  /**
   * Whether the lease deadline last sent has passed: from then on the guard
   * may have stopped what it watches, on a timer of its own.
   */
  leaseRanOut(): boolean {
    return this.leaseUntil !== undefined && Date.now() >= this.leaseUntil;
  }

  /**
   * The CLI is exiting on its own. If a group it started still runs (an error
   * cut a term short), the guard is not told it is done, and so stops that
   * group as it would for a CLI that died.
   */
  close(): void {
    if (this.watched.size === 0) this.send("done");
    this.guard.stdin?.end();
  }

  private send(line: string): void {
    if (this.guard.stdin?.writable) this.guard.stdin.write(`${line}\n`);
  }
}
