// A Redis server in memory, behind the Redis recipe's port
// (src/stores/redis/port.ts): string keys with a PX kept on the server's
// clock (virtual time), expired exactly on access and removed by the active
// expiry cycle a little later (which is when a keyspace notification says
// "expired"); the recipe's four scripts, each applied as one step, as Redis
// runs a Lua script; a token counter started from the server's TIME in
// microseconds where it is below it; PUBLISH delivered to the subscribers
// connected at that moment; keyspace notifications as notify-keyspace-events
// says; a server that can be paused, and restarted with its data (appendonly)
// or without (every key and the counter lost).
//
// The store itself is the port with no network between (the facts cases);
// portOver(link) is the port of a member of the simulation, whose requests,
// answers and messages travel its link, as on an ioredis connection: a
// subscription ends when the connection breaks (the adapter does not let it
// reconnect, since messages may have been missed). The facts it keeps are
// checked against a real redis-server by the same cases
// (test/stores/redis/redis-facts.ts).
//
// The simulation's server runs with appendonly: a restart keeps the key.
// A restart without persistence loses an acknowledged write and can let two
// members lead (docs/redis.md); like a NATS bucket made again, it is left
// out of the runs.
import type { ElectionBackend } from "../../../src/contract/backend";
import { resolveOptions } from "../../../src/election/options";
import { RedisBackend } from "../../../src/stores/redis/recipe";
import { electionKeys, parseHeld } from "../../../src/stores/redis/scripts";
import type { AcquireAnswer, ElectionKeys, RedisHolding, RedisMessageListener, RedisPort, RedisSubscription } from "../../../src/stores/redis/port";
import type { Link } from "../network";
import { patch } from "../mutations";
import type { Mutation, StoreFactory, StoreFault } from "../store";
import type { Random, Scheduler, SimProcess } from "../world";
import { FrozenWork, serverPausedFault } from "./frozen-work";
import { MembershipLog } from "./membership-log";

/**
 * How long after its PX the active expiry cycle removes a key nobody reads
 * (Redis samples keys with an expiry ten times a second); a read before
 * that finds it gone already.
 */
export const ACTIVE_EXPIRY_LAG_MS = 100;

/** The server's wall clock at virtual time 0, for TIME. */
const EPOCH_MS = Date.UTC(2026, 0, 1);

interface Value {
  readonly value: string;
  expiresAt: number | undefined;
}

interface Subscriber {
  readonly channels: ReadonlySet<string>;
  deliver(channel: string, message: string): void;
  /** The server closed the connection (a restart). */
  end(): void;
}

export interface RedisStoreOptions {
  /** Virtual time: keys expire in it. */
  scheduler: Scheduler;
  /** Draws the active expiry cycle's lag (none without it). */
  random?: Random;
  /** Told whenever the value at a key changes (a write, a DEL, an expiry, a restart that lost it). */
  onChange?(key: string, before: string | undefined, after: string | undefined): void;
}

export class RedisStore implements RedisPort {
  private readonly values = new Map<string, Value>();
  private readonly subscribers = new Set<Subscriber>();
  /** notify-keyspace-events. */
  notifyFlags = "";
  /** CONFIG is refused (a managed server). */
  configRefused = false;
  /** SIGSTOP: what the server is asked meanwhile, and the sweeps that fall due, wait here. */
  private readonly frozen = new FrozenWork();

  constructor(private readonly options: RedisStoreOptions) {}

  private get now(): number {
    return this.options.scheduler.now;
  }

  // The port with no network between: each answer a microtask later.

  acquire(keys: ElectionKeys, name: string, ttlMs: number): Promise<AcquireAnswer> {
    return this.answer(() => this.acquireNow(keys, name, ttlMs));
  }

  renew(keys: ElectionKeys, token: number, name: string, ttlMs: number): Promise<boolean> {
    return this.answer(() => this.renewNow(keys, token, name, ttlMs));
  }

  release(keys: ElectionKeys, token: number): Promise<boolean> {
    return this.answer(() => this.releaseNow(keys, token));
  }

  read(keys: ElectionKeys): Promise<RedisHolding | undefined> {
    return this.answer(() => this.readNow(keys));
  }

