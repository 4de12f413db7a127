// The `etcd-leader` command as the tests start it: the build in dist/, as a
// user gets it, not the sources through tsx. A CLI from the build starts in a
// fraction of the time, and so does its orphan guard (started with the CLI's
// own node flags); that matters when a fault scenario starts three of each at
// once on two cores.
//
// So that a test run in the edit loop never tries a stale build, the first
// CLI a test process starts checks that no file under src/ is newer than the
// build, and builds (scripts/build.mjs) if one is. `npm test` builds first
// (scripts/prepare.sh), so there the check finds nothing to do.
//
// A build replaces dist/ whole, and a CLI loads some of its modules only when
// it needs them; so that a build made meanwhile (by another test file, or by
// hand) cannot pull files from under CLIs that run, each test process runs
// the CLI from its own copy of dist/cjs, made once, removed when it exits.
import { spawnSync } from "node:child_process";
import { cpSync, existsSync, mkdirSync, readdirSync, rmSync, statSync } from "node:fs";
import { join } from "node:path";
import { REPO_ROOT } from "./paths";

const SOURCES = join(REPO_ROOT, "src");
const BUILD = join(REPO_ROOT, "dist", "cjs");
const SCRATCH = join(REPO_ROOT, ".tmp");
/** Held while one test process builds, so that two test files started together do not build over each other. */
const BUILD_LOCK = join(SCRATCH, "test-build.lock");
/** A lock older than this was left by a test process that died while building. */
const STALE_LOCK_MS = 120_000;
/** This process's copy of dist/cjs; inside the repository, so that the CLI finds node_modules as from dist/. */
const COPY = join(SCRATCH, `test-cli-${process.pid}`);

let cli: string | undefined;

/** The path of the built CLI (package.json "bin"), in this process's copy of the build, built first if src/ has changed. */
export function builtCli(): string {
  if (cli === undefined) {
    buildIfStale();
    copyBuild();
    cli = join(COPY, "cli", "main.js");
  }
  return cli;
}

/** Why the build is stale (a file newer than it, or no build), or undefined if it is current. */
export function staleBecause(): string | undefined {
  const built = oldestMtime(BUILD);
  if (built === undefined) return "there is no build in dist/";
  const newer = newestFile(SOURCES);
  if (newer && newer.mtimeMs > built) return `${newer.path.slice(REPO_ROOT.length + 1)} is newer than dist/`;
  return undefined;
}

/** Builds (scripts/build.mjs) if a file under src/ is newer than dist/; for tests that use dist/ as it is (npm pack). */
export function buildIfStale(): void {
  if (staleBecause() === undefined) return;
  withBuildLock(() => {
    // Another test process may have built while this one waited for the lock.
    const why = staleBecause();
    if (why === undefined) return;
    process.stderr.write(`# ${why}: building (node scripts/build.mjs) before the CLI tests\n`);
    const build = spawnSync(process.execPath, [join(REPO_ROOT, "scripts", "build.mjs")], { cwd: REPO_ROOT, encoding: "utf8" });
    if (build.status !== 0) {
      throw new Error(
        `${why}, and building failed, so the CLI tests cannot run from dist/ (fix the build, then npm run build):\n` +
          `${build.stdout}${build.stderr}`,
      );
    }
  });
}

function copyBuild(): void {
  removeLeftCopies();
  // A build under way elsewhere leaves no dist/ for a moment: wait it out.
  for (let attempt = 1; ; attempt++) {
    try {
      rmSync(COPY, { recursive: true, force: true });
      cpSync(BUILD, COPY, { recursive: true });
      if (existsSync(join(COPY, "cli", "main.js"))) break;
    } catch (err) {
      if (attempt >= 50) throw err;
    }
    if (attempt >= 50) throw new Error(`no CLI in ${BUILD}: run npm run build`);
    sleepSync(200);
  }
  process.on("exit", () => rmSync(COPY, { recursive: true, force: true }));
}

/** Copies of test processes that died without removing theirs. */
function removeLeftCopies(): void {
  for (const name of existsSync(SCRATCH) ? readdirSync(SCRATCH) : []) {
    const pid = /^test-cli-(\d+)$/.exec(name)?.[1];
    if (pid !== undefined && !isRunning(Number(pid))) rmSync(join(SCRATCH, name), { recursive: true, force: true });
  }
}

function isRunning(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === "EPERM";
  }
}

function withBuildLock(body: () => void): void {
  mkdirSync(SCRATCH, { recursive: true });
  for (;;) {
    try {
      mkdirSync(BUILD_LOCK);
      break;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== "EEXIST") throw err;
      if (lockAge() > STALE_LOCK_MS) rmSync(BUILD_LOCK, { recursive: true, force: true });
      else sleepSync(200);
    }
  }
  try {
    body();
  } finally {
    rmSync(BUILD_LOCK, { recursive: true, force: true });
  }
}

function lockAge(): number {
  try {
    return Date.now() - statSync(BUILD_LOCK).mtimeMs;
  } catch {
    return 0;
  }
}

/** Blocks: the check runs where a test starts a process, which is synchronous. */
function sleepSync(ms: number): void {
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
}

function newestFile(dir: string): { path: string; mtimeMs: number } | undefined {
  let newest: { path: string; mtimeMs: number } | undefined;
  for (const entry of readdirSync(dir, { withFileTypes: true, recursive: true })) {
    if (!entry.isFile()) continue;
    const path = join(entry.parentPath ?? entry.path, entry.name);
    const { mtimeMs } = statSync(path);
    if (!newest || mtimeMs > newest.mtimeMs) newest = { path, mtimeMs };
  }
  return newest;
}

/** The oldest file of the build: the build is as old as its first file written. */
function oldestMtime(dir: string): number | undefined {
  let oldest: number | undefined;
  try {
    for (const entry of readdirSync(dir, { withFileTypes: true, recursive: true })) {
      if (!entry.isFile()) continue;
      const { mtimeMs } = statSync(join(entry.parentPath ?? entry.path, entry.name));
      if (oldest === undefined || mtimeMs < oldest) oldest = mtimeMs;
    }
  } catch {
    return undefined;
  }
  return oldest;
}
