// The facts of Redis that the Redis recipe relies on (redis-facts.ts), held
// by a real redis-server (7.0, no persistence) through the ioredis adapter of
// the port: one set of cases, run here on the real server.
import { after, before, describe, test } from "node:test";
import { Redis } from "ioredis";
import { IoredisAdapter } from "../../../src/stores/redis/ioredis/adapter";
import { electionKeys } from "../../../src/stores/redis/scripts";
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
  port: new IoredisAdapter(member),
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
