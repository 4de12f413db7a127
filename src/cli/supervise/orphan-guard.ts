// The orphan guard: a small process beside the CLI that stops the command the
// CLI started when the CLI can no longer do it itself, so that a command
// never goes on acting as leader past its member's lease deadline.
//
// Two ways the CLI can fail its command:
// - it died (SIGKILL, the OOM killer, a crash): nothing is left to renew the
//   membership or to stop the command;
// - it is frozen (SIGSTOP, a debugger, an event loop blocked for seconds): its
//   own step-down timer cannot run, yet the lease runs out and a successor is
//   elected.
//
// The CLI starts one guard and keeps a pipe to its stdin. Each command (and
// hook) runs in its own process group, and the CLI writes
//   watch <pgid> <signal> <graceMs>   when it starts one,
//   forget <pgid>                      once no process of the group runs (its
//                                      first process exiting is not enough),
//   lease <epoch ms>                   when a term starts and on every renewal:
//                                      the deadline the member believes it leads until,
//   lease none                         when the term ends (before the end hook runs),
//   done                               when it exits on its own, with no group
//                                      of its left running.
// When the lease deadline passes without a newer one, the guard sends each
// watched group its stop signal and SIGKILL after the grace period: the
// moment the CLI itself would have, had it run. When the pipe closes without
// `done`, the kernel has closed it for a CLI that is gone: the guard stops
// every watched group the same way (the CLI died at or before its lease
// deadline, so this is the earliest anyone could stop the command) and exits.
// A group it stops counts as gone once no process of it runs, zombies aside
// (group-liveness.ts): where PID 1 does not reap orphans, a zombie stays a
// member of its group for good.
// It runs in a process group of its own, so that a signal to the CLI's group
// (SIGSTOP included) does not reach it, and ignores SIGINT, SIGTERM and
// SIGHUP should one come anyway.
import { createInterface } from "node:readline";
import { groupIsAlive } from "./group-liveness";

interface Watched {
  signal: NodeJS.Signals;
  graceMs: number;
  /** When this guard sent the stop signal (Date.now()), if it has. */
  stoppedAt?: number;
}

/** How often groups being stopped are checked for SIGKILL and for being gone. */
const POLL_MS = 50;
/** After the CLI is gone: how long past the longest grace period the guard waits for groups to go. */
const LINGER_MS = 5_000;

const watched = new Map<number, Watched>();
let cleanExit = false;
let leaseTimer: NodeJS.Timeout | undefined;
let poll: NodeJS.Timeout | undefined;
let orphanedAt: number | undefined;

for (const signal of ["SIGINT", "SIGTERM", "SIGHUP"] as const) process.on(signal, () => undefined);

createInterface({ input: process.stdin })
  .on("line", (line) => {
    const [verb, first, signal, graceMs] = line.trim().split(" ");
    if (verb === "watch") watched.set(Number(first), { signal: signal as NodeJS.Signals, graceMs: Number(graceMs) });
    else if (verb === "forget") watched.delete(Number(first));
    else if (verb === "lease") setLease(first === "none" ? undefined : Number(first));
    else if (verb === "done") cleanExit = true;
  })
  .on("close", () => {
    setLease(undefined);
    if (cleanExit || watched.size === 0) process.exit(0);
    orphanedAt = Date.now();
    stopAll();
  });

function setLease(until: number | undefined): void {
  clearTimeout(leaseTimer);
  leaseTimer = undefined;
  if (until === undefined || !Number.isFinite(until)) return;
  leaseTimer = setTimeout(stopAll, Math.max(0, until - Date.now()));
}

/** Sends every watched group its stop signal (once), then SIGKILL after its grace period. */
function stopAll(): void {
  const now = Date.now();
  for (const [pgid, group] of watched) {
    if (group.stoppedAt !== undefined) continue;
    group.stoppedAt = now;
    if (!signalGroup(pgid, group.signal)) watched.delete(pgid);
  }
  poll ??= setInterval(checkStopping, POLL_MS);
  checkStopping();
}

function checkStopping(): void {
  const now = Date.now();
  let longestGrace = 0;
  for (const [pgid, group] of watched) {
    longestGrace = Math.max(longestGrace, group.graceMs);
    if (group.stoppedAt === undefined) continue;
    if (!groupIsAlive(pgid)) watched.delete(pgid);
    else if (now - group.stoppedAt >= group.graceMs) signalGroup(pgid, "SIGKILL");
  }
  if (orphanedAt !== undefined && (watched.size === 0 || now - orphanedAt > longestGrace + LINGER_MS)) process.exit(0);
  if (![...watched.values()].some((group) => group.stoppedAt !== undefined)) {
    clearInterval(poll);
    poll = undefined;
  }
}

/** Signals a process group; false once the group is gone. */
function signalGroup(pgid: number, signal: NodeJS.Signals): boolean {
  try {
    process.kill(-pgid, signal);
    return true;
  } catch {
    return false;
  }
}
