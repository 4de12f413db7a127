// Health probes against real stores (etcd v2, etcd v3, NATS KV), over HTTP
// through etcdLeader.healthHandler() on a node:http server: a leader and a
// follower are both ready by default, only the leader with readiness
// "leader"; a leader cut off from its store (through a fault proxy) turns not
// live once it has failed for longer than the bound, and live again once the
// store answers after the heal.
import assert from "node:assert/strict";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { describe, it } from "node:test";
import { connect } from "@nats-io/transport-node";
import { Kvm } from "@nats-io/kv";
import etcdLeader = require("../../src/index");
import { natsLeader } from "../../src/nats";
import { FaultProxy } from "../kit/fault-proxy";
import { exitWhenDone, useCleanup, useEtcd, useNats, useStoreClients } from "../kit/hooks";
import { waitFor } from "../kit/waiting";

const BOUND_MS = 20_000;
/** The probes' bound on failing: short, so that a cut leader turns not live within the test. */
const UNHEALTHY_AFTER_MS = 1_500;
/** Fast timings, so that a cut leader's renewals fail within a second. */
const TIMING = { ttl: 3, refreshInterval: 500, requestTimeout: 400, retryInitialDelay: 100, retryMaxDelay: 300 };

const etcd = useEtcd();
const clients = useStoreClients(etcd);
const cleanup = useCleanup();
exitWhenDone();
const nats = useNats();
let keys = 0;

interface Pair {
  leader: etcdLeader.Election;
  follower: etcdLeader.Election;
  /** Between the leader and its store. */
  proxy: FaultProxy;
}

async function proxyTo(upstream: string | string[]): Promise<FaultProxy> {
  const proxy = await FaultProxy.start({ upstream });
  cleanup.push(() => proxy.close());
  return proxy;
}

const STORES: Record<string, () => Promise<Pair>> = {
  "etcd v2": () => etcdPair("v2"),
  "etcd v3": () => etcdPair("v3"),
  "NATS KV": natsPair,
};

async function etcdPair(api: "v2" | "v3"): Promise<Pair> {
  const proxy = await proxyTo(etcd.hostPorts);
  const key = `/health-${api}/${++keys}`;
  const leader = etcdLeader({ client: clients.create(api, [proxy.hostPort]), key, name: "a", ...TIMING });
  const follower = etcdLeader({ client: clients.create(api), key, name: "b", ...TIMING });
  return started(leader, follower, proxy);
}

async function natsPair(): Promise<Pair> {
  const proxy = await proxyTo(`127.0.0.1:${nats.server.port}`);
  const viaProxy = await connect({ servers: proxy.hostPort, reconnectTimeWait: 100, maxReconnectAttempts: -1 });
  const direct = await connect({ servers: nats.server.url });
  cleanup.push(() => Promise.all([viaProxy.close(), direct.close()]));
  const bucket = `health_${++keys}`;
  await new Kvm(direct).create(bucket, { ttl: TIMING.ttl * 1000, history: 1 });
  const { ttl: _ttl, ...timing } = TIMING;
  const leader = await natsLeader(await new Kvm(viaProxy).open(bucket), "leader", "a", timing);
  const follower = await natsLeader(await new Kvm(direct).open(bucket), "leader", "b", timing);
  return started(leader, follower, proxy);
}

async function started(leader: etcdLeader.Election, follower: etcdLeader.Election, proxy: FaultProxy): Promise<Pair> {
  for (const election of [leader, follower]) {
    election.on("error", () => undefined);
    cleanup.push(() => election.leave());
  }
  leader.start();
  await waitFor("a to lead", BOUND_MS, () => leader.isLeader());
  follower.start();
  await waitFor("b to follow a", BOUND_MS, () => follower.currentLeader() === "a");
  return { leader, follower, proxy };
}

