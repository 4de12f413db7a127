// The port (../port.ts) on an ioredis client (`Redis`, or a `Cluster`, where
// one election's keys share one slot). Each write is one of the scripts of
// ../scripts.ts, sent with EVALSHA and, the first time a server lacks it
// (NOSCRIPT), with EVAL, which also loads it.
//
// ioredis holds the commands given while it is not connected (its offline
// queue) and sends them once it reconnects, maybe long after. A renewal or
// an acquire sent that late would act on a term its member has long given
// up, and keep the key from its successor for another TTL. So the adapter
// gives nothing to a client that is not connected: it waits for the
// client's "ready" at most READY_WAIT_MS (a client that is still making its
// first connection), then fails the request, and the state machine retries
// it later with a fresh send time. A member's send time is taken before the
// wait, so a request sent after it is counted as sent earlier than it was,
// never later. (A request that was on
// the wire when the connection dropped may still be sent again by ioredis on
// reconnect; its member counted it from before it was first sent, which is
// earlier still, and a win that arrives after the member stopped waiting is
// given back.)
//
// A connection that goes silent is found by the adapter's own requests
// (silence.ts): one unanswered for a request timeout, and a PING after it,
// make the client connect again; a subscription is PINGed when its follower
// checks the key (probe), and ended if that goes unanswered.
//
// Errors are all transient: a ReplyError (a script refused, WRONGTYPE at the
// election key) is reported and retried like a lost connection.
import { createHash } from "node:crypto";
import { ACQUIRE, READ, RELEASE, RENEW, parseHeld } from "../scripts";
import type { AcquireAnswer, ElectionKeys, RedisHolding, RedisMessageListener, RedisPort, RedisSubscription } from "../port";
import type { RedisClient } from "./client";
import { SilenceWatch } from "./silence";

/** A script and its SHA1, for EVALSHA. */
interface Script {
  readonly source: string;
  readonly sha: string;
}

function script(source: string): Script {
  return { source, sha: createHash("sha1").update(source).digest("hex") };
}

const SCRIPTS = { acquire: script(ACQUIRE), renew: script(RENEW), release: script(RELEASE), read: script(READ) };

/** The client's status in which a request goes out at once. "wait" is a lazyConnect client's first: a command connects it. */
const SENDS_AT_ONCE = new Set(["ready", "wait"]);
/** The client's status while it makes a connection, which it may have in a moment. */
const CONNECTING = new Set(["connecting", "connect", "reconnecting"]);
/** How long a request waits for a connecting client to be ready before it fails (nothing sent). */
const READY_WAIT_MS = 1_000;

export class RedisUnavailableError extends Error {
  override readonly name = "RedisUnavailableError";
}

export class IoredisAdapter implements RedisPort {
  private readonly silence: SilenceWatch;

  constructor(
    private readonly client: RedisClient,
    /** How long a request, then a PING, may go unanswered before a connection counts as silent: the request timeout. */
    private readonly silentAfterMs: number,
  ) {
    this.silence = new SilenceWatch(client, silentAfterMs, "the Redis client");
  }

  async acquire(keys: ElectionKeys, name: string, ttlMs: number): Promise<AcquireAnswer> {
    const answer = await this.run(SCRIPTS.acquire, keys, name, ttlMs, keys.channel);
    if (Array.isArray(answer) && answer[0] === 1) return { won: true, token: tokenOf(answer[1]) };
    if (Array.isArray(answer) && answer[0] === 0) return { won: false, ...holdingOf(answer[1], answer[2]) };
    throw unexpected("acquire", answer);
  }

  async renew(keys: ElectionKeys, token: number, name: string, ttlMs: number): Promise<boolean> {
    return flag("renew", await this.run(SCRIPTS.renew, keys, String(token), ttlMs, name, keys.channel));
  }

  async release(keys: ElectionKeys, token: number): Promise<boolean> {
    return flag("release", await this.run(SCRIPTS.release, keys, String(token), keys.channel));
  }

  async read(keys: ElectionKeys): Promise<RedisHolding | undefined> {
    const answer = await this.run(SCRIPTS.read, keys);
    if (answer === null) return undefined;
    if (Array.isArray(answer)) return holdingOf(answer[0], answer[1]);
    throw unexpected("read", answer);
  }

