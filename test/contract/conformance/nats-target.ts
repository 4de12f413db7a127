// The conformance target for the NATS KV backend: a real nats-server with
// JetStream, one bucket per election (its max_age is the election's TTL),
// each member on a connection of its own behind its own fault proxy, and an
// operator's view of the bucket through an admin connection straight to the
// server. The backend is race-style: the store holds the leader's name at the
// election key and nothing for a follower. With `{ cluster: true }` the store
// is a JetStream cluster of three servers and each bucket is replicated on
// all three (R3); members connect to the servers in turn.
import { jetstreamManager } from "@nats-io/jetstream";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { Kvm, type KV } from "@nats-io/kv";
import type { ElectionBackend } from "../../../src/contract/backend";
import { NatsKvBackend } from "../../../src/stores/nats-kv/recipe";
import { NatsKvAdapter } from "../../../src/stores/nats-kv/nats/adapter";
import { FaultProxy } from "../../kit/fault-proxy";
import { startNatsCluster, type NatsCluster } from "../../kit/nats-cluster";
import { startNats, type NatsServer } from "../../kit/nats-server";
import { waitFor } from "../../kit/waiting";
import type { ConformanceTarget, TargetElection } from "./target";

const KEY = "leader";

export interface NatsTargetOptions {
  /** A three-server JetStream cluster with R3 buckets instead of one server. */
  cluster?: boolean;
}

export function natsTarget(options: NatsTargetOptions = {}): ConformanceTarget {
  const replicas = options.cluster ? 3 : 1;
  let servers: NatsServer[] = [];
  let cluster: NatsCluster | undefined;
  let admin: NatsConnection | undefined;
  let elections = 0;
  let members = 0;
  /**
   * The cleanups of elections not cleaned up yet. A case that skips itself at
   * run time (t.skip()) gets no afterEach, so its election's proxies and
   * connections are closed when the store stops.
   */
  const open = new Set<() => Promise<void>>();
  const started = () => {
    if (servers.length === 0 || !admin) throw new Error("the NATS target was not started");
    return { servers, admin };
  };

  return {
    name: options.cluster ? "NATS KV, R3 buckets on a three-server cluster" : "NATS KV",
    ...(options.cluster
      ? { handsOverAfterTtl: "on a replicated bucket the followers wait out the delete marker until it ages out (docs/nats.md)" }
      : {}),
    async start() {
      if (options.cluster) {
        cluster = await startNatsCluster(3);
        servers = [...cluster.servers];
      } else {
        servers = [await startNats()];
      }
      admin = await connect({ servers: servers.map((s) => s.url) });
    },
    async stop() {
      for (const cleanup of open) await cleanup();
      await admin?.close().catch(() => undefined);
      if (cluster) await cluster.close();
      else await Promise.all(servers.map((s) => s.close()));
      admin = undefined;
      cluster = undefined;
      servers = [];
    },
    async election(label, ttlSeconds) {
      const { servers: nats, admin: adminConnection } = started();
      const ttlMs = ttlSeconds * 1_000;
      const bucketName = `conformance_${++elections}_${label}`;
      /** The stream that holds the bucket. */
      const stream = `KV_${bucketName}`;
      const bucket: KV = await new Kvm(adminConnection).create(bucketName, { ttl: ttlMs, history: 1, replicas });
      const proxies = new Map<string, FaultProxy>();
      const allProxies: FaultProxy[] = [];
      const connections: NatsConnection[] = [];

      const manager = await jetstreamManager(adminConnection);
      // Read from the stream's leader: bucket.get() sends a direct get where the
      // bucket allows it (the default), which on a cluster any replica may
      // answer, from behind the leader.
      const holder = async () => {
        const message = await manager.streams.getMessage(stream, { last_by_subj: `$KV.${bucketName}.${KEY}` });
        if (!message || message.header.get("KV-Operation")) return undefined;
        return { name: message.string(), revision: message.seq };
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
          // Members spread over the servers: on a cluster, most of them reach the stream's leader through another server.
          const server = nats[members++ % nats.length]!;
          const proxy = await FaultProxy.start({ upstream: `127.0.0.1:${server.port}` });
          proxies.set(name, proxy);
          allProxies.push(proxy);
          // Reconnects soon after a healed cut resets its connection, and never gives up; only
          // through its proxy (a cluster's servers announce each other, and a cut must hold).
          const connection = await connect({
            servers: proxy.hostPort,
            reconnectTimeWait: 100,
            maxReconnectAttempts: -1,
            ignoreClusterUpdates: true,
          });
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
          const info = await manager.streams.info(stream);
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
