// The facts of Redis that the Redis recipe relies on, written against its
// port (src/stores/redis/port.ts), as one set of cases that two targets
// run: a real redis-server through the ioredis adapter, and the simulated
// Redis of test/sim/stores/redis.ts. A simulated Redis that differs from the
// real server on one of these fails here, so that what the simulation finds
// is about the real code on a faithful store.
import assert from "node:assert/strict";
import type { ElectionKeys, RedisPort } from "../../../src/stores/redis/port";

/** What a case may do to Redis from outside the port, as an operator would, and time. */
export interface Operator {
  /** SET key value, with no condition and no expiry. */
  set(key: string, value: string): Promise<void>;
  /** DEL key. */
  del(key: string): Promise<void>;
  /** PEXPIRE key ms. */
  pexpire(key: string, ms: number): Promise<void>;
  /** CONFIG SET notify-keyspace-events. */
  notifyKeyspaceEvents(flags: string): Promise<void>;
  /** Restarts the server without persistence (every key is lost), and resolves once the port's client is connected again. */
  restart(): Promise<void>;
  /** Lets `ms` go by: real time on a real server, virtual time on the simulated one. */
  elapse(ms: number): Promise<void>;
  /** The time on the same clock, in ms. */
  now(): number;
}

/** What a case runs on: a member's port, the operator's hands, and the keys of an election no other case uses. */
export interface FactsRedis {
  readonly port: RedisPort;
  readonly operator: Operator;
  readonly keys: ElectionKeys;
}

export type RedisMaker = () => Promise<FactsRedis>;

export interface Fact {
  readonly title: string;
  run(redis: RedisMaker): Promise<void>;
}

const LONG_TTL_MS = 60_000;

/** The messages a subscription receives, as they come. */
interface Heard {
  readonly messages: Array<[string, string]>;
  ended: Error | undefined;
  stop(): void;
}

async function listen(port: RedisPort, channels: string[]): Promise<Heard> {
  const heard: Heard = {
    messages: [],
    ended: undefined,
    stop: () => subscription.stop(),
  };
  const subscription = await port.subscribe(channels, {
    onMessage: (channel, message) => heard.messages.push([channel, message]),
    onEnd: (error) => (heard.ended = error),
  });
  return heard;
}

/** Waits until `probe` holds, checking every 10 ms on the operator's clock, for at most `within` ms. */
async function eventually(operator: Operator, what: string, within: number, probe: () => boolean | Promise<boolean>): Promise<void> {
  const deadline = operator.now() + within;
  while (!(await probe())) {
    if (operator.now() > deadline) assert.fail(`${what}: not within ${within} ms`);
    await operator.elapse(10);
  }
}

async function won(port: RedisPort, keys: ElectionKeys, name: string, ttlMs: number): Promise<number> {
  const answer = await port.acquire(keys, name, ttlMs);
  assert.equal(answer.won, true, `${name}'s acquire should have won, got ${JSON.stringify(answer)}`);
  return (answer as { token: number }).token;
}

