// Elections on a store of the user's own, through the published entry point:
// a backend is checked when it is passed in, and docs/backends.md shows the
// in-memory backend (examples/in-memory-backend.ts) verbatim. That backend's
// elections (one leader, hand-overs, step-down, observers) run in the
// conformance suite (test/contract/conformance-in-memory.test.ts).
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";
import etcdLeader = require("etcd-leader");
import { MemoryBackend, MemoryStore } from "../../examples/in-memory-backend";
import { withDeadline } from "../kit/waiting";
import { REPO_ROOT } from "../kit/paths";

describe("an election on a backend of the user's own", () => {
  it("refuses an object that is not a backend, naming what is missing", () => {
    assert.throws(
      () => etcdLeader.withBackend({ awaitTurn() {} } as never, "a"),
      /backend must implement ElectionBackend: missing renew, awaitLoss, leave, observe, readLeader/,
    );
  });

  it("docs/backends.md shows the example backend as it is", () => {
    const readme = readFileSync(join(REPO_ROOT, "docs", "backends.md"), "utf8");
    const example = readFileSync(join(REPO_ROOT, "examples", "in-memory-backend.ts"), "utf8");
    assert.ok(readme.includes("```ts\n" + example + "```"), "docs/backends.md's copy of examples/in-memory-backend.ts differs");
  });

  it("the example backend, handed back the claim it holds, resolves with it, and throws once the store dropped it", async () => {
    const store = new MemoryStore();
    const backend: etcdLeader.ElectionBackend = new MemoryBackend(store, "a", 60_000);
    const signal = AbortSignal.timeout(5_000);
    const claim = await backend.awaitTurn(undefined, () => undefined, signal);
    // Still ours: the same claim back at once, without a new write to the key.
    const again = await withDeadline(backend.awaitTurn(claim, () => undefined, signal), 1_000, "awaitTurn with the held claim");
    assert.equal(again, claim);
    assert.equal(store.revision, claim.token);
    // Gone, and the key taken by another: lost, never a race against it.
    store.set(undefined);
    await new MemoryBackend(store, "b", 60_000).awaitTurn(undefined, () => undefined, signal);
    await assert.rejects(backend.awaitTurn(claim, () => undefined, signal), etcdLeader.MembershipLostError);
  });
});