  async subscribe(channels: readonly string[], listener: RedisMessageListener): Promise<RedisSubscription> {
    await this.connected();
    const connection = this.client.duplicate();
    let stopped = false;
    let lastError: Error | undefined;
    const stop = () => {
      stopped = true;
      connection.disconnect();
    };
    connection.on("error", (error) => void (lastError = error));
    connection.on("message", (channel, message) => {
      if (!stopped) listener.onMessage(channel, message);
    });
    // A subscriber that lost its connection may have missed messages: its
    // end is reported, and the connection is not left to reconnect.
    connection.on("close", () => {
      if (stopped) return;
      stop();
      listener.onEnd(new RedisUnavailableError(`the subscription to ${channels.join(", ")} lost its connection${lastError ? `: ${lastError.message}` : ""}`));
    });
    try {
      await connection.subscribe(...channels);
    } catch (err) {
      stop();
      throw err;
    }
    let probing = false;
    const probe = () => {
      if (stopped || probing || typeof connection.ping !== "function") return;
      probing = true;
      const timer = setTimeout(() => {
        if (stopped) return;
        stop();
        listener.onEnd(new RedisUnavailableError(`the subscription to ${channels.join(", ")} did not answer a PING within ${this.silentAfterMs} ms: its connection is silent`));
      }, this.silentAfterMs);
      const answered = () => {
        probing = false;
        clearTimeout(timer);
      };
      connection.ping().then(answered, answered);
    };
    return { stop, probe };
  }

  keyspaceChannel(key: string): string | undefined {
    // A cluster node sends keyspace events only to its own clients, and a
    // cluster client subscribes on any node.
    if (this.client.isCluster) return undefined;
    return `__keyspace@${this.client.options?.db ?? 0}__:${key}`;
  }

  async keyspaceEvents(): Promise<string | undefined> {
    if (typeof this.client.config !== "function") return undefined;
    await this.connected();
    try {
      const answer = await this.client.config("GET", "notify-keyspace-events");
      return Array.isArray(answer) && typeof answer[1] === "string" ? answer[1] : undefined;
    } catch (err) {
      // Refused (renamed or forbidden CONFIG on a managed server): it cannot say.
      if ((err as { name?: unknown }).name === "ReplyError") return undefined;
      throw err;
    }
  }

  async waitForReplicas(replicas: number, timeoutMs: number): Promise<number> {
    if (typeof this.client.wait !== "function") throw new TypeError("this Redis client has no wait(): the replicas option needs an ioredis client");
    await this.connected();
    const acknowledged = await this.silence.watch(this.client.wait(replicas, timeoutMs));
    if (typeof acknowledged !== "number" || !Number.isInteger(acknowledged) || acknowledged < 0) throw unexpected("WAIT", acknowledged);
    return acknowledged;
  }

  /** Runs `script` on the election's keys: EVALSHA, and EVAL where the server does not have it yet. */
  private async run(script: Script, keys: ElectionKeys, ...args: Array<string | number>): Promise<unknown> {
    await this.connected();
    try {
      return await this.silence.watch(this.client.evalsha(script.sha, 2, keys.key, keys.counter, ...args));
    } catch (err) {
      if (!String((err as { message?: unknown }).message).startsWith("NOSCRIPT")) throw err;
      return this.silence.watch(this.client.eval(script.source, 2, keys.key, keys.counter, ...args));
    }
  }

  /** Resolves once the client sends at once: at once, or on its "ready" within READY_WAIT_MS; else throws, nothing sent. */
  private async connected(): Promise<void> {
    const { client } = this;
    if (SENDS_AT_ONCE.has(client.status)) return;
    if (!CONNECTING.has(client.status) || !client.once || !client.removeListener) throw this.unavailable();
    const { once, removeListener } = { once: client.once.bind(client), removeListener: client.removeListener.bind(client) };
    await new Promise<void>((resolve, reject) => {
      const ready = () => {
        clearTimeout(timer);
        resolve();
      };
      const timer = setTimeout(() => {
        removeListener("ready", ready);
        reject(this.unavailable());
      }, READY_WAIT_MS);
      once("ready", ready);
    });
    if (!SENDS_AT_ONCE.has(client.status)) throw this.unavailable();
  }

  private unavailable(): RedisUnavailableError {
    return new RedisUnavailableError(`the Redis client is not connected (status ${this.client.status}): nothing was sent`);
  }
}

function tokenOf(value: unknown): number {
  const token = typeof value === "string" && /^\d{1,16}$/.test(value) ? Number(value) : NaN;
  if (!Number.isSafeInteger(token)) throw unexpected("acquire (its token)", value);
  return token;
}

function holdingOf(value: unknown, pttl: unknown): RedisHolding {
  if (typeof value !== "string" || typeof pttl !== "number" || !Number.isInteger(pttl)) throw unexpected("read of the election key", [value, pttl]);
  return { ...parseHeld(value), pttl };
}

function flag(what: string, answer: unknown): boolean {
  if (answer === 1 || answer === 0) return answer === 1;
  throw unexpected(what, answer);
}

function unexpected(what: string, answer: unknown): Error {
  return new Error(`Redis answered the election's ${what} script with ${JSON.stringify(answer)}, not what the script returns: is another program writing to the election's keys?`);
}
