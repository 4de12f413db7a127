// Direct access to the PostgreSQL or Redis server a fault scenario runs on,
// bypassing the members' proxies: the election's holder read as a one-entry
// "line" (as on NATS, a member that does not lead holds nothing), and the
// operator's delete of it. Each reads the store as it is, not through the
// recipe under test: the lease row, or the key's `<token>:<name>` value.
import Redis from "ioredis";
import { Client } from "pg";
import type { LineEntry } from "./etcd-admin";

/** What a race-style store's scenario needs from outside the members. */
export interface RaceAdmin {
  /** The key's live holder as a line of one (empty while nobody holds it): name, and the token. */
  line(key: string): Promise<LineEntry[]>;
  /** Deletes the holder's lease from outside, as an operator would. */
  deleteKey(key: string): Promise<void>;
  close(): Promise<void>;
}

/** The table the CLI's members use when --table is not given. */
const TABLE = "etcd_leader_elections";

export class PostgresAdmin implements RaceAdmin {
  private client: Client | undefined;

  constructor(private readonly url: string) {}

  /** A connection made again after a server restart ended the last one. */
  private async connected(): Promise<Client> {
    if (this.client) return this.client;
    const client = new Client({ connectionString: this.url, connectionTimeoutMillis: 3_000, query_timeout: 3_000 });
    client.on("error", () => undefined);
    try {
      await client.connect();
    } catch (err) {
      await client.end().catch(() => undefined);
      throw err;
    }
    client.once("end", () => {
      if (this.client === client) this.client = undefined;
    });
    this.client = client;
    return client;
  }

  private async query(text: string, values: unknown[]): Promise<Array<Record<string, unknown>>> {
    const client = await this.connected();
    try {
      return (await client.query(text, values)).rows;
    } catch (err) {
      // Whatever failed, the next query gets a connection of its own.
      if (this.client === client) this.client = undefined;
      await client.end().catch(() => undefined);
      throw err;
    }
  }

  async line(key: string): Promise<LineEntry[]> {
    const rows = await this.query(`SELECT holder, token::text AS token FROM ${TABLE} WHERE key = $1 AND expires_at > clock_timestamp()`, [key]);
    return rows.map((row) => ({ key, name: String(row.holder), token: Number(row.token) }));
  }

  async deleteKey(key: string): Promise<void> {
    await this.query(`DELETE FROM ${TABLE} WHERE key = $1`, [key]);
  }

  async close(): Promise<void> {
    await this.client?.end().catch(() => undefined);
    this.client = undefined;
  }
}

export class RedisAdmin implements RaceAdmin {
  private readonly redis: Redis;

  constructor(url: string) {
    // Commands wait out a restart in ioredis's queue; a scenario's own deadlines bound them.
    this.redis = new Redis(url, { lazyConnect: true, retryStrategy: () => 100, commandTimeout: 3_000 });
    this.redis.on("error", () => undefined);
  }

  /** The election `key`'s key in Redis: its hash tag, so that its counter shares the slot. */
  private static keyOf(key: string): string {
    return `{${key}}`;
  }

  async line(key: string): Promise<LineEntry[]> {
    const value = await this.redis.get(RedisAdmin.keyOf(key));
    if (value === null) return [];
    const match = /^(\d+):([\s\S]*)$/.exec(value);
    if (!match) throw new Error(`the key ${RedisAdmin.keyOf(key)} holds ${JSON.stringify(value)}, not <token>:<name>`);
    return [{ key, name: match[2]!, token: Number(match[1]) }];
  }

  async deleteKey(key: string): Promise<void> {
    await this.redis.del(RedisAdmin.keyOf(key));
  }

  async close(): Promise<void> {
    this.redis.disconnect();
  }
}
