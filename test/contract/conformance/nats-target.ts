// The conformance target for the NATS KV backend: a real nats-server with
// JetStream, one bucket per election (its max_age is the election's TTL),
// each member on a connection of its own behind its own fault proxy, and an
// operator's view of the bucket through an admin connection straight to the
// server. The backend is race-style: the store holds the leader's name at the
// election key and nothing for a follower.
import { jetstreamManager } from "@nats-io/jetstream";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { Kvm, type KV } from "@nats-io/kv";
import type { ElectionBackend } from "../../../src/contract/backend";
import { NatsKvBackend } from "../../../src/stores/nats-kv/recipe";
import { NatsKvAdapter } from "../../../src/stores/nats-kv/nats/adapter";
import { FaultProxy } from "../../kit/fault-proxy";
import { startNats, type NatsServer } from "../../kit/nats-server";
import { waitFor } from "../../kit/waiting";
import type { ConformanceTarget, TargetElection } from "./target";

const KEY = "leader";

export function natsTarget(): ConformanceTarget {
  let server: NatsServer | undefined;
  let admin: NatsConnection | undefined;
  let elections = 0;
  /**
   * The cleanups of elections not cleaned up yet. A case that skips itself at
   * run time (t.skip()) gets no afterEach, so its election's proxies and
   * connections are closed when the store stops.
   */
  const open = new Set<() => Promise<void>>();
  const started = () => {
    if (!server || !admin) throw new Error("the NATS target was not started");
    return { server, admin };
  };

  return {
    name: "NATS KV",
    async start() {
      server = await startNats();
      admin = await connect({ servers: server.url });
    },
    async stop() {
      for (const cleanup of open) await cleanup();
      await admin?.close().catch(() => undefined);
      await server?.close();
      admin = undefined;
      server = undefined;
    },
    async election(label, ttlSeconds) {
      const { server: nats, admin: adminConnection } = started();
      const ttlMs = ttlSeconds * 1_000;
      const bucketName = `conformance_${++elections}_${label}`;
      /** The stream that holds the bucket. */
      const stream = `KV_${bucketName}`;
      const bucket: KV = await new Kvm(adminConnection).create(bucketName, { ttl: ttlMs, history: 1 });
      const proxies = new Map<string, FaultProxy>();
      const allProxies: FaultProxy[] = [];
      const connections: NatsConnection[] = [];

      const holder = async () => {
        const entry = await bucket.get(KEY);
        return entry?.operation === "PUT" ? { name: entry.string(), revision: entry.revision } : undefined;
      };
      const holderNamed = async (name: string) => {
        const now = await holder();
        if (now?.name !== name) throw new Error(`${name} holds nothing in the bucket (the holder: ${now?.name})`);
        return now;
      };
      const proxyOf = (name: string) => {
        const proxy = proxies.get(name);
        if (!proxy) throw new Error(`no member ${name} in this election`);
        return proxy;
      };

      const election: TargetElection = {
        async backend(name): Promise<ElectionBackend> {
          const proxy = await FaultProxy.start({ upstream: `127.0.0.1:${nats.port}` });
          proxies.set(name, proxy);
          allProxies.push(proxy);
          // Reconnects soon after a healed cut resets its connection, and never gives up.
          const connection = await connect({ servers: proxy.hostPort, reconnectTimeWait: 100, maxReconnectAttempts: -1 });
          connections.push(connection);
          return new NatsKvBackend(new NatsKvAdapter(await new Kvm(connection).open(bucketName)), KEY, name);
        },
        async members() {
          const now = await holder();
          return now ? [now.name] : [];
        },
        async readLeader() {
          return (await holder())?.name;
        },
        async deleteMember(name) {
          await holderNamed(name);
          await bucket.delete(KEY);
        },
        // NATS has no lease to revoke: an entry goes when the bucket's
        // max_age has passed since its last write, with no event. So the
        // member is cut off, as across a partition, until its entry has aged
        // out and a successor, if the election has another member, has taken
        // the key (a partition that outlasts the fail-over); then its
        // connection heals, and its requests are answered again.
        async expireMember(name) {
          await holderNamed(name);
          const proxy = proxyOf(name);
          const others = [...proxies.keys()].some((other) => other !== name);
          proxy.setMode("blackhole");
          try {
            await waitFor(`${name}'s entry to age out`, 3 * ttlMs, async () => {
              const now = await holder();
              return others ? now !== undefined && now.name !== name : now === undefined;
            });
          } finally {
            proxy.setMode("pass");
          }
        },
        async cutConnection(name) {
          proxyOf(name).setMode("blackhole");
        },
        async openWatches() {
          // A watch is an ordered consumer on the bucket's stream.
          const info = await (await jetstreamManager(adminConnection)).streams.info(stream);
          return info.state.consumer_count;
        },
        async cleanup() {
          open.delete(election.cleanup);
          await Promise.all(allProxies.map((proxy) => proxy.close()));
          await Promise.all(connections.map((connection) => connection.close().catch(() => undefined)));
          await bucket.destroy();
        },
      };
      open.add(election.cleanup);
      return election;
    },
  };
}