  async subscribe(channels: readonly string[], listener: RedisMessageListener): Promise<RedisSubscription> {
    let stopped = false;
    const subscriber: Subscriber = {
      channels: new Set(channels),
      deliver: (channel, message) => queueMicrotask(() => !stopped && listener.onMessage(channel, message)),
      end: () => queueMicrotask(() => !stopped && listener.onEnd(new Error("the server closed the connection"))),
    };
    await this.answer(() => this.subscribers.add(subscriber));
    return {
      stop: () => {
        stopped = true;
        this.subscribers.delete(subscriber);
      },
    };
  }

  keyspaceChannel(key: string): string {
    return `__keyspace@0__:${key}`;
  }

  keyspaceEvents(): Promise<string | undefined> {
    return this.answer(() => (this.configRefused ? undefined : this.notifyFlags));
  }

  // The scripts, each one step.

  acquireNow(keys: ElectionKeys, name: string, ttlMs: number): AcquireAnswer {
    const held = this.live(keys.key);
    if (held) return { won: false, ...parseHeld(held.value), pttl: this.pttl(held) };
    const nowUs = Math.floor((EPOCH_MS + this.now) * 1000);
    let token = Number(this.live(keys.counter)?.value ?? 0) + 1;
    if (token < nowUs) token = nowUs;
    this.values.set(keys.counter, { value: String(token), expiresAt: undefined });
    this.write(keys.key, `${token}:${name}`, ttlMs);
    this.publish(keys.channel, `acquired ${token} ${ttlMs} ${name}`);
    return { won: true, token };
  }

  renewNow(keys: ElectionKeys, token: number, name: string, ttlMs: number): boolean {
    const held = this.live(keys.key);
    if (held && held.value.startsWith(`${token}:`)) {
      this.pexpire(keys.key, ttlMs);
      return true;
    }
    if (!held) this.publish(keys.channel, `released ${token} ${name}`);
    return false;
  }

  releaseNow(keys: ElectionKeys, token: number): boolean {
    const held = this.live(keys.key);
    if (!held || !held.value.startsWith(`${token}:`)) return false;
    this.del(keys.key);
    this.publish(keys.channel, `released ${token} ${held.value.slice(String(token).length + 1)}`);
    return true;
  }

  readNow(keys: ElectionKeys): RedisHolding | undefined {
    const held = this.live(keys.key);
    return held && { ...parseHeld(held.value), pttl: this.pttl(held) };
  }

  // The operator's commands.

  set(key: string, value: string): void {
    this.write(key, value, undefined);
  }

  del(key: string): void {
    const held = this.live(key);
    if (!held) return;
    this.values.delete(key);
    this.options.onChange?.(key, held.value, undefined);
    this.notify(key, "del", "g");
  }

  pexpire(key: string, ms: number): void {
    const held = this.live(key);
    if (!held) return;
    held.expiresAt = this.now + ms;
    this.expireLater(key, held);
    this.notify(key, "expire", "g");
  }

  /** Whoever holds `key` now, if anyone (the checker's view). */
  value(key: string): string | undefined {
    return this.live(key)?.value;
  }

  /** Restarts the server: with `persistent`, its keys survive (appendonly); without, every key is lost. Subscribers' connections close either way. */
  restart(persistent: boolean): void {
    if (!persistent) {
      for (const [key, held] of [...this.values]) {
        this.values.delete(key);
        this.options.onChange?.(key, held.value, undefined);
      }
    }
    for (const subscriber of [...this.subscribers]) subscriber.end();
    this.subscribers.clear();
  }

  /** SIGSTOP: requests wait, and nothing expires actively, until resume(). */
  pause(): void {
    this.frozen.freeze();
  }

  resume(): void {
    this.frozen.thaw();
  }

  get paused(): boolean {
    return this.frozen.frozen;
  }

  /** Runs `operation` as the server does: on a later microtask, or once a paused server resumes. */
  serve<T>(operation: () => T): Promise<T> {
    if (!this.frozen.frozen) return Promise.resolve().then(operation);
    return Promise.resolve(this.frozen.serve(operation));
  }

  /** A subscriber on a member's connection. */
  addSubscriber(subscriber: Subscriber): void {
    this.subscribers.add(subscriber);
  }

  removeSubscriber(subscriber: Subscriber): void {
    this.subscribers.delete(subscriber);
  }

