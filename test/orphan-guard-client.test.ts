// The CLI's side of the orphan guard: what it remembers of the lease deadline
// it sends. The guard's stopping of commands, with the CLI frozen or killed,
// is in cli-freeze.test.ts.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { OrphanGuard } from "../src/cli/orphan-guard-client";

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
});
