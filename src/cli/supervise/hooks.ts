// The begin and end hooks (--on-elected, --on-unelected): shell commands run
// when this member starts and stops leading, retried with back-off, as
// elector's handlers are. What a failure leads to (src/cli/commands/run.ts decides, this file
// only reports success or failure):
//
// - The begin hook failed after its retries: the member gives up leadership
//   (runs the end hook to undo what the begin hook may have half done, leaves
//   the election) and rejoins after --error-delay: elector's error state.
// - The end hook failed after its retries: whatever the begin hook started may
//   still run, so this member must not look healthy. The CLI leaves the
//   election and exits with code 75, for a supervisor to restart it and an
//   operator to look. elector instead went on as leader in this case.
//
// A hook that runs longer than --hook-timeout is stopped (signal, grace,
// SIGKILL) and counts as failed; a begin hook is also stopped, and fails, when
// the term ends under it.
import { delay } from "./delay";
import type { OrphanGuard } from "./orphan-guard-client";
import { ProcessGroup, type CommandSpec } from "./process-group";
import type { Reporter } from "../report";

/** The first retry of a failed hook waits this long, each next one twice as long, up to LAST_RETRY_MS. */
const FIRST_RETRY_MS = 500;
const LAST_RETRY_MS = 5_000;

export interface HookSettings {
  onElected?: string | undefined;
  onUnelected?: string | undefined;
  /** Tries after the first failure. */
  retries: number;
  timeoutMs: number;
  stopSignal: NodeJS.Signals;
  graceMs: number;
}

export type HookName = "on-elected" | "on-unelected";

export class Hooks {
  constructor(
    private readonly settings: HookSettings,
    private readonly guard: OrphanGuard,
    private readonly reporter: Reporter,
  ) {}

  /** Runs the begin hook, if any; false if it failed every try or `term` ended first. */
  begin(env: NodeJS.ProcessEnv, term: AbortSignal): Promise<boolean> {
    return this.run("on-elected", this.settings.onElected, env, term);
  }

  /** Runs the end hook, if any, to the end of its retries; false if it failed every try. */
  end(env: NodeJS.ProcessEnv): Promise<boolean> {
    return this.run("on-unelected", this.settings.onUnelected, env, undefined);
  }

  private async run(hook: HookName, command: string | undefined, env: NodeJS.ProcessEnv, term: AbortSignal | undefined): Promise<boolean> {
    if (command === undefined) return true;
    for (let attempt = 1; ; attempt++) {
      if (term?.aborted) return false;
      this.reporter.state("hook-start", `running the ${hook} hook (try ${attempt}): ${command}`, { hook, attempt });
      const outcome = await this.once(command, env, term);
      if (outcome === "ok") {
        this.reporter.state("hook-ok", `the ${hook} hook succeeded`, { hook, attempt });
        return true;
      }
      const last = attempt > this.settings.retries || term?.aborted;
      this.reporter.state("hook-failed", `the ${hook} hook failed (${outcome})${last ? "" : "; trying again"}`, {
        hook,
        attempt,
        outcome,
      });
      if (last) return false;
      // Back-off from half a second, doubling, up to 5 s.
      await delay(Math.min(FIRST_RETRY_MS * 2 ** (attempt - 1), LAST_RETRY_MS), term);
    }
  }

  /** One run of the hook: "ok", or why it failed. */
  private async once(command: string, env: NodeJS.ProcessEnv, term: AbortSignal | undefined): Promise<string> {
    const spec: CommandSpec = {
      command: "/bin/sh",
      args: ["-c", command],
      env,
      stopSignal: this.settings.stopSignal,
      graceMs: this.settings.graceMs,
    };
    let group: ProcessGroup;
    try {
      group = await ProcessGroup.start(spec, this.guard);
    } catch (err) {
      return (err as Error).message;
    }
    let why: string | undefined;
    const stop = (reason: string) => {
      why ??= reason;
      void group.stop();
    };
    const onTermEnd = () => stop("stopped: the term ended");
    const timer = setTimeout(() => stop(`stopped after ${this.settings.timeoutMs} ms`), this.settings.timeoutMs);
    term?.addEventListener("abort", onTermEnd, { once: true });
    if (term?.aborted) onTermEnd();
    // A hook is done when nothing it started in its group runs: its shell's
    // background jobs are part of it.
    const exit = await group.gone;
    clearTimeout(timer);
    term?.removeEventListener("abort", onTermEnd);
    if (why) return why;
    return exit.code === 0 ? "ok" : exit.signal ? `killed by ${exit.signal}` : `exit code ${exit.code}`;
  }
}
