// The conformance target for the Redis backend: one real redis-server (no
// persistence), one election key per election, each member on an ioredis
// client of its own behind its own fault proxy (its subscriptions, made by
// duplicate(), go through the same proxy, so a cut silences them too), and
// an operator's view of the key through an admin client straight to the
// server. The backend is race-style: the store holds the leader's token and
// name at the election key and nothing for a follower.
import { Redis } from "ioredis";
import type { ElectionBackend } from "../../../src/contract/backend";
import { RedisBackend } from "../../../src/stores/redis/recipe";
import { IoredisAdapter } from "../../../src/stores/redis/ioredis/adapter";
import { electionKeys, parseHeld } from "../../../src/stores/redis/scripts";
import { FaultProxy } from "../../kit/fault-proxy";
import { startRedis, type RedisServer } from "../../kit/redis-server";
import { sleep, waitFor } from "../../kit/waiting";
import type { ConformanceTarget, TargetElection } from "./target";

export function redisTarget(): ConformanceTarget {
  let server: RedisServer | undefined;
  let admin: Redis | undefined;
  let elections = 0;
  /** The cleanups of elections not cleaned up yet (a case that skips itself gets no afterEach). */
  const open = new Set<() => Promise<void>>();
  const started = () => {
    if (!server || !admin) throw new Error("the Redis target was not started");
    return { server, admin };
  };

  return {
    name: "Redis",
    async start() {
      server = await startRedis();
      admin = new Redis(server.url);
    },
    async stop() {
      for (const cleanup of open) await cleanup();
      admin?.disconnect();
      await server?.close();
      admin = undefined;
      server = undefined;
    },
    async election(label, ttlSeconds) {
      const { server: redis, admin: operator } = started();
      const keys = electionKeys(`conformance-${++elections}-${label}`);
      const proxies = new Map<string, FaultProxy>();
      const clients: Redis[] = [];
      const holder = async () => {
        const value = await operator.get(keys.key);
        return value === null ? undefined : parseHeld(value).holder;
      };
      const proxyOf = (name: string) => {
        const proxy = proxies.get(name);
        if (!proxy) throw new Error(`no member ${name} in this election`);
        return proxy;
      };
      const holderNamed = async (name: string) => {
        const now = await holder();
        if (now !== name) throw new Error(`${name} holds nothing in Redis (the holder: ${now})`);
      };

      const election: TargetElection = {
        async backend(name): Promise<ElectionBackend> {
          const proxy = await FaultProxy.start({ upstream: `127.0.0.1:${redis.port}` });
          proxies.set(name, proxy);
          // Reconnects soon after a healed cut resets its connection, and never gives up.
          const client = new Redis({ host: "127.0.0.1", port: proxy.port, retryStrategy: () => 100 });
          client.on("error", () => undefined);
          clients.push(client);
          return new RedisBackend(new IoredisAdapter(client, (ttlSeconds * 1_000) / 2), keys.key.slice(1, -1), name, ttlSeconds * 1_000);
        },
        async members() {
          const now = await holder();
          return now === undefined ? [] : [now];
        },
        readLeader: holder,
        async deleteMember(name) {
          await holderNamed(name);
          await operator.del(keys.key);
        },
        // Redis drops a key nobody renews when its PX runs out, telling
        // nobody: the operator's PEXPIRE of 1 ms is that moment, now. It is
        // under way once the key is gone (a renewal in the same millisecond
        // would set its PX again).
        async expireMember(name) {
          await holderNamed(name);
          await operator.pexpire(keys.key, 1);
          await waitFor(`${name}'s key to expire`, 1_000, async () => (await operator.exists(keys.key)) === 0, { every: 2 });
        },
        async cutConnection(name) {
          proxyOf(name).setMode("blackhole");
        },
        async openWatches() {
          // Followers, observers and leaders each hold one subscription to the
          // election's channel, on a connection of its own. One that was just
          // stopped leaves the count once its connection's close has gone
          // through the proxy to the server: a moment later.
          await sleep(50);
          const answer = (await operator.pubsub("NUMSUB", keys.channel)) as [string, number];
          return Number(answer[1]);
        },
        async cleanup() {
          open.delete(election.cleanup);
          for (const client of clients) client.disconnect();
          await Promise.all([...proxies.values()].map((proxy) => proxy.close()));
          await operator.del(keys.key, keys.counter);
        },
      };
      open.add(election.cleanup);
      return election;
    },
  };
}
