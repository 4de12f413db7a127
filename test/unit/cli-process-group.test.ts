// A command's process group, and what the CLI and its orphan guard take for
// "gone": no process of the group left that runs, not its first process
// exited. A shell's children outlive it, and on a machine whose PID 1 does
// not reap orphans (this one, many containers) what they leave behind is a
// zombie that stays a member of the group for good. Checked with `ps`
// (test/fixtures/process-table.cjs), apart from the CLI's own /proc reading.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync, symlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { after, describe, it } from "node:test";
import { groupIsAlive } from "../../src/cli/supervise/group-liveness";
import type { OrphanGuard } from "../../src/cli/supervise/orphan-guard-client";
import { ProcessGroup, type CommandSpec } from "../../src/cli/supervise/process-group";
import { livingInGroups, livingProcesses } from "../fixtures/process-table.cjs";
import { exitOrFail, sleep, waitFor } from "../kit/waiting";
import { REPO_ROOT } from "../kit/paths";

/** A shell whose child ignores SIGTERM and has a child of its own that ignores it too. */
const STUBBORN_CHILD = "(trap '' TERM; sleep 30 & wait) & wait";
/**
 * Leaves a zombie in its process group that nobody reaps, as PID 1 leaves
 * orphans' zombies in many containers (here for as long as the test needs it,
 * whatever this machine's PID 1 does): a child forks the zombie-to-be, moves
 * to a group of its own, prints "<its pid> <the zombie's pid>" and sleeps
 * without waiting for it.
 */
const ZOMBIE_MAKER = `$| = 1; if (fork() == 0) { my $z = fork(); exit 0 if $z == 0; setpgrp(0, 0); print "$$ $z\\n"; sleep 60; exit 0 } exit 0`;
const GRACE_MS = 300;
const GUARD = join(REPO_ROOT, "src", "cli", "supervise", "orphan-guard.ts");

/** Every group a test started, SIGKILLed at the end whatever happened. */
const started = new Set<number>();

after(() => {
  for (const pgid of started) signalGroup(pgid, "SIGKILL");
  exitOrFail();
});

function shell(script: string): CommandSpec {
  return { command: "/bin/sh", args: ["-c", script], env: process.env, stopSignal: "SIGTERM", graceMs: GRACE_MS };
}

/** A guard that records what it is told, and which processes of the group ran when it was told to forget it. */
function recordingGuard(): { guard: OrphanGuard; told: string[]; livingAtForget: string[][] } {
  const told: string[] = [];
  const livingAtForget: string[][] = [];
  const guard = {
    watch: (pgid: number) => {
      started.add(pgid);
      told.push(`watch ${pgid}`);
    },
    forget: (pgid: number) => {
      told.push(`forget ${pgid}`);
      livingAtForget.push(livingInGroups([pgid]));
    },
  } as unknown as OrphanGuard;
  return { guard, told, livingAtForget };
}

/**
 * Starts `script` under /bin/sh in a process group of its own, as the test's
 * child; `$ZOMBIE` in it runs ZOMBIE_MAKER. Resolves with the group, and the
 * zombie's pid if one was made.
 */
async function detachedShell(script: string): Promise<{ pgid: number; zombie: number | undefined }> {
  const child = spawn("/bin/sh", ["-c", script.replace("$ZOMBIE", `perl -e "$1"`), "sh", ZOMBIE_MAKER], {
    detached: true,
    stdio: ["ignore", "pipe", "inherit"],
  });
  started.add(child.pid!);
  if (!script.includes("$ZOMBIE")) return { pgid: child.pid!, zombie: undefined };
  const line = await new Promise<string>((resolve) => createInterface({ input: child.stdout }).once("line", resolve));
  const [parent, zombie] = line.split(" ").map(Number) as [number, number];
  // Its parent leads a group of its own.
  started.add(parent);
  await waitFor("the zombie", 5_000, () => livingProcesses().every((p) => p.pid !== zombie));
  return { pgid: child.pid!, zombie };
}

function signalGroup(pgid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(-pgid, signal);
  } catch {
    // gone
  }
}

