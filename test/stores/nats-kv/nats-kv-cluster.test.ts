// NATS KV elections on a bucket replicated on three nats-servers (2.9.10, on
// loopback): what natsLeader refuses there, and the change of leader after a
// clean stop, where two members could both win a race over the delete marker
// with updates conditioned on its revision (nats-kv-cluster-facts.test.ts);
// on such a bucket the members wait the marker out and create the key.
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { Kvm, type KV } from "@nats-io/kv";
import type { Election } from "../../../src/election/election";
import { natsLeader, type NatsKvBucket } from "../../../src/nats";
import { startNatsCluster, type NatsCluster } from "../../kit/nats-cluster";
import { exitOrFail, waitFor } from "../../kit/waiting";

/** Short, as each change of leader waits out the marker the stop left. */
const TTL_MS = 1_000;
const KEY = "leader";
/** Clean stops in a row, each followed by a race of the members left and one that joins. */
const ROUNDS = 8;
const BOUND_MS = 15_000;

let cluster: NatsCluster;
/** One connection to each server, staying with it: members reach the stream's leader through different servers. */
let connections: NatsConnection[] = [];
const elections = new Set<Election>();
let buckets = 0;

before(async () => {
  cluster = await startNatsCluster(3);
  connections = await Promise.all(cluster.urls.map((url) => connect({ servers: url, ignoreClusterUpdates: true })));
});

after(async () => {
  await Promise.all([...elections].map((election) => election.leave().catch(() => undefined)));
  await Promise.all(connections.map((connection) => connection.close().catch(() => undefined)));
  await cluster?.close();
  exitOrFail();
});

/** A fresh R3 bucket, and its handle through each server. */
async function replicatedBucket(): Promise<KV[]> {
  const name = `cluster${++buckets}`;
  await new Kvm(connections[0]!).create(name, { ttl: TTL_MS, history: 1, replicas: 3 });
  await cluster.waitStreamCurrent(`KV_${name}`);
  return Promise.all(connections.map((connection) => new Kvm(connection).open(name)));
}

interface Member {
  name: string;
  election: Election;
  /** Its terms: when it said elected and, once over, unelected (performance.now()), and the token. */
  terms: Array<{ from: number; to: number; token: number }>;
}

async function member(kv: KV, name: string): Promise<Member> {
  const election = await natsLeader(kv, KEY, name);
  const terms: Member["terms"] = [];
  election.on("elected", (token) => terms.push({ from: performance.now(), to: Infinity, token }));
  election.on("unelected", () => {
    const term = terms.at(-1);
    if (term && term.to === Infinity) term.to = performance.now();
  });
  elections.add(election);
  election.start();
  return { name, election, terms };
}

async function oneLeader(members: Member[], what: string): Promise<Member> {
  const [leader] = await waitFor(what, BOUND_MS, () => {
    const now = members.filter((m) => m.election.isLeader());
    assert.ok(now.length <= 1, `two leaders at once: ${now.map((m) => m.name).join(", ")}`);
    return now.length === 1 ? now : undefined;
  });
  return leader!;
}

describe("NATS KV elections on a bucket with three replicas (three nats-servers 2.9)", () => {
  it("natsLeader refuses goMembers there, naming the bucket, its replicas and the server's version", async () => {
    const [kv] = await replicatedBucket();
    const version = connections[0]!.info?.version;
    await assert.rejects(natsLeader(kv!, KEY, "a", { goMembers: true }), (err: Error) => {
      assert.ok(err instanceof RangeError, `a ${err.name}: ${err.message}`);
      assert.match(err.message, new RegExp(`the bucket "cluster\\d+" has 3 replicas \\(nats-server ${version}\\), and goMembers is true`));
      return true;
    });
  });

  it("natsLeader refuses there a handle that cannot purge the key or create it only if absent", async () => {
    const [kv] = await replicatedBucket();
    // A wrapper of the user's own, with the KV calls and nothing else.
    const wrapper: NatsKvBucket = {
      create: (key, value) => kv!.create(key, value),
      update: (key, value, revision) => kv!.update(key, value, revision),
      delete: (key, options) => kv!.delete(key, options),
      get: (key) => kv!.get(key),
      watch: (options) => kv!.watch(options),
      status: () => kv!.status(),
    };
    await assert.rejects(natsLeader(wrapper, KEY, "a"), (err: Error) => {
      assert.ok(err instanceof TypeError, `a ${err.name}: ${err.message}`);
      assert.match(err.message, /has 3 replicas: .*cannot send \(it lacks put, jsm, stream or subjectForKey\)/);
      return true;
    });
  });

  it(`after each of ${ROUNDS} clean stops, with members on all three servers racing for the key, one member leads, with a larger token`, async (t) => {
    const kv = await replicatedBucket();
    let joined = 0;
    const join = () => member(kv[joined % kv.length]!, `m${joined++}`);
    const everyone = await Promise.all([join(), join(), join()]);
    let running = [...everyone];
    for (let round = 0; round < ROUNDS; round++) {
      const leader = await oneLeader(running, `a leader in round ${round + 1}`);
      await leader.election.leave();
      running = running.filter((m) => m !== leader);
      const newcomer = await join();
      everyone.push(newcomer);
      running.push(newcomer);
    }
    await oneLeader(running, "a leader after the last round");
    const terms = everyone.flatMap((m) => m.terms.map((term) => ({ ...term, name: m.name }))).sort((a, b) => a.from - b.from);
    for (let i = 1; i < terms.length; i++) {
      const [before, next] = [terms[i - 1]!, terms[i]!];
      assert.ok(before.to <= next.from, `${before.name} (token ${before.token}) still led when ${next.name} (token ${next.token}) was elected`);
      assert.ok(next.token > before.token, `tokens ${before.token} then ${next.token}`);
    }
    t.diagnostic(`${terms.length} terms, tokens ${terms.map((term) => term.token).join(", ")}`);
  });
});
