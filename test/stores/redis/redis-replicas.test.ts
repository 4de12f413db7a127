// The `replicas` option against a real primary and replica (redis-server 7,
// `--replicaof`): a member leads while its writes reach the replica (WAIT);
// a frozen replica makes its renewals count for nothing, so it steps down at
// its deadline, and leads again once the replica answers; asking for more
// replicas than there are wins nothing, and the key is given back; bad
// values are refused at once.
import assert from "node:assert/strict";
import { after, afterEach, before, describe, it } from "node:test";
import { Redis } from "ioredis";
import type { Election } from "../../../src/election/election";
import { redisLeader, type RedisElectionOptions } from "../../../src/redis";
import { startRedis, type RedisServer } from "../../kit/redis-server";
import { exitOrFail, waitFor } from "../../kit/waiting";

/** Generous: elections settle in milliseconds, but the machine is shared. */
const BOUND_MS = 10_000;
const TTL_SECONDS = 2;

let primary: RedisServer;
let replica: RedisServer;
const clients: Redis[] = [];
const elections = new Set<Election>();
let keys = 0;

before(async () => {
  primary = await startRedis();
  replica = await startRedis({ replicaOf: primary.port });
  // The replica has synced once the primary counts it.
  await waitFor("the replica to connect", BOUND_MS, async () => /connected_slaves:1/.test(await info(primary.url)) || undefined);
});

afterEach(async () => {
  replica.resume();
  await Promise.all([...elections].map((e) => e.leave()));
  elections.clear();
});

after(async () => {
  for (const client of clients) client.disconnect();
  await replica?.close();
  await primary?.close();
  exitOrFail();
});

function client(url = primary.url): Redis {
  const redis = new Redis(url, { retryStrategy: () => 50 });
  redis.on("error", () => undefined);
  clients.push(redis);
  return redis;
}

async function info(url: string): Promise<string> {
  return client(url).info("replication");
}

async function member(key: string, name: string, options: RedisElectionOptions): Promise<{ election: Election; errors: Error[] }> {
  const election = await redisLeader(client(), key, name, { ttl: TTL_SECONDS, ...options });
  const errors: Error[] = [];
  election.on("error", (err) => errors.push(err));
  elections.add(election);
  election.start();
  return { election, errors };
}

describe("Redis: wins and renewals that count once replicated (the replicas option)", () => {
  it("leads while the replica acknowledges; steps down when it stops answering; leads again after", async () => {
    const { election, errors } = await member(`replicated-${++keys}`, "a", { replicas: 1 });
    await waitFor("a to lead", BOUND_MS, () => election.isLeader() || undefined);
    replica.pause();
    const frozenAt = performance.now();
    await waitFor("a to step down", BOUND_MS, () => !election.isLeader() || undefined);
    const steppedDownAfter = performance.now() - frozenAt;
    // Its last counted renewal was sent before the freeze: it leads at most a TTL past it.
    assert.ok(steppedDownAfter <= TTL_SECONDS * 1_000 + 500, `stepped down ${Math.round(steppedDownAfter)} ms after the replica froze`);
    assert.ok(
      errors.some((err) => /reached 0 of the 1 replicas/.test(err.message)),
      `the renewals' error says why: ${errors.map((e) => e.message).join("; ")}`,
    );
    replica.resume();
    await waitFor("a to lead again", BOUND_MS, () => election.isLeader() || undefined);
  });

  it("asking for more replicas than there are wins nothing, and leaves the key free", async () => {
    const key = `too-many-${++keys}`;
    const { election, errors } = await member(key, "greedy", { replicas: 2 });
    await waitFor("a refused win", BOUND_MS, () => errors.find((err) => /reached 1 of the 2 replicas/.test(err.message)));
    assert.equal(election.isLeader(), false);
    // Given back: a member that asks for none wins at once.
    const { election: modest } = await member(key, "modest", {});
    await waitFor("the modest member to lead", BOUND_MS, () => modest.isLeader() || undefined);
    assert.equal(election.isLeader(), false);
  });

  it("refuses a bad count, and a Cluster client", async () => {
    for (const replicas of [-1, 1.5, "1", 1_001]) {
      await assert.rejects(redisLeader(client(), "bad", "m", { replicas: replicas as number }), /replicas must be a whole number from 0 to 1000/);
    }
    const cluster = Object.assign(Object.create(client()) as Redis, { isCluster: true });
    await assert.rejects(redisLeader(cluster, "bad", "m", { replicas: 1 }), /needs a Redis client, not a Cluster/);
  });
});
