// What the user hands the Redis entry: an ioredis client (`new Redis(url)`,
// or a `Cluster`), and the checks made on it and on the key before anything
// is sent. This package never loads ioredis itself: the user's client brings
// it along. The recipe never sees the client: adapter.ts turns it into the port.

/** A connection that receives what it subscribed to, as `redis.duplicate()` gives it. */
export interface RedisSubscriberConnection {
  subscribe(...channels: string[]): Promise<unknown>;
  on(event: "message", listener: (channel: string, message: string) => void): unknown;
  on(event: "close" | "end", listener: () => void): unknown;
  on(event: "error", listener: (error: Error) => void): unknown;
  disconnect(): void;
  /** PING; on a subscribed connection too (RESP2 allows it there). */
  ping?(): Promise<unknown>;
}

/** The part of an ioredis `Redis` (or `Cluster`) this package uses. */
export interface RedisClient {
  /** "wait", "connecting", "connect", "ready", "reconnecting", "close", "end" (ioredis's connection status). */
  readonly status: string;
  /** A new connection with the same options (for SUBSCRIBE, which takes a connection over). */
  duplicate(): RedisSubscriberConnection;
  evalsha(sha: string, numberOfKeys: number, ...args: Array<string | number>): Promise<unknown>;
  eval(script: string, numberOfKeys: number, ...args: Array<string | number>): Promise<unknown>;
  /** ioredis clients are EventEmitters: "ready" once connected. */
  once?(event: "ready", listener: () => void): unknown;
  removeListener?(event: "ready", listener: () => void): unknown;
  /** CONFIG, where the server allows it. */
  config?(subcommand: "GET", parameter: string): Promise<unknown>;
  /** The client's options: `db` names the keyspace channel. */
  readonly options?: { readonly db?: number };
  /** True on an ioredis Cluster. */
  readonly isCluster?: boolean;
  /** PING, to tell a silent connection from a slow server (silence.ts). */
  ping?(): Promise<unknown>;
  /** Drops the connection; with `true`, connects again (silence.ts). */
  disconnect?(reconnect?: boolean): void;
  /** WAIT numreplicas timeout: for the `replicas` option. */
  wait?(replicas: number, timeoutMs: number): Promise<number>;
}

const CLIENT_METHODS = ["duplicate", "evalsha", "eval"] as const;

/**
 * Throws a TypeError unless `client` looks like an ioredis client. A URL, an
 * options object or a node-redis client is a common mistake: say what to pass.
 */
export function checkClient(client: unknown): asserts client is RedisClient {
  const missing = CLIENT_METHODS.filter((method) => typeof (client as Record<string, unknown> | null)?.[method] !== "function");
  if (missing.length === 0 && typeof (client as { status?: unknown }).status === "string") return;
  const lacks = [...missing, ...(typeof (client as { status?: unknown } | null)?.status === "string" ? [] : ["status"])];
  const what = typeof client === "string" ? `the string ${JSON.stringify(client)}` : client === null ? "null" : `a ${typeof client} with no ${lacks.join(", ")}`;
  throw new TypeError(
    `redis must be an ioredis client (new Redis(url) or new Redis.Cluster(nodes) from ioredis 5 or 6), got ${what}; ` +
      "a URL, an options object or a node-redis client will not do",
  );
}

/**
 * Throws a TypeError for a key the election cannot use: empty, or holding a
 * brace, which would break its hash tag (`{<key>}` must name the whole key,
 * so that the key and its counter share one slot).
 */
export function checkKey(key: unknown): asserts key is string {
  if (typeof key !== "string" || key === "") {
    throw new TypeError(`key must be a non-empty string, got ${typeof key === "string" ? '""' : typeof key}`);
  }
  if (/[{}]/.test(key)) {
    throw new TypeError(`key ${JSON.stringify(key)} holds a brace: the election's keys are {<key>} and {<key>}:token, whose hash tag must be the whole key`);
  }
}
