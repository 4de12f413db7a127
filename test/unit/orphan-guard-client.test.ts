// The CLI's side of the orphan guard: what it remembers of the lease deadline
// it sends, and of the groups it watches. The guard's stopping of commands,
// with the CLI frozen or killed, is in cli-freeze.test.ts and
// cli-process-group.test.ts.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { describe, it } from "node:test";
import { OrphanGuard } from "../../src/cli/supervise/orphan-guard-client";
import { livingInGroups } from "../fixtures/process-table.cjs";
import { waitFor } from "../kit/waiting";

describe("the orphan guard's client", () => {
  it("knows when the lease deadline it last sent has passed, and that none runs outside a term", () => {
    const guard = OrphanGuard.start();
    try {
      assert.equal(guard.leaseRanOut(), false, "before any term");
      guard.lease(Date.now() + 60_000);
      assert.equal(guard.leaseRanOut(), false, "a deadline a minute away");
      guard.lease(Date.now() - 1);
      assert.equal(guard.leaseRanOut(), true, "a deadline just passed");
      guard.lease(undefined);
      assert.equal(guard.leaseRanOut(), false, "after the term");
    } finally {
      guard.close();
    }
  });

  it("closed while a group it watches still runs, it leaves the guard to stop that group, as for a CLI that died", async () => {
    const guard = OrphanGuard.start();
    const group = spawn("sleep", ["30"], { detached: true, stdio: "ignore" });
    try {
      guard.watch(group.pid!, "SIGTERM", 1_000);
      guard.close();
      await waitFor("the guard to stop the group", 10_000, () => livingInGroups([group.pid!]).length === 0);
    } finally {
      group.kill("SIGKILL");
    }
  });
});
