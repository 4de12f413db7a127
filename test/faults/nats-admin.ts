// Direct access to the nats-server a NATS fault scenario runs against,
// bypassing the members' proxies: the bucket the election lives in, the key's
// holder read as a one-entry "line", and what an operator does from outside
// (delete or purge the key, delete the bucket and make it again). One
// connection, closed with the run. The key is read from the stream's
// leader: on a cluster, a direct get may come from a replica behind it.
import { jetstreamManager, type JetStreamManager } from "@nats-io/jetstream";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { Kvm, type KV } from "@nats-io/kv";
import type { LineEntry } from "./etcd-admin";

/** The bucket every NATS scenario's election lives in. */
export const FAULTS_BUCKET = "faults";

export class NatsAdmin {
  /** The bucket's stream. */
  readonly stream = `KV_${FAULTS_BUCKET}`;

  private constructor(
    private readonly connection: NatsConnection,
    private readonly manager: JetStreamManager,
    private kv: KV,
    private readonly ttlMs: number,
    private readonly replicas: number,
  ) {}

  /** Connects (straight to the servers) and makes the bucket, with the scenario's TTL as its max_age, on `replicas` servers. */
  static async open(servers: string[], ttlMs: number, replicas = 1): Promise<NatsAdmin> {
    // Through a server restart the connection must come back by itself (to another server of a cluster).
    const connection = await connect({ servers, reconnectTimeWait: 100, maxReconnectAttempts: -1 });
    try {
      const kv = await createBucket(connection, ttlMs, replicas);
      return new NatsAdmin(connection, await jetstreamManager(connection), kv, ttlMs, replicas);
    } catch (err) {
      await connection.close();
      throw err;
    }
  }

  /**
   * The key's holder as a line of one (empty while nobody holds it): name,
   * and the revision as token. Read from the stream's leader; where the
   * server asked has no JetStream meta leader to route that read by (after a
   * heal, 2.9's meta group may elect again while the stream goes on taking
   * writes), with a direct get, which any replica answers, from a write
   * behind the leader at most once every replica is current.
   */
  async line(key: string): Promise<LineEntry[]> {
    try {
      const message = await this.manager.streams.getMessage(this.stream, { last_by_subj: `$KV.${FAULTS_BUCKET}.${key}` });
      if (!message || message.header.get("KV-Operation")) return [];
      return [{ key, name: message.string(), token: message.seq }];
    } catch (err) {
      if ((err as { code?: unknown }).code !== CLUSTER_NOT_AVAILABLE) throw err;
      const entry = await this.kv.get(key);
      if (!entry || entry.operation !== "PUT") return [];
      return [{ key, name: entry.string(), token: entry.revision }];
    }
  }

  async deleteKey(key: string): Promise<void> {
    await this.kv.delete(key);
  }

  async purgeKey(key: string): Promise<void> {
    await this.kv.purge(key);
  }

  /** The stream's last sequence: every revision so far is at most this. */
  async lastRevision(): Promise<number> {
    return (await this.kv.status()).streamInfo.state.last_seq;
  }

  /** Deletes the bucket (its stream) as `nats kv rm` would. */
  async deleteBucket(): Promise<void> {
    await this.kv.destroy();
  }

  /** Makes the bucket again, empty, with the same TTL. */
  async createBucket(): Promise<void> {
    this.kv = await createBucket(this.connection, this.ttlMs, this.replicas);
  }

  async close(): Promise<void> {
    await this.connection.close().catch(() => undefined);
  }
}

/** JSClusterNotAvailErr, "JetStream system temporarily unavailable": the server asked knows no meta leader. */
const CLUSTER_NOT_AVAILABLE = 10008;

/** How many times the bucket's creation is asked for when JetStream does not answer. */
const CREATE_ATTEMPTS = 3;

/**
 * Makes the bucket (or finds it, made alike). A cluster just formed has a
 * meta leader before its peers all follow it, and a stream's creation asked
 * for then can go unanswered for the client's whole JetStream timeout; asked
 * again, it is answered. A creation that did happen is found the second time:
 * JetStream's create is idempotent for the same settings.
 */
async function createBucket(connection: NatsConnection, ttlMs: number, replicas: number): Promise<KV> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await new Kvm(connection).create(FAULTS_BUCKET, { ttl: ttlMs, history: 1, replicas });
    } catch (err) {
      if ((err as Error).name !== "TimeoutError" || attempt >= CREATE_ATTEMPTS) throw err;
    }
  }
}