describe("a command's process group", { timeout: 30_000 }, () => {
  it("stop() resolves once nothing of the group runs: a child that ignores the signal, and its own child, are SIGKILLed after the grace period", async () => {
    const { guard, told, livingAtForget } = recordingGuard();
    const group = await ProcessGroup.start(shell(STUBBORN_CHILD), guard);
    await waitFor("the shell, its child and grandchild", 5_000, () => livingInGroups([group.pid]).length >= 3);
    const stoppedAt = Date.now();
    const exit = await group.stop();
    const tookMs = Date.now() - stoppedAt;
    assert.deepEqual(livingInGroups([group.pid]), [], "no process of the group runs once stop() resolved");
    assert.ok(tookMs >= GRACE_MS - 20, `stop() resolved ${tookMs} ms after the signal, before the grace period of ${GRACE_MS} ms ran out`);
    assert.equal(exit.signal, "SIGTERM", "the exit is the first process's: the shell, ended by the stop signal");
    assert.deepEqual(told, [`watch ${group.pid}`, `forget ${group.pid}`]);
    assert.deepEqual(livingAtForget, [[]], "the guard is told to forget the group only once nothing of it runs");
  });

  it("a first process that exits by itself: `exited` resolves with its code at once, `gone` once the rest of its group has exited", async () => {
    const { guard, livingAtForget } = recordingGuard();
    const startedAt = Date.now();
    const group = await ProcessGroup.start(shell("sleep 0.8 & exit 3"), guard);
    const exited = await group.exited;
    const exitedMs = Date.now() - startedAt;
    assert.equal(exited.code, 3);
    assert.ok(exitedMs < 700, `the shell exited ${exitedMs} ms after its start`);
    assert.notDeepEqual(livingInGroups([group.pid]), [], "its background sleep still runs");
    const gone = await group.gone;
    const goneMs = Date.now() - startedAt;
    assert.ok(goneMs >= 750, `gone ${goneMs} ms after the start, before the sleep ended`);
    assert.deepEqual(gone, exited, "the exit reported is the first process's");
    assert.deepEqual(livingAtForget, [[]]);
  });

  it("stop() after the first process exited still stops the rest of the group, SIGKILL after the grace period", async () => {
    const { guard } = recordingGuard();
    const group = await ProcessGroup.start(shell("(trap '' TERM; sleep 30) & exit 0"), guard);
    assert.equal((await group.exited).code, 0);
    // The subshell ignores SIGTERM once its trap ran, and the sleep it then starts inherits that; a stop
    // that came before (a loaded machine) would end it at once.
    await waitFor("the subshell's sleep to run", 5_000, () => livingInGroups([group.pid]).some((p) => / sleep 30$/.test(p)));
    const stoppedAt = Date.now();
    await group.stop();
    const tookMs = Date.now() - stoppedAt;
    assert.deepEqual(livingInGroups([group.pid]), []);
    assert.ok(tookMs >= GRACE_MS - 20, `stopped in ${tookMs} ms, before the grace period ran out`);
  });
});

describe("groupIsAlive", { timeout: 30_000 }, () => {
  it("a group whose only process left is a zombie is gone, though a signal still reaches the group", async () => {
    const { pgid } = await detachedShell("$ZOMBIE; exec sleep 0.3");
    assert.equal(groupIsAlive(pgid), true, "while the shell's sleep runs");
    await waitFor("the sleep to end", 5_000, () => livingInGroups([pgid]).length === 0);
    assert.doesNotThrow(() => process.kill(-pgid, 0), "the zombie is still a member of the group");
    assert.equal(groupIsAlive(pgid), false);
  });

  it("reads a process's state and group past a command name with spaces and parentheses", { skip: process.platform !== "linux" }, async () => {
    const dir = mkdtempSync(join(tmpdir(), "etcd-leader-comm-"));
    try {
      // /proc/<pid>/stat then reads "<pid> (x) Z 1 2 (y) S <ppid> <pgrp> ...".
      const program = join(dir, "x) Z 1 2 (y");
      symlinkSync("/bin/sleep", program);
      const child = spawn(program, ["30"], { detached: true, stdio: "ignore" });
      started.add(child.pid!);
      await waitFor("the program to run", 5_000, () => livingInGroups([child.pid!]).length === 1);
      assert.equal(groupIsAlive(child.pid!), true);
      child.kill("SIGKILL");
      await waitFor("the program to be gone", 5_000, () => !groupIsAlive(child.pid!));
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe("the orphan guard, its CLI gone", { timeout: 30_000 }, () => {
  it("stops a group whose shell left a child that ignores the signal, and exits once only zombies of it are left", async () => {
    const guard = spawn(process.execPath, ["--import", "tsx", GUARD], { stdio: ["pipe", "ignore", "inherit"] });
    const exited = new Promise<void>((resolve) => guard.once("exit", () => resolve()));
    const { pgid } = await detachedShell(`$ZOMBIE; ${STUBBORN_CHILD}`);
    await waitFor("the group's processes", 5_000, () => livingInGroups([pgid]).length >= 3);
    guard.stdin.write(`watch ${pgid} SIGTERM ${GRACE_MS}\n`);
    // The pipe closes without "done": the CLI died.
    guard.stdin.end();
    const closedAt = Date.now();
    await waitFor("the group to be gone", 5_000, () => livingInGroups([pgid]).length === 0);
    const goneMs = Date.now() - closedAt;
    assert.ok(goneMs >= GRACE_MS - 20, `gone ${goneMs} ms after the CLI, before the grace period ran out`);
    const outcome = await Promise.race([exited.then(() => "exited"), sleep(2_000).then(() => "still running")]);
    if (outcome !== "exited") guard.kill("SIGKILL");
    assert.equal(outcome, "exited", "the guard exits once the group is gone, zombies aside");
  });
});
