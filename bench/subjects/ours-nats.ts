// This library on NATS JetStream KV, through @nats-io/kv over
// @nats-io/transport-node: one connection per member, as in its own process.
// The bucket of a run's TTL (its max_age) is made on first use; making it
// again with the same settings is a no-op, so every member may try.
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { Kvm } from "@nats-io/kv";
import { natsLeader } from "../../src/nats";
import { DeferredMember } from "./deferred-member";
import { SUBJECTS } from "./info";
import type { Subject, SubjectRuntime } from "./types";

export const NATS_CLIENT_NOTE = "one NATS connection per member; one bucket per TTL, its max_age the TTL";

/** The bucket a member with this TTL campaigns in. */
export const natsBucketFor = (ttlSeconds: number) => `bench_ttl_${ttlSeconds}s`;

export const oursNats: Subject = {
  ...SUBJECTS.find((s) => s.id === "ours-nats")!,
  runtime(hosts: string[]): SubjectRuntime {
    return {
      clientNote: NATS_CLIENT_NOTE,
      member(spec, listener) {
        let connection: NatsConnection | undefined;
        const make = async () => {
          connection = await connect({
            servers: spec.hosts ?? hosts,
            // Named after the member, so that the server's per-connection counters say whose they are.
            name: spec.name,
            reconnectTimeWait: 250,
            maxReconnectAttempts: -1,
          });
          const kv = await new Kvm(connection).create(natsBucketFor(spec.ttl), { ttl: spec.ttl * 1000, history: 1 });
          return natsLeader(kv, spec.key, spec.name);
        };
        return new DeferredMember(spec.name, listener, make, async () => void (await connection?.close()));
      },
      async close() {},
    };
  },
};
