// `--backend redis`: the election on a Redis key, through `etcd-leader/redis`.
// The server is `--url` (a redis:// or rediss:// URL, user and password
// included, as redis-cli -u takes it), else REDIS_URL, else a server on this
// host.
//
// ioredis is an optional peer, loaded here only when --backend redis is
// given. The first connection is made, and the server asked for PING, before
// any command starts, so that a server that cannot be reached or refuses the
// password fails at once, with a message, instead of being retried in
// silence.
import { redisLeader, type RedisClient } from "../../redis";
import { loadClient } from "./load-client";
import { CliError, EXIT } from "../exit";
import type { Store } from "./store";

export interface RedisFlags {
  /** redis://[[user]:password@]host[:port][/db], or rediss:// for TLS. */
  url?: string | undefined;
}

/** As redis-cli: a server on this host. */
const DEFAULT_URL = "redis://127.0.0.1:6379";
/** How long the first connection and its PING may take. */
const CONNECT_TIMEOUT_MS = 5_000;

interface IoredisClient extends RedisClient {
  connect(): Promise<void>;
  ping(): Promise<string>;
  quit(): Promise<unknown>;
  disconnect(): void;
  on(event: "error", listener: (error: Error) => void): unknown;
}
type IoredisClass = new (url: string, options: object) => IoredisClient;

export async function connectRedis(flags: RedisFlags): Promise<Store> {
  const url = flags.url ?? process.env.REDIS_URL ?? DEFAULT_URL;
  if (!/^rediss?:\/\//.test(url)) {
    throw new CliError(EXIT.usage, `--url ${JSON.stringify(url)} is no Redis URL: give redis://host:port (or rediss:// for TLS), e.g. ${DEFAULT_URL}`);
  }
  const shown = withoutPassword(url);
  const description = `Redis at ${shown}`;
  const flagsToCheck = "check --url (or REDIS_URL): host, port, password and database";

  const loaded = loadClient("ioredis", "--backend redis") as { Redis?: IoredisClass; default?: IoredisClass };
  const Redis = loaded.Redis ?? loaded.default ?? (loaded as unknown as IoredisClass);
  const redis = new Redis(url, {
    lazyConnect: true,
    connectTimeout: CONNECT_TIMEOUT_MS,
    // A member outlives a server restart: reconnect for as long as it runs, a little apart.
    retryStrategy: (times: number) => Math.min(50 * times, 1_000),
  });
  let lastError: Error | undefined;
  redis.on("error", (err) => void (lastError = err));
  try {
    await redis.connect();
    await redis.ping();
  } catch (err) {
    redis.disconnect();
    throw new CliError(EXIT.unavailable, `cannot reach ${description}: ${messageOf(lastError ?? err)}\n${flagsToCheck}`);
  }

  return {
    description,
    flagsToCheck,
    election: async (key, name, ttlSeconds, options = {}) => {
      try {
        return await redisLeader(redis, key, name, { ...options, ...(ttlSeconds !== undefined ? { ttl: ttlSeconds } : {}) });
      } catch (err) {
        throw keyRefused(err);
      }
    },
    observe: (key) => {
      try {
        return redisLeader.observe(redis, key);
      } catch (err) {
        throw keyRefused(err);
      }
    },
    whoLeads: (key, requestTimeout) =>
      redisLeader.whoLeads(redis, key, { requestTimeout }).catch((err: unknown) => {
        throw keyRefused(err);
      }),
    candidates: (key, requestTimeout) =>
      Promise.resolve()
        .then(() => redisLeader.candidates(redis, key, { requestTimeout }))
        .catch((err: unknown) => {
          throw keyRefused(err);
        }),
    close: async () => {
      await redis.quit().catch(() => redis.disconnect());
    },
  };
}

/** The library refuses a key it cannot use (a brace in it) with a TypeError; here that is a usage error. */
function keyRefused(err: unknown): unknown {
  return err instanceof TypeError && /^key /.test(err.message) ? new CliError(EXIT.usage, err.message) : err;
}

/** The URL for messages, its password replaced. */
function withoutPassword(url: string): string {
  return url.replace(/^(rediss?:\/\/[^:@/]*:)[^@/]*@/, "$1***@");
}

function messageOf(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
