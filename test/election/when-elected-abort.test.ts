// whenElected() called off, in a process of its own: it rejects with an
// AbortError, gives its membership back, and leaves nothing that keeps the
// process alive (test/fixtures/abandoned-wait.ts exits only if so).
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { randomUUID } from "node:crypto";
import { join } from "node:path";
import { describe, it } from "node:test";
import { EtcdAdmin } from "../faults/etcd-admin";
import { BACKENDS } from "../faults/types";
import { exitWhenDone, useCleanup, useEtcd, useStoreClients } from "../kit/hooks";
import { waitFor } from "../kit/waiting";
import etcdLeader = require("../../src/index");
import { FIXTURES, REPO_ROOT } from "../kit/paths";

const PROBE = join(FIXTURES, "abandoned-wait.ts");
/** tsx start-up on a loaded 2-core machine, plus the wait itself. */
const EXIT_WITHIN_MS = 30_000;

const etcd = useEtcd();
const clients = useStoreClients(etcd);
const cleanup = useCleanup();
exitWhenDone();

for (const api of BACKENDS) {
  describe(`whenElected() called off, in a process of its own, etcd ${api} API`, () => {
    it("rejects with an AbortError, takes back its membership, and leaves nothing that keeps the process alive", { timeout: 60_000 }, async () => {
      const key = `/when-elected-abort-${api}/${randomUUID()}`;
      const leader = etcdLeader(clients.create(api), key, "m0", 2);
      cleanup.push(() => leader.leave());
      leader.start();
      await leader.whenElected();

      const probe = spawn(process.execPath, ["--import", "tsx", PROBE, api, etcd.hostPorts[0]!, key, "m1"], {
        cwd: REPO_ROOT,
        stdio: ["ignore", "pipe", "pipe"],
      });
      let output = "";
      probe.stdout.on("data", (chunk: Buffer) => (output += chunk.toString()));
      probe.stderr.on("data", (chunk: Buffer) => (output += chunk.toString()));
      const timer = setTimeout(() => probe.kill("SIGKILL"), EXIT_WITHIN_MS);
      const [code, signal] = await new Promise<[number | null, NodeJS.Signals | null]>((resolve) =>
        probe.once("close", (c, s) => resolve([c, s])),
      );
      clearTimeout(timer);
      assert.equal(signal, null, `the process did not exit by itself within ${EXIT_WITHIN_MS} ms:\n${output}`);
      assert.equal(code, 0, output);
      assert.match(output, /^rejected AbortError$/m);
      await waitFor("only m0's membership left", 5_000, async () => {
        const line = await new EtcdAdmin(api, etcd.hostPorts).line(key);
        return line.map((entry) => entry.name).join(",") === "m0" || undefined;
      });
    });
  });
}
