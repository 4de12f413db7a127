// node:diagnostics_channel messages, against a real etcd on both APIs: each
// documented channel delivers its documented message to a subscriber.
import assert from "node:assert/strict";
import { subscribe, unsubscribe } from "node:diagnostics_channel";
import { describe, it } from "node:test";
import etcdLeader = require("../../src/index");
import { BACKENDS } from "../faults/types";
import { exitWhenDone, useCleanup, useEtcd, useStoreClients } from "../kit/hooks";
import { FaultProxy } from "../kit/fault-proxy";
import { waitFor } from "../kit/waiting";

const TTL = 2;
const BOUND_MS = 15_000;

const etcd = useEtcd();
const clients = useStoreClients(etcd);
const cleanup = useCleanup();
exitWhenDone();
let keys = 0;

/** Every message published on `name` from now until the end of the test. */
function listen<T>(name: string): T[] {
  const messages: T[] = [];
  const onMessage = (message: unknown) => messages.push(message as T);
  subscribe(name, onMessage);
  cleanup.push(() => unsubscribe(name, onMessage));
  return messages;
}

describe("channel names", () => {
  it("are the documented ones", () => {
    assert.deepEqual(etcdLeader.channels, {
      state: "etcd-leader:state",
      renewal: "etcd-leader:renewal",
      retry: "etcd-leader:retry",
      error: "etcd-leader:error",
    });
  });
});

for (const api of BACKENDS) {
  describe(`diagnostics channels, etcd ${api} API`, () => {
    const uniqueKey = (label: string) => `/diagnostics-${api}/${label}-${++keys}`;

    function member(key: string, name: string, hosts?: string[], options: etcdLeader.ElectionOptions = {}): etcdLeader.Election {
      const election = etcdLeader({ client: clients.create(api, hosts), key, name, ttl: TTL, ...options });
      election.on("error", () => undefined);
      cleanup.push(() => election.leave());
      return election;
    }

    it("etcd-leader:state reports each change of state, with the token on leading", async () => {
      const states = listen<etcdLeader.StateMessage>(etcdLeader.channels.state);
      const key = uniqueKey("state");
      const election = member(key, "a").start();
      await waitFor("leading", BOUND_MS, () => election.isLeader());
      election.stop();
      const mine = states.filter((m) => m.source === election);
      assert.deepEqual(
        mine.map((m) => [m.from, m.to]),
        [["stopped", "joining"], ["joining", "following"], ["following", "leading"], ["leading", "stopped"]],
      );
      const lead = mine.find((m) => m.to === "leading")!;
      assert.equal(lead.token, election.fencingToken() ?? lead.token);
      assert.equal(typeof lead.token, "number");
      assert.equal(lead.member, "a");
      assert.ok(lead.store.includes(key), lead.store);
      assert.ok(mine.filter((m) => m.to !== "leading").every((m) => m.token === undefined));
    });

    it("etcd-leader:renewal reports each confirmed renewal with its round-trip time", async () => {
      const renewals = listen<etcdLeader.RenewalMessage>(etcdLeader.channels.renewal);
      const key = uniqueKey("renewal");
      const election = member(key, "a", undefined, { refreshInterval: 300 }).start();
      await waitFor("two renewals", BOUND_MS, () => renewals.filter((m) => m.source === election).length >= 2);
      const [first] = renewals.filter((m) => m.source === election);
      assert.equal(first!.member, "a");
      assert.ok(first!.membership.startsWith(api === "v2" ? key : `${key}/`), first!.membership);
      assert.ok(Number.isFinite(first!.roundTripMs) && first!.roundTripMs >= 0, `roundTripMs ${first!.roundTripMs}`);
      assert.equal(typeof first!.leading, "boolean");
      assert.ok(election.lastRenewedAt! >= Date.now() - BOUND_MS);
    });

    it("etcd-leader:error and etcd-leader:retry report a failed join, with the attempt and the delay before the next", async () => {
      const errors = listen<etcdLeader.ErrorMessage>(etcdLeader.channels.error);
      const retries = listen<etcdLeader.RetryMessage>(etcdLeader.channels.retry);
      // Nothing listens on port 9.
      const election = member(uniqueKey("unreachable"), "a", ["127.0.0.1:9"]).start();
      await waitFor("two retries", BOUND_MS, () => retries.filter((m) => m.source === election).length >= 2);
      const error = errors.find((m) => m.source === election)!;
      assert.ok(error.error instanceof etcdLeader.ElectionError);
      assert.equal(error.error.phase, "join");
      assert.equal(error.member, "a");
      const [first, second] = retries.filter((m) => m.source === election);
      assert.equal(first!.phase, "join");
      assert.deepEqual([first!.attempt, second!.attempt], [1, 2]);
      assert.ok(first!.delayMs > 0);
      assert.ok(first!.error !== undefined);
    });

    it("etcd-leader:retry reports a failed renewal, and an observer's failures come with member undefined", async () => {
      const retries = listen<etcdLeader.RetryMessage>(etcdLeader.channels.retry);
      const errors = listen<etcdLeader.ErrorMessage>(etcdLeader.channels.error);
      const proxy = await FaultProxy.start({ upstream: etcd.hostPorts });
      cleanup.push(() => proxy.close());
      const key = uniqueKey("renew-retry");
      const election = member(key, "a", [proxy.hostPort], { refreshInterval: 300 }).start();
      await waitFor("leading", BOUND_MS, () => election.isLeader());
      proxy.setMode("reset");
      await waitFor("a renewal retry", BOUND_MS, () => retries.some((m) => m.source === election && m.phase === "renew"));
      const renewRetry = retries.find((m) => m.source === election && m.phase === "renew")!;
      assert.ok(renewRetry.delayMs > 0 && renewRetry.attempt >= 1);
      assert.ok(errors.some((m) => m.source === election && m.error.phase === "renew"));

      const watching = etcdLeader.observe({ client: clients.create(api, ["127.0.0.1:9"]), key });
      watching.on("error", () => undefined);
      cleanup.push(() => watching.stop());
      watching.start();
      await waitFor("an observer retry", BOUND_MS, () => retries.some((m) => m.source === watching));
      const observed = retries.find((m) => m.source === watching)!;
      assert.equal(observed.phase, "observe");
      assert.equal(observed.member, undefined);
      assert.ok(errors.some((m) => m.source === watching && m.error.phase === "observe"));
    });
  });
}
