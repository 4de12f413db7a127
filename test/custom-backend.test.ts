// Elections on a store of the user's own, through the published entry point:
// a backend is checked when it is passed in, and the README shows the
// in-memory backend (examples/in-memory-backend.ts) verbatim. That backend's
// elections (one leader, hand-overs, step-down, observers) run in the
// conformance suite (test/conformance-in-memory.test.ts).
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";
import etcdLeader = require("etcd-leader");

describe("an election on a backend of the user's own", () => {
  it("refuses an object that is not a backend, naming what is missing", () => {
    assert.throws(
      () => etcdLeader.withBackend({ awaitTurn() {} } as never, "a"),
      /backend must implement ElectionBackend: missing renew, awaitLoss, leave, observe/,
    );
  });

  it("the README shows the example backend as it is", () => {
    const readme = readFileSync(join(__dirname, "..", "README.md"), "utf8");
    const example = readFileSync(join(__dirname, "..", "examples", "in-memory-backend.ts"), "utf8");
    assert.ok(readme.includes("```ts\n" + example + "```"), "README.md's copy of examples/in-memory-backend.ts differs");
  });
});