export const REDIS_FACTS: readonly Fact[] = [
  {
    title: "an acquire sets the key only when it is absent, and names the holder, its token and PTTL when it is not",
    async run(make) {
      const { port, keys } = await make();
      const token = await won(port, keys, "a", LONG_TTL_MS);
      assert.ok(Number.isSafeInteger(token) && token > 0, `token ${token}`);
      const lost = await port.acquire(keys, "b", LONG_TTL_MS);
      assert.equal(lost.won, false);
      if (lost.won) return;
      assert.equal(lost.holder, "a");
      assert.equal(lost.token, token);
      assert.ok(lost.pttl > LONG_TTL_MS - 5_000 && lost.pttl <= LONG_TTL_MS, `pttl ${lost.pttl}`);
      const read = await port.read(keys);
      assert.deepEqual(read && { holder: read.holder, token: read.token }, { holder: "a", token });
      assert.ok(read && read.pttl > 0 && read.pttl <= LONG_TTL_MS, `pttl ${read?.pttl}`);
    },
  },
  {
    title: "of acquires sent together exactly one wins (a script runs as one step)",
    async run(make) {
      const { port, keys } = await make();
      const answers = await Promise.all(["a", "b", "c", "d", "e"].map((name) => port.acquire(keys, name, LONG_TTL_MS)));
      assert.equal(answers.filter((answer) => answer.won).length, 1, JSON.stringify(answers));
    },
  },
  {
    title: "renew and release act only while the key holds the token; tokens grow from one win to the next",
    async run(make) {
      const { port, keys } = await make();
      const first = await won(port, keys, "a", LONG_TTL_MS);
      assert.equal(await port.renew(keys, first + 1, "a", 500), false);
      assert.equal(await port.release(keys, first - 1), false);
      assert.equal((await port.read(keys))?.holder, "a");
      assert.equal(await port.renew(keys, first, "a", 500), true);
      const renewed = (await port.read(keys))!.pttl;
      assert.ok(renewed <= 500 && renewed > 0, `PEXPIRE 500 left ${renewed} ms`);
      assert.equal(await port.release(keys, first), true);
      assert.equal(await port.read(keys), undefined);
      assert.equal(await port.renew(keys, first, "a", 500), false, "a released key cannot be renewed");
      const second = await won(port, keys, "b", LONG_TTL_MS);
      assert.ok(second > first, `${second} after ${first}`);
      assert.equal(await port.release(keys, first), false, "a late release of the first term leaves the second's key");
      assert.equal((await port.read(keys))?.holder, "b");
    },
  },
  {
    title: "a key expires its PX after the write, silently on the election's channel, and the next win has a higher token",
    async run(make) {
      const { port, keys, operator } = await make();
      const heard = await listen(port, [keys.channel]);
      try {
        const startedAt = operator.now();
        const first = await won(port, keys, "a", 200);
        assert.ok((await port.read(keys)) !== undefined);
        await eventually(operator, "the key to expire", 1_000, async () => (await port.read(keys)) === undefined);
        assert.ok(operator.now() - startedAt >= 190, `gone after ${operator.now() - startedAt} ms`);
        await operator.elapse(50);
        assert.deepEqual(
          heard.messages.map(([, message]) => message),
          [`acquired ${first} 200 a`],
          "the acquire is announced; the expiry is not",
        );
        const second = await won(port, keys, "b", LONG_TTL_MS);
        assert.ok(second > first);
      } finally {
        heard.stop();
      }
    },
  },
  {
    title: "acquires and releases are announced to subscribers connected then, not to one that subscribes later",
    async run(make) {
      const { port, keys, operator } = await make();
      const early = await listen(port, [keys.channel]);
      const token = await won(port, keys, "a", LONG_TTL_MS);
      await eventually(operator, "the acquire announced", 1_000, () => early.messages.length === 1);
      const late = await listen(port, [keys.channel]);
      await port.release(keys, token);
      await eventually(operator, "the release announced", 1_000, () => early.messages.length === 2 && late.messages.length === 1);
      assert.deepEqual(early.messages, [
        [keys.channel, `acquired ${token} ${LONG_TTL_MS} a`],
        [keys.channel, `released ${token} a`],
      ]);
      assert.deepEqual(late.messages, [[keys.channel, `released ${token} a`]]);
      // A renewal that finds the key gone says so, as a release.
      assert.equal(await port.renew(keys, token, "a", 1_000), false);
      await eventually(operator, "the vacant key announced", 1_000, () => late.messages.length === 2);
      assert.deepEqual(late.messages[1], [keys.channel, `released ${token} a`]);
      early.stop();
      late.stop();
    },
  },
  {
    title: "with keyspace notifications on (Kgx), an expiry, a DEL and a PEXPIRE of the key are told on its keyspace channel",
    async run(make) {
      const { port, keys, operator } = await make();
      const channel = port.keyspaceChannel(keys.key);
      assert.ok(channel, "a single server has a keyspace channel");
      await operator.notifyKeyspaceEvents("");
      assert.equal(await port.keyspaceEvents(), "");
      await operator.notifyKeyspaceEvents("Kgx");
      const flags = await port.keyspaceEvents();
      assert.ok(flags !== undefined && /K/.test(flags) && /g/.test(flags) && /x/.test(flags), `flags ${flags}`);
      const heard = await listen(port, [channel]);
      try {
        const token = await won(port, keys, "a", 150);
        await port.renew(keys, token, "a", 150);
        await eventually(operator, "the expiry told", 2_000, () => heard.messages.some(([, message]) => message === "expired"));
        await won(port, keys, "b", LONG_TTL_MS);
        await operator.del(keys.key);
        await eventually(operator, "the DEL told", 1_000, () => heard.messages.some(([, message]) => message === "del"));
        const told = heard.messages.map(([, message]) => message);
        // SET ... PX tells "set" and "expire"; PEXPIRE "expire".
        assert.deepEqual(
          told.filter((message) => message !== "set"),
          ["expire", "expire", "expired", "expire", "del"],
          `told ${JSON.stringify(told)}`,
        );
      } finally {
        heard.stop();
        await operator.notifyKeyspaceEvents("");
      }
    },
  },
  {
    title: "a value not written by the acquire is named whole with token 0, and is never renewed or released as ours",
    async run(make) {
      const { port, keys, operator } = await make();
      await operator.set(keys.key, "written by hand");
      assert.deepEqual(await port.read(keys), { holder: "written by hand", token: 0, pttl: -1 });
      assert.equal(await port.renew(keys, 0, "a", 1_000), false);
      assert.equal(await port.release(keys, 0), false);
      await operator.del(keys.key);
    },
  },
  {
    title: "a restart without persistence loses the key and its counter, and the next token is still higher (the server's clock)",
    async run(make) {
      const { port, keys, operator } = await make();
      const before = await won(port, keys, "a", LONG_TTL_MS);
      await operator.restart();
      assert.equal(await port.read(keys), undefined, "the key is lost");
      const after = await won(port, keys, "b", LONG_TTL_MS);
      assert.ok(after > before, `${after} after ${before}`);
    },
  },
];
