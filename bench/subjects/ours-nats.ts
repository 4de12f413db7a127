// This library on NATS JetStream KV, through @nats-io/kv over
// @nats-io/transport-node: one connection per member, as in its own process.
// The bucket of a run's TTL (its max_age) is made on first use; making it
// again with the same settings is a no-op, so every member may try.
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { Kvm } from "@nats-io/kv";
import type { Election } from "../../src/election/election";
import { natsLeader } from "../../src/nats";
import { SUBJECTS } from "./info";
import type { Member, MemberListener, MemberSpec, Subject, SubjectRuntime } from "./types";

export const NATS_CLIENT_NOTE = "one NATS connection per member; one bucket per TTL, its max_age the TTL";

/** The bucket a member with this TTL campaigns in. */
export const natsBucketFor = (ttlSeconds: number) => `bench_ttl_${ttlSeconds}s`;

export const oursNats: Subject = {
  ...SUBJECTS.find((s) => s.id === "ours-nats")!,
  runtime(hosts: string[]): SubjectRuntime {
    return {
      clientNote: NATS_CLIENT_NOTE,
      member: (spec, listener) => new NatsMember(spec.hosts ?? hosts, spec, listener),
      async close() {},
    };
  },
};

class NatsMember implements Member {
  readonly name: string;
  private election: Election | undefined;
  private connection: NatsConnection | undefined;
  private wanted: "start" | "stop" | undefined;
  private readonly ready: Promise<void>;

  constructor(hosts: string[], spec: MemberSpec, listener: MemberListener) {
    this.name = spec.name;
    this.ready = this.open(hosts, spec, listener).catch((err: unknown) => listener.error(`could not join: ${(err as Error).message}`));
  }

  private async open(hosts: string[], spec: MemberSpec, listener: MemberListener): Promise<void> {
    this.connection = await connect({
      servers: hosts,
      // Named after the member, so that the server's per-connection counters say whose they are.
      name: spec.name,
      reconnectTimeWait: 250,
      maxReconnectAttempts: -1,
    });
    const kv = await new Kvm(this.connection).create(natsBucketFor(spec.ttl), { ttl: spec.ttl * 1000, history: 1 });
    const election = await natsLeader(kv, spec.key, spec.name);
    election.on("elected", (token) => listener.elected(token));
    election.on("unelected", () => listener.unelected("unelected"));
    election.on("leader", (name) => listener.leader(name));
    election.on("error", (err) => listener.error(err.message));
    this.election = election;
    if (this.wanted === "start") election.start();
  }

  start(): void {
    this.wanted = "start";
    this.election?.start();
  }

  stop(): void {
    this.wanted = "stop";
    this.election?.stop();
  }

  async close(): Promise<void> {
    await this.ready;
    await this.election?.leave();
    await this.connection?.close().catch(() => undefined);
  }

  isLeader(): boolean {
    return this.election?.isLeader() ?? false;
  }

  isRunning(): boolean {
    return this.wanted === "start" && (this.election?.isRunning() ?? true);
  }
}
