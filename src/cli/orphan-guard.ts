// The orphan guard: a small process that outlives the CLI by a moment, so that
// a command started by the CLI never goes on running as leader after the CLI
// died (SIGKILL, OOM killer, a crash), when nothing is left to renew the
// membership or to stop the command.
//
// The CLI starts one guard and keeps a pipe to its stdin. Each command (and
// hook) runs in its own process group, and the CLI writes `watch <pgid>
// <signal> <graceMs>` when it starts one and `forget <pgid>` once it has
// reaped it. When the pipe closes without a `done` line, the kernel has closed
// it for a CLI that is gone: the guard sends each watched group its stop
// signal at once (the CLI died at or before its lease deadline, so this is
// the earliest anyone could stop the command), SIGKILLs what is left after
// the grace period, and exits. It runs in a process group of its own, so that
// a signal to the CLI's group does not reach it, and ignores SIGINT, SIGTERM
// and SIGHUP should one come anyway: its one job is to act when the CLI is gone.
import { createInterface } from "node:readline";

interface Watched {
  signal: NodeJS.Signals;
  graceMs: number;
}

const watched = new Map<number, Watched>();
let cleanExit = false;

for (const signal of ["SIGINT", "SIGTERM", "SIGHUP"] as const) process.on(signal, () => undefined);

createInterface({ input: process.stdin })
  .on("line", (line) => {
    const [verb, pgid, signal, graceMs] = line.trim().split(" ");
    if (verb === "watch") watched.set(Number(pgid), { signal: signal as NodeJS.Signals, graceMs: Number(graceMs) });
    else if (verb === "forget") watched.delete(Number(pgid));
    else if (verb === "done") cleanExit = true;
  })
  .on("close", () => {
    if (cleanExit || watched.size === 0) process.exit(0);
    stopOrphans();
  });

function stopOrphans(): void {
  let longestGrace = 0;
  for (const [pgid, { signal, graceMs }] of watched) {
    if (!signalGroup(pgid, signal)) watched.delete(pgid);
    longestGrace = Math.max(longestGrace, graceMs);
  }
  const startedAt = Date.now();
  const poll = setInterval(() => {
    for (const [pgid, { graceMs }] of watched) {
      const alive = signalGroup(pgid, 0);
      if (alive && Date.now() - startedAt >= graceMs) signalGroup(pgid, "SIGKILL");
      if (!alive) watched.delete(pgid);
    }
    if (watched.size === 0 || Date.now() - startedAt > longestGrace + 5_000) {
      clearInterval(poll);
      process.exit(0);
    }
  }, 50);
}

/** Signals a process group; false once the group is gone. */
function signalGroup(pgid: number, signal: NodeJS.Signals | 0): boolean {
  try {
    process.kill(-pgid, signal);
    return true;
  } catch {
    return false;
  }
}
