// The `etcd-leader` command as a user gets it: `npm pack`, installed into a
// temporary directory (offline, from tarballs of the two runtime dependencies
// as they are in node_modules), run with `npx etcd-leader`. Uses the build in
// dist/ (npm test builds it first; run alone, the file builds it if src/ is newer).
import assert from "node:assert/strict";
import { execFileSync, spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { buildIfStale } from "../kit/built-cli";
import { startEtcd, type EtcdCluster } from "../kit/etcd-server";
import { REPO_ROOT } from "../kit/paths";

const RUNTIME_PACKAGES = [".", "./node_modules/debug", "./node_modules/ms", "./node_modules/eventemitter3"];

let dir: string;
let etcd: EtcdCluster;

function npm(args: string[], cwd: string): string {
  return execFileSync("npm", args, { cwd, encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] });
}

function npx(args: string[], env: NodeJS.ProcessEnv = {}) {
  return spawnSync("npx", ["--offline", "--no-install", "etcd-leader", ...args], {
    cwd: dir,
    encoding: "utf8",
    env: { ...process.env, ...env },
    timeout: 60_000,
  });
}

before(async () => {
  buildIfStale();
  dir = mkdtempSync(join(tmpdir(), "etcd-leader-pack-"));
  const tarballs = RUNTIME_PACKAGES.map((p) => npm(["pack", "--silent", "--pack-destination", dir, p], REPO_ROOT).trim().split("\n").at(-1)!);
  writeFileSync(join(dir, "package.json"), JSON.stringify({ name: "cli-user", version: "1.0.0", private: true }));
  npm(["install", "--offline", "--no-audit", "--no-fund", ...tarballs.map((t) => `./${t}`)], dir);
  etcd = await startEtcd();
});

after(async () => {
  await etcd?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe("the etcd-leader command from the packed tarball", { timeout: 120_000 }, () => {
  it("npx etcd-leader --help works", () => {
    const result = npx(["--help"]);
    assert.equal(result.status, 0, result.stderr);
    assert.match(result.stdout, /^etcd-leader: leader election from the command line/);
    const bin = statSync(join(dir, "node_modules", "etcd-leader", "dist", "cjs", "cli", "main.js"));
    assert.ok(bin.mode & 0o100, "the bin file is executable");
  });

  it("without the etcd3 client installed, says how to install it (exit 69)", () => {
    const result = npx(["who", "--endpoints", etcd.clientUrls[0]!, "/k"]);
    assert.equal(result.status, 69, result.stderr);
    assert.match(result.stderr, /the etcd3 client is not installed.*npm install etcd3/);
    assert.doesNotMatch(result.stderr, /^\s+at /m);
  });

  it("--backend nats without the NATS client installed says how to install it (exit 69)", () => {
    // Checked before any connection is made: no server is needed.
    const result = npx(["who", "--backend", "nats", "--bucket", "leaders", "k"]);
    assert.equal(result.status, 69, result.stderr);
    assert.match(result.stderr, /the @nats-io\/transport-node client is not installed, and --backend nats needs it.*npm install @nats-io\/transport-node @nats-io\/kv/);
    assert.doesNotMatch(result.stderr, /^\s+at /m);
  });

  it("with a client beside it, runs a command as leader (the built orphan guard included) and exits with its code", () => {
    // The repository's etcd3, as if installed beside etcd-leader.
    const env = { NODE_PATH: join(REPO_ROOT, "node_modules") };
    const result = npx(["run", "--endpoints", etcd.clientUrls[0]!, "--ttl", "2", "/cli-package/run", "--", "sh", "-c", 'echo "token $ETCD_LEADER_TOKEN"; exit 5'], env);
    assert.equal(result.status, 5, result.stderr);
    assert.match(result.stdout, /^token \d+$/m);
    assert.match(result.stderr, /leads \/cli-package\/run \(fencing token \d+\)/);
    const who = npx(["who", "--endpoints", etcd.clientUrls[0]!, "/cli-package/run"], env);
    assert.equal(who.status, 3, who.stdout + who.stderr);
  });
});
