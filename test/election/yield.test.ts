// election.yield() against real stores (etcd v2, etcd v3, NATS KV): the
// leader's term ends (its routine's signal aborts with a
// LeadershipYieldedError), the next member leads, and the one that yielded
// stays in the election behind it, its routine to run again in its next
// term; a member alone leads again with a new term; yielding when not
// leading does nothing, and bad input is refused.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { Kvm } from "@nats-io/kv";
import etcdLeader = require("../../src/index");
import { natsLeader } from "../../src/nats";
import { exitWhenDone, useCleanup, useEtcd, useNats, useStoreClients } from "../kit/hooks";
import { waitFor, withDeadline } from "../kit/waiting";

const BOUND_MS = 15_000;
const etcd = useEtcd();
const clients = useStoreClients(etcd);
const cleanup = useCleanup();
exitWhenDone();
const nats = useNats();
let keys = 0;

type Make = (names: string[]) => Promise<etcdLeader.Election[]>;
const STORES: Record<string, Make> = {
  "etcd v2": (names) => etcdMembers("v2", names),
  "etcd v3": (names) => etcdMembers("v3", names),
  "etcd v3, each member on a session of its own": async (names) => {
    const key = `/yield-session/${++keys}`;
    return names.map((name) => {
      const session = etcdLeader.session(clients.create("v3"), { ttl: 3 });
      cleanup.push(() => session.close());
      return session.election(key, name);
    });
  },
  "NATS KV": async (names) => {
    const kv = await new Kvm(nats.connection).create(`yield_${++keys}`, { ttl: 3_000, history: 1 });
    return Promise.all(names.map((name) => natsLeader(kv, "leader", name)));
  },
};

async function etcdMembers(api: "v2" | "v3", names: string[]): Promise<etcdLeader.Election[]> {
  const key = `/yield-${api}/${++keys}`;
  return names.map((name) => etcdLeader({ client: clients.create(api), key, name, ttl: 3 }));
}

function started(elections: etcdLeader.Election[]): etcdLeader.Election[] {
  for (const election of elections) {
    election.on("error", () => undefined);
    cleanup.push(() => election.leave());
  }
  return elections;
}

for (const [store, make] of Object.entries(STORES)) {
  describe(`yield(), ${store}`, () => {
    it("hands the term to the next member and stays in the election behind it; the routine runs again in its next term", async () => {
      const [a, b] = started(await make(["a", "b"])) as [etcdLeader.Election, etcdLeader.Election];
      const runs: Array<{ token: number; ended?: string }> = [];
      const scope = a.whileLeading(({ signal, token }) => {
        const run: { token: number; ended?: string } = { token };
        runs.push(run);
        return new Promise<void>((resolve) => signal.addEventListener("abort", () => {
          run.ended = (signal.reason as Error).name;
          resolve();
        }));
      });
      scope.catch(() => undefined);
      await waitFor("a to lead", BOUND_MS, () => a.isLeader());
      b.start();
      await waitFor("b to follow a", BOUND_MS, () => b.currentLeader() === "a");
      const unelected = new Promise<void>((resolve) => a.once("unelected", () => resolve()));
      await withDeadline(a.yield(), BOUND_MS, "a's yield");
      await withDeadline(unelected, BOUND_MS, "a's unelected");
      assert.equal(a.currentLeader(), "b", "a follows b once yield() resolved");
      await waitFor("b to lead", BOUND_MS, () => b.isLeader());
      assert.equal(a.isRunning(), true, "a is still in the election");
      assert.deepEqual(runs.map((r) => r.ended), ["LeadershipYieldedError"]);
      const line = await b.candidates();
      assert.deepEqual(line.members.map((m) => m.name), line.scope === "line" ? ["b", "a"] : ["b"]);

      await b.leave();
      await waitFor("a to lead again", BOUND_MS, () => a.isLeader());
      await waitFor("a's routine to run again", BOUND_MS, () => runs.length === 2);
      assert.ok(runs[1]!.token > runs[0]!.token, "a new term, a larger token");
    });

    it("a member alone leads again after yielding, with a new term", async () => {
      const [a] = started(await make(["alone"])) as [etcdLeader.Election];
      a.start();
      await waitFor("it to lead", BOUND_MS, () => a.isLeader());
      const before = a.fencingToken()!;
      await withDeadline(a.yield(), BOUND_MS, "the yield");
      assert.equal(a.isLeader(), true);
      assert.ok(a.fencingToken()! > before, `token ${a.fencingToken()} after ${before}`);
    });

    it("does nothing for a member that does not lead; refuses a bad signal; rejects if the election stops first", async () => {
      const [a, b] = started(await make(["a", "b"])) as [etcdLeader.Election, etcdLeader.Election];
      await a.yield(); // not running
      a.start();
      await waitFor("a to lead", BOUND_MS, () => a.isLeader());
      b.start();
      await waitFor("b to follow", BOUND_MS, () => b.currentLeader() === "a");
      await b.yield();
      assert.equal(a.isLeader(), true, "a follower's yield changes nothing");
      await assert.rejects(a.yield({ signal: "now" as unknown as AbortSignal }), { name: "TypeError", message: /yield\(\): signal must be an AbortSignal/ });
      await assert.rejects(a.yield({ signal: AbortSignal.abort() }), { name: "AbortError" });
      assert.equal(a.isLeader(), true, "refused input changes nothing");
      const yielding = a.yield();
      a.stop();
      await assert.rejects(yielding, { name: "AbortError" });
    });
  });
}
