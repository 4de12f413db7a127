// The waits of a campaign (src/election/store-calls.ts): a backend of the
// user's own is raced against the signal, since it may ignore it; one of
// this library's, which settles once its signal aborts, is waited on as it
// is, with no promise or listener of its own for as long as the wait lasts.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { ElectionBackend, Membership } from "../../src/contract/backend";
import { resolveOptions } from "../../src/election/options";
import { SETTLES_ON_ABORT, StoreCalls } from "../../src/election/store-calls";
import { EtcdV3Backend } from "../../src/stores/etcd-v3/recipe";
import { systemClock } from "../../src/util/clock";
import { EtcdV3Store } from "../sim/stores/etcd-v3";

/** A backend whose every method is left to the test: only what wait() reads of it matters here. */
function backend(marked: boolean): ElectionBackend<Membership> {
  const methods = {} as ElectionBackend<Membership>;
  return marked ? Object.assign(Object.create({ [SETTLES_ON_ABORT]: true }), methods) : methods;
}

const never = () => new Promise<never>(() => undefined);

describe("a campaign's waits on its backend", () => {
  it("race a backend that may ignore its signal, and end when the signal aborts", async () => {
    const calls = new StoreCalls(backend(false), "m", resolveOptions(10), systemClock);
    const controller = new AbortController();
    const waiting = calls.wait("wait", never, controller.signal);
    controller.abort(new Error("stopped"));
    await assert.rejects(waiting, /stopped/);
  });

  it("wait on a backend that settles on abort as it is: the backend's own promise, not a race", async () => {
    const calls = new StoreCalls(backend(true), "m", resolveOptions(10), systemClock);
    const own = never();
    const controller = new AbortController();
    assert.equal(calls.wait("wait", () => own, controller.signal), own);
  });

  it("take the etcd v3 recipe at its word", () => {
    const recipe = new EtcdV3Backend(new EtcdV3Store(), "/election", "m", 10);
    const calls = new StoreCalls(recipe, "m", resolveOptions(10), systemClock);
    const own = never();
    assert.equal(calls.wait("wait", () => own, new AbortController().signal), own);
  });
});