  /** How many subscribers listen on `channel` (PUBSUB NUMSUB). */
  subscribersOf(channel: string): number {
    return [...this.subscribers].filter((subscriber) => subscriber.channels.has(channel)).length;
  }

  portOver(link: Link, process: SimProcess): RedisPort {
    return new LinkedPort(this, link, process);
  }

  private answer<T>(operation: () => T): Promise<T> {
    return this.serve(operation);
  }

  private write(key: string, value: string, ttlMs: number | undefined): void {
    const before = this.live(key)?.value;
    const held: Value = { value, expiresAt: ttlMs === undefined ? undefined : this.now + ttlMs };
    this.values.set(key, held);
    if (before !== value) this.options.onChange?.(key, before, value);
    this.expireLater(key, held);
    this.notify(key, "set", "$");
    if (ttlMs !== undefined) this.notify(key, "expire", "g");
  }

  /** The key's value unless it has expired: an expired key found on access is removed then, as Redis does. */
  private live(key: string): Value | undefined {
    const held = this.values.get(key);
    if (held && held.expiresAt !== undefined && held.expiresAt <= this.now) {
      this.expire(key, held);
      return undefined;
    }
    return held;
  }

  private expire(key: string, held: Value): void {
    if (this.values.get(key) !== held) return;
    this.values.delete(key);
    this.options.onChange?.(key, held.value, undefined);
    this.notify(key, "expired", "x");
  }

  private pttl(held: Value): number {
    return held.expiresAt === undefined ? -1 : Math.max(0, Math.round(held.expiresAt - this.now));
  }

  /** The active expiry cycle: the key goes a little after its PX unless read first, renewed, or written over. */
  private expireLater(key: string, held: Value): void {
    if (held.expiresAt === undefined) return;
    const expiresAt = held.expiresAt;
    const lag = (this.options.random?.next() ?? 0) * ACTIVE_EXPIRY_LAG_MS;
    const sweep = () => {
      if (held.expiresAt !== expiresAt || this.values.get(key) !== held) return;
      // A paused server sweeps nothing; it finds the key expired when it resumes.
      if (this.frozen.frozen) void this.frozen.serve(sweep);
      else this.expire(key, held);
    };
    this.options.scheduler.at(expiresAt + lag, sweep);
  }

  private publish(channel: string, message: string): void {
    for (const subscriber of this.subscribers) if (subscriber.channels.has(channel)) subscriber.deliver(channel, message);
  }

  private notify(key: string, event: string, type: string): void {
    const flags = this.notifyFlags;
    if (!flags.includes("K") || !(flags.includes(type) || (flags.includes("A") && type !== "m" && type !== "n"))) return;
    this.publish(this.keyspaceChannel(key), event);
  }
}

/**
 * The port of a member of the simulation: each script travels the member's
 * link to the server (applied as the server applies it, or once a paused
 * server resumes) and its answer back; messages are pushed over the link.
 * ioredis sets no timeout on a command: one in flight on a connection that
 * died fails when the connection is found dead.
 */
class LinkedPort implements RedisPort {
  constructor(
    private readonly store: RedisStore,
    private readonly link: Link,
    private readonly process: SimProcess,
  ) {}

  private request<T>(operation: () => T): Promise<T> {
    return this.link.request(() => this.store.serve(operation)).then((answer) => answer as T);
  }

  acquire(keys: ElectionKeys, name: string, ttlMs: number): Promise<AcquireAnswer> {
    return this.request(() => this.store.acquireNow(keys, name, ttlMs));
  }

  renew(keys: ElectionKeys, token: number, name: string, ttlMs: number): Promise<boolean> {
    return this.request(() => this.store.renewNow(keys, token, name, ttlMs));
  }

  release(keys: ElectionKeys, token: number): Promise<boolean> {
    return this.request(() => this.store.releaseNow(keys, token));
  }

  read(keys: ElectionKeys): Promise<RedisHolding | undefined> {
    return this.request(() => this.store.readNow(keys));
  }

