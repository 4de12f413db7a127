// etcdLeader.metrics() on prom-client, against real stores (etcd v2, etcd v3,
// NATS KV): the leader and its follower each have their series, the sum of
// is_leader over the election is 1, renewals are counted and timed, a change
// of leader is counted on both sides and moves is_leader and the fencing
// token, a stopped member's series go, and close() unregisters everything.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { Kvm } from "@nats-io/kv";
import * as prom from "prom-client";
import etcdLeader = require("../../src/index");
import { natsLeader } from "../../src/nats";
import { exitWhenDone, useCleanup, useEtcd, useNats, useStoreClients } from "../kit/hooks";
import { waitFor } from "../kit/waiting";

const BOUND_MS = 15_000;
const TIMING = { refreshInterval: 300, retryInitialDelay: 50, retryMaxDelay: 200 };
const etcd = useEtcd();
const clients = useStoreClients(etcd);
const cleanup = useCleanup();
exitWhenDone();
const nats = useNats();
let keys = 0;

/** Two members of one election, "a" elected first. */
type Pair = [etcdLeader.Election, etcdLeader.Election];
const STORES: Record<string, () => Promise<Pair>> = {
  "etcd v2": () => etcdPair("v2"),
  "etcd v3": () => etcdPair("v3"),
  "NATS KV": async () => {
    const kv = await new Kvm(nats.connection).create(`metrics_${++keys}`, { ttl: 2_000, history: 1 });
    return [await natsLeader(kv, "leader", "a", TIMING), await natsLeader(kv, "leader", "b", TIMING)];
  },
};

async function etcdPair(api: "v2" | "v3"): Promise<Pair> {
  const key = `/metrics-${api}/${++keys}`;
  return [
    etcdLeader({ client: clients.create(api), key, name: "a", ttl: 2, ...TIMING }),
    etcdLeader({ client: clients.create(api), key, name: "b", ttl: 2, ...TIMING }),
  ];
}

/** The value of one series in the registry's text, or undefined if it is not there. */
async function value(registry: prom.Registry, metric: string, labels: Record<string, string>): Promise<number | undefined> {
  const wanted = Object.entries(labels).map(([k, v]) => `${k}="${v}"`);
  for (const line of (await registry.metrics()).split("\n")) {
    if (!line.startsWith(`${metric}{`)) continue;
    const body = line.slice(metric.length + 1, line.indexOf("}"));
    if (wanted.every((pair) => body.split(",").includes(pair))) return Number(line.slice(line.lastIndexOf(" ") + 1));
  }
  return undefined;
}

for (const [store, pair] of Object.entries(STORES)) {
  describe(`metrics on prom-client, ${store}`, () => {
    it("counts terms, renewals and round trips per member, the sum of is_leader is 1, and a stopped member's series go", async () => {
      const registry = new prom.Registry();
      const metrics = etcdLeader.metrics({ register: registry, client: prom });
      cleanup.push(() => metrics.close());
      const [a, b] = await pair();
      for (const election of [a, b]) {
        election.on("error", () => undefined);
        cleanup.push(() => election.leave());
      }
      a.start();
      await waitFor("a to lead", BOUND_MS, () => a.isLeader());
      b.start();
      await waitFor("b to follow", BOUND_MS, () => b.currentLeader() === "a");
      const election = (a.health().store);
      const of = (member: string) => ({ election, member });
      await waitFor("a renewal of a's counted", BOUND_MS, async () => ((await value(registry, "etcd_leader_renewals_total", of("a"))) ?? 0) > 0);
      assert.equal(await value(registry, "etcd_leader_is_leader", of("a")), 1);
      assert.equal(await value(registry, "etcd_leader_is_leader", of("b")), 0);
      assert.equal(await value(registry, "etcd_leader_fencing_token", of("a")), a.fencingToken());
      assert.equal(await value(registry, "etcd_leader_state", { ...of("b"), state: "following" }), 1);
      assert.equal(await value(registry, "etcd_leader_leadership_changes_total", { ...of("a"), change: "elected" }), 1);
      assert.ok(((await value(registry, "etcd_leader_renewal_seconds_count", of("a"))) ?? 0) > 0);
      const age = await value(registry, "etcd_leader_last_renewal_age_seconds", of("a"));
      assert.ok(age !== undefined && age >= 0 && age < 2, `age ${age}`);
      assert.ok(((await value(registry, "etcd_leader_time_to_first_term_seconds", of("a"))) ?? -1) >= 0);

      await a.leave();
      await waitFor("b to lead", BOUND_MS, () => b.isLeader());
      assert.equal(await value(registry, "etcd_leader_is_leader", of("b")), 1);
      assert.equal(await value(registry, "etcd_leader_fencing_token", of("b")), b.fencingToken());
      assert.equal(await value(registry, "etcd_leader_leadership_changes_total", { ...of("b"), change: "elected" }), 1);
      assert.equal(await value(registry, "etcd_leader_is_leader", of("a")), undefined, "a stopped member's series go");

      metrics.close();
      assert.doesNotMatch(await registry.metrics(), /etcd_leader_/);
    });
  });
}

describe("metrics() input", () => {
  it("refuses unknown options, a bad prefix, a registry that is not one, and bad buckets, naming them", () => {
    assert.throws(() => etcdLeader.metrics({ registry: new prom.Registry() } as object), { name: "TypeError", message: /unknown option "registry"/ });
    assert.throws(() => etcdLeader.metrics({ client: prom, prefix: "etcd-leader" }), { message: /prefix must be .* got "etcd-leader"/ });
    assert.throws(() => etcdLeader.metrics({ client: prom, register: {} }), { message: /register must be a prom-client Registry/ });
    assert.throws(() => etcdLeader.metrics({ client: prom, register: new prom.Registry(), renewalBuckets: [0] }), { message: /renewalBuckets/ });
  });

  it("two sets of metrics on two registries are independent, and one with its own prefix", async () => {
    const one = new prom.Registry();
    const two = new prom.Registry();
    const first = etcdLeader.metrics({ register: one, client: prom });
    const second = etcdLeader.metrics({ register: two, client: prom, prefix: "svc_leader_" });
    try {
      assert.match(await one.metrics(), /# HELP etcd_leader_is_leader/);
      assert.match(await two.metrics(), /# HELP svc_leader_is_leader/);
    } finally {
      first.close();
      second.close();
    }
  });
});
