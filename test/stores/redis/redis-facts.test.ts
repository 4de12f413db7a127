// The facts of Redis that the Redis recipe relies on (redis-facts.ts), held
// by a real redis-server (7.0, no persistence) through the ioredis adapter of
// the port, and by the simulated Redis the simulation runs on
// (test/sim/stores/redis.ts): one set of cases, two targets.
import { after, before, describe, test } from "node:test";
import { Redis } from "ioredis";
import { IoredisAdapter } from "../../../src/stores/redis/ioredis/adapter";
import { electionKeys } from "../../../src/stores/redis/scripts";
import { RedisStore } from "../../sim/stores/redis";
import { Random, Scheduler } from "../../sim/world";
import { startRedis, type RedisServer } from "../../kit/redis-server";
import { exitOrFail, sleep, waitFor } from "../../kit/waiting";
import { REDIS_FACTS, type RedisMaker } from "./redis-facts";

let server: RedisServer;
let member: Redis;
let admin: Redis;
let elections = 0;

before(async () => {
  server = await startRedis();
  // Quick to come back after the case that restarts the server.
  const retryStrategy = () => 50;
  member = new Redis(server.url, { retryStrategy });
  admin = new Redis(server.url, { retryStrategy });
});

after(async () => {
  member?.disconnect();
  admin?.disconnect();
  await server?.close();
  exitOrFail();
});

const onServer: RedisMaker = async () => ({
  port: new IoredisAdapter(member, 5_000),
  keys: electionKeys(`facts-${++elections}`),
  operator: {
    set: async (key, value) => void (await admin.set(key, value)),
    del: async (key) => void (await admin.del(key)),
    pexpire: async (key, ms) => void (await admin.pexpire(key, ms)),
    notifyKeyspaceEvents: async (flags) => void (await admin.config("SET", "notify-keyspace-events", flags)),
    async restart() {
      await server.restart();
      await waitFor("the clients to reconnect", 5_000, () => member.status === "ready" && admin.status === "ready", { every: 10 });
    },
    elapse: (ms) => sleep(ms),
    now: () => performance.now(),
  },
});

describe("Redis facts on a real redis-server", () => {
  for (const fact of REDIS_FACTS) test(fact.title, () => fact.run(onServer));
});

let simulatedCount = 0;

/** A simulated Redis in a world of its own, in virtual time; its active expiry's lag drawn from a seed of its own. */
const onSimulatedRedis: RedisMaker = async () => {
  const scheduler = new Scheduler();
  const store = new RedisStore({ scheduler, random: new Random(++simulatedCount) });
  return {
    port: store,
    keys: electionKeys("facts"),
    operator: {
      set: async (key, value) => store.set(key, value),
      del: async (key) => store.del(key),
      pexpire: async (key, ms) => store.pexpire(key, ms),
      notifyKeyspaceEvents: async (flags) => void (store.notifyFlags = flags),
      // A restart takes a while (a real one, tens of milliseconds), and the server's clock moves on meanwhile.
      async restart() {
        store.restart(false);
        await scheduler.runUntil(scheduler.now + 20);
      },
      elapse: (ms) => scheduler.runUntil(scheduler.now + ms),
      now: () => scheduler.now,
    },
  };
};

describe("Redis facts on the simulated Redis", () => {
  for (const fact of REDIS_FACTS) test(fact.title, () => fact.run(onSimulatedRedis));
});