  async subscribe(channels: readonly string[], listener: RedisMessageListener): Promise<RedisSubscription> {
    let stopped = false;
    let ended = false;
    const end = (error: Error) => {
      if (stopped || ended) return;
      ended = true;
      this.store.removeSubscriber(subscriber);
      stopListening();
      this.process.run(() => !stopped && listener.onEnd(error));
    };
    const subscriber: Subscriber = {
      channels: new Set(channels),
      deliver: (channel, message) => this.link.push(() => this.process.run(() => !stopped && !ended && listener.onMessage(channel, message))),
      end: () => this.link.push(() => end(new Error("the server closed the subscription's connection"))),
    };
    const stopListening = this.link.onBroken((error) => end(error));
    try {
      await this.request(() => this.store.addSubscriber(subscriber));
    } catch (err) {
      stopListening();
      this.store.removeSubscriber(subscriber);
      throw err;
    }
    return {
      stop: () => {
        stopped = true;
        stopListening();
        this.store.removeSubscriber(subscriber);
      },
    };
  }

  keyspaceChannel(key: string): string {
    return this.store.keyspaceChannel(key);
  }

  keyspaceEvents(): Promise<string | undefined> {
    return this.request(() => (this.store.configRefused ? undefined : this.store.notifyFlags));
  }
}

const KEY = "election";
const TTL_MS = 2_000;

export const simRedis: StoreFactory = (scheduler, random) => {
  const log = new MembershipLog(scheduler);
  const keys = electionKeys(KEY);
  const store = new RedisStore({
    scheduler,
    random: random.fork(),
    onChange: (key, before, after) => {
      if (key !== keys.key) return;
      if (before !== undefined) log.released(key);
      if (after !== undefined) log.held(key, parseHeld(after).holder);
    },
  });
  // Half the runs on a server that sends keyspace notifications, half on one that does not.
  store.notifyFlags = random.chance(0.5) ? "Kgx" : "";
  const links = new Set<Link>();
  const options = resolveOptions(undefined, { ttl: TTL_MS / 1000 });
  const faults: StoreFault[] = [
    {
      kind: "key deleted",
      weight: 1,
      apply: (context) => {
        const holder = store.value(keys.key);
        context.note(`DEL of the election key${holder === undefined ? " (nobody holds it)" : `, held by ${parseHeld(holder).holder}`}`);
        if (holder !== undefined) log.deletedFromOutside(keys.key);
        store.del(keys.key);
      },
    },
    serverPausedFault(store, "redis-server", TTL_MS),
  ];
  return {
    kind: "redis",
    transport: "multiplexed",
    options,
    faults,
    mutations: redisMutations,
    holdsAtMostMs: TTL_MS + ACTIVE_EXPIRY_LAG_MS,
    followersHold: false,
    backend(name: string, process: SimProcess, link: Link, memberRandom: Random): ElectionBackend {
      links.add(link);
      return new RedisBackend(store.portOver(link, process), KEY, name, options.ttlMs, "auto", process.turns, process, memberRandom.source);
    },
    restart(downMs: number) {
      // appendonly: the keys survive; every connection, subscriptions among them, is reset.
      store.restart(true);
      for (const link of links) link.reset();
      scheduler.at(scheduler.now + downMs, () => {
        for (const link of links) link.restore();
      });
    },
    deleteMembershipOf(name: string) {
      const holder = store.value(keys.key);
      if (holder === undefined || parseHeld(holder).holder !== name) return;
      log.deletedFromOutside(keys.key);
      store.del(keys.key);
    },
    holders: () => log.holders(),
    heldDuring: (name, from, to) => log.heldDuring(name, from, to),
    deletedFromOutsideAt: (name) => log.deletedFromOutsideAt(name),
  };
};

/** Breaks of the Redis recipe, for the simulation to find. */
const redisMutations: readonly Mutation[] = [
  {
    name: "renew-unconditioned",
    description: "the renew script sets the key's PX again whoever holds it, not only while it holds our token",
    patch: () =>
      patch(RedisStore.prototype, "renewNow", () =>
        function (this: RedisStore, keys: ElectionKeys, _token: number, _name: string, ttlMs: number) {
          if (this.value(keys.key) === undefined) return false;
          this.pexpire(keys.key, ttlMs);
          return true;
        },
      ),
  },
  {
    name: "win-counted-from-answer",
    description: "a member that wins the key counts its term from when the acquire's answer came, not from when the script was sent",
    patch: () =>
      patch(RedisBackend.prototype, "race", (original) =>
        async function (this: RedisBackend, signal: AbortSignal) {
          const result = await original.call(this, signal);
          return "claim" in result ? { claim: { ...result.claim, sentAt: this.clock.now() } } : result;
        },
      ),
  },
];