async function serve(handler: etcdLeader.HealthRequestHandler): Promise<string> {
  const server: Server = createServer((req, res) => handler(req, res, () => {
    res.statusCode = 418;
    res.end("next");
  }));
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  cleanup.push(() => new Promise((resolve) => server.close(resolve)));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

async function probe(url: string): Promise<{ status: number; body: etcdLeader.HealthAnswer }> {
  const response = await fetch(url, { signal: AbortSignal.timeout(5_000) });
  return { status: response.status, body: (await response.json()) as etcdLeader.HealthAnswer };
}

for (const [store, pair] of Object.entries(STORES)) {
  describe(`health probes, ${store}`, () => {
    it("answers /livez and /readyz: both members ready by default, only the leader with readiness \"leader\"", async () => {
      const { leader, follower } = await pair();
      const byDefault = await serve(etcdLeader.healthHandler([leader, follower]));
      const leaderOnly = await serve(etcdLeader.healthHandler(follower, { readiness: "leader" }));
      const live = await probe(`${byDefault}/livez`);
      assert.equal(live.status, 200);
      assert.deepEqual(live.body.elections.map((e) => [e.name, e.state, e.ok]), [["a", "leading", true], ["b", "following", true]]);
      const ready = await probe(`${byDefault}/readyz`);
      assert.equal(ready.status, 200);
      assert.equal(ready.body.status, "ok");
      const followerReady = await probe(`${leaderOnly}/readyz`);
      assert.equal(followerReady.status, 503);
      assert.equal(followerReady.body.status, "fail");
      assert.match(followerReady.body.elections[0]!.reason, /a leads; readiness "leader"/);
      assert.equal((await fetch(`${byDefault}/metrics`)).status, 418, "another path goes to next");
      const head = await fetch(`${leaderOnly}/readyz`, { method: "HEAD" });
      assert.equal(head.status, 503);
      assert.equal(await head.text(), "");
      assert.equal((await fetch(`${byDefault}/livez`, { method: "POST" })).status, 405);
    });

    it("a leader cut off from the store turns not live past the bound, and live again once the store answers", async () => {
      const { leader, follower, proxy } = await pair();
      const url = await serve(etcdLeader.healthHandler(leader, { unhealthyAfter: UNHEALTHY_AFTER_MS }));
      assert.equal((await probe(`${url}/livez`)).status, 200);
      proxy.setMode("reset");
      const failing = await waitFor("the cut leader to fail its probe", BOUND_MS, async () => {
        const answer = await probe(`${url}/livez`);
        return answer.status === 503 ? answer : undefined;
      }, { every: 200 });
      const [verdict] = failing.body.elections;
      assert.ok(verdict!.failingForMs >= UNHEALTHY_AFTER_MS, `failing for ${verdict!.failingForMs} ms`);
      assert.match(verdict!.reason, /failing for .* past the 1\.5 s bound: restart this member/);
      await waitFor("the cut leader to step down", BOUND_MS, () => !leader.health().leading);
      await waitFor("the follower to take over", BOUND_MS, () => follower.isLeader());
      proxy.setMode("pass");
      await waitFor("the healed member's probe to pass again", BOUND_MS, async () => (await probe(`${url}/livez`)).status === 200, { every: 200 });
      assert.equal(leader.health().failingForMs, 0);
    });
  });
}

describe("healthHandler() input", () => {
  it("refuses what is not an election, and bad options, when it is made", () => {
    assert.throws(() => etcdLeader.healthHandler({} as etcdLeader.Election), { name: "TypeError", message: /has no health\(\) method/ });
    assert.throws(() => etcdLeader.healthHandler([{} as etcdLeader.Election]), { name: "TypeError", message: /elections\[0\] has no health\(\) method/ });
    assert.throws(() => etcdLeader.healthHandler([], { readiness: "all" as "leader" }), { name: "RangeError", message: /healthHandler\(\): readiness/ });
  });

  it("with no election, /livez passes and /readyz fails", async () => {
    const url = await serve(etcdLeader.healthHandler(() => []));
    assert.equal((await probe(`${url}/livez`)).status, 200);
    assert.equal((await probe(`${url}/readyz`)).status, 503);
  });
});
