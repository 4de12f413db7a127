// The drain before release, against real stores (etcd v2, etcd v3, NATS KV):
// stop() while leading aborts the whileLeading routine's signal at once, but
// gives the membership up only once the routine has settled (or the drain
// bound passed), so that the successor's routine never starts while ours
// still finishes; drainTimeout 0 gives it up at once, as before.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { Kvm } from "@nats-io/kv";
import etcdLeader = require("../../src/index");
import { natsLeader } from "../../src/nats";
import { exitWhenDone, useCleanup, useEtcd, useNats, useStoreClients } from "../kit/hooks";
import { waitFor, withDeadline } from "../kit/waiting";

const BOUND_MS = 15_000;
/** How long the routine takes to finish after its signal aborts. */
const CLEANUP_MS = 700;
const etcd = useEtcd();
const clients = useStoreClients(etcd);
const cleanup = useCleanup();
exitWhenDone();
const nats = useNats();
let keys = 0;

type Make = (options: etcdLeader.ElectionOptions) => Promise<[etcdLeader.Election, etcdLeader.Election]>;
const STORES: Record<string, Make> = {
  "etcd v2": (options) => etcdPair("v2", options),
  "etcd v3": (options) => etcdPair("v3", options),
  "NATS KV": async (options) => {
    const kv = await new Kvm(nats.connection).create(`drain_${++keys}`, { ttl: 3_000, history: 1 });
    return [await natsLeader(kv, "leader", "a", options), await natsLeader(kv, "leader", "b", options)];
  },
};

async function etcdPair(api: "v2" | "v3", options: etcdLeader.ElectionOptions): Promise<[etcdLeader.Election, etcdLeader.Election]> {
  const key = `/drain-${api}/${++keys}`;
  return [
    etcdLeader({ client: clients.create(api), key, name: "a", ttl: 3, ...options }),
    etcdLeader({ client: clients.create(api), key, name: "b", ttl: 3, ...options }),
  ];
}

/** a leads running a routine that finishes `cleanupMs` after its signal aborts (never, for Infinity); b waits with its own routine. */
async function leaderAndSuccessor(make: Make, options: etcdLeader.ElectionOptions, cleanupMs: number) {
  const [a, b] = await make(options);
  for (const election of [a, b]) {
    election.on("error", () => undefined);
    cleanup.push(() => election.leave());
  }
  const times: { aborted?: number; settled?: number; successorStarted?: number } = {};
  void a.whileLeading(({ signal }) =>
    new Promise<void>((resolve) =>
      signal.addEventListener("abort", () => {
        times.aborted = performance.now();
        if (cleanupMs !== Infinity) {
          setTimeout(() => {
            times.settled = performance.now();
            resolve();
          }, cleanupMs);
        }
      }),
    ),
  ).catch(() => undefined);
  await waitFor("a to lead", BOUND_MS, () => a.isLeader());
  void b.whileLeading(() => {
    times.successorStarted = performance.now();
  }).catch(() => undefined);
  await waitFor("b to follow a", BOUND_MS, () => b.currentLeader() === "a");
  return { a, b, times };
}

for (const [store, make] of Object.entries(STORES)) {
  describe(`the drain before release, ${store}`, () => {
    it("stop(): the routine's signal aborts at once, the successor's routine starts only after ours settled", async () => {
      const { a, times } = await leaderAndSuccessor(make, {}, CLEANUP_MS);
      const stoppedAt = performance.now();
      a.stop();
      assert.ok(times.aborted !== undefined && times.aborted - stoppedAt < 50, "the routine's signal aborted at once");
      assert.equal(a.isLeader(), false);
      assert.equal(a.isRunning(), false);
      await withDeadline(a.leave(), BOUND_MS, "a's leave after the drain");
      assert.ok(times.settled !== undefined, "leave() resolved after the routine settled");
      await waitFor("the successor's routine", BOUND_MS, () => times.successorStarted);
      assert.ok(times.successorStarted! >= times.settled, `successor started ${(times.successorStarted! - times.settled).toFixed(0)} ms after ours settled`);
    });

    it("a routine that never settles holds the membership until drainTimeout, then the successor takes over", async () => {
      const { a, times } = await leaderAndSuccessor(make, { drainTimeout: 600 }, Infinity);
      const stoppedAt = performance.now();
      a.stop();
      await waitFor("the successor's routine", BOUND_MS, () => times.successorStarted);
      assert.ok(times.successorStarted! - stoppedAt >= 550, `successor after ${(times.successorStarted! - stoppedAt).toFixed(0)} ms`);
    });

    it("drainTimeout 0 gives the membership up at once, whatever the routine still does", async () => {
      const { a, times } = await leaderAndSuccessor(make, { drainTimeout: 0 }, CLEANUP_MS * 4);
      a.stop();
      await waitFor("the successor's routine", BOUND_MS, () => times.successorStarted);
      assert.equal(times.settled, undefined, "the successor started while ours still ran: no drain");
    });
  });
}

describe("drainTimeout", () => {
  it("is checked as the other durations are", () => {
    assert.throws(() => etcdLeader({ client: clients.create("v3"), key: "/d", name: "n", drainTimeout: -1 }), { name: "RangeError", message: /drainTimeout must be a positive number .* got -1/ });
    assert.throws(() => etcdLeader({ client: clients.create("v3"), key: "/d", name: "n", drainTimeout: "1s" as unknown as number }), RangeError);
  });
});
