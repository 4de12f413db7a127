// The election's whole surface on the PostgreSQL and Redis stores, against
// real servers: whenElected resolves with the token a leader's whileLeading
// sees; leaderChanges yields each leader in turn; health() says who is live
// and ready; the diagnostics channels carry state changes and renewals
// named after the store; yield() hands over to the other member. What the
// etcd and NATS tests check store by store, once here for the two stores
// whose members hold nothing while they follow.
import assert from "node:assert/strict";
import { subscribe, unsubscribe } from "node:diagnostics_channel";
import { after, before, describe, it } from "node:test";
import { Redis } from "ioredis";
import pg from "pg";
import { channels, type RenewalMessage, type StateMessage } from "../../src/election/diagnostics";
import type { Election } from "../../src/election/election";
import { postgresLeader } from "../../src/postgres";
import { redisLeader } from "../../src/redis";
import { startPostgres, type PostgresServer } from "../kit/postgres-server";
import { startRedis, type RedisServer } from "../kit/redis-server";
import { exitOrFail, waitFor } from "../kit/waiting";

/** Generous: elections settle in milliseconds, but the machine is shared. */
const BOUND_MS = 10_000;

interface Store {
  readonly label: string;
  /** A member on a client of its own. */
  member(key: string, name: string): Promise<Election>;
  /** The entry's one-shot reads, on a client of their own. */
  reads(): { whoLeads: (key: string, options: object) => Promise<unknown>; candidates: (key: string, options: object) => Promise<unknown> };
  /** How the store names the election in diagnostics and health. */
  readonly described: RegExp;
}

let postgres: PostgresServer;
let redis: RedisServer;
const closers: Array<() => Promise<unknown> | void> = [];

before(async () => {
  [postgres, redis] = await Promise.all([startPostgres(), startRedis()]);
});

after(async () => {
  for (const close of closers.reverse()) await close();
  await Promise.all([postgres?.close(), redis?.close()]);
  exitOrFail();
});

const STORES: readonly Store[] = [
  {
    label: "PostgreSQL",
    described: /^PostgreSQL /,
    async member(key, name) {
      const pool = new pg.Pool({ connectionString: postgres.url, max: 3 });
      pool.on("error", () => undefined);
      closers.push(() => pool.end().catch(() => undefined));
      return postgresLeader(pool, key, name, { ttl: 2 });
    },
    reads() {
      const pool = new pg.Pool({ connectionString: postgres.url, max: 1 });
      closers.push(() => pool.end().catch(() => undefined));
      return { whoLeads: (key, options) => postgresLeader.whoLeads(pool, key, options), candidates: (key, options) => postgresLeader.candidates(pool, key, options) };
    },
  },
  {
    label: "Redis",
    described: /^Redis /,
    async member(key, name) {
      const client = new Redis(redis.url, { retryStrategy: () => 50 });
      client.on("error", () => undefined);
      closers.push(() => client.disconnect());
      return redisLeader(client, key, name, { ttl: 2 });
    },
    reads() {
      const client = new Redis(redis.url, { retryStrategy: () => 50 });
      closers.push(() => client.disconnect());
      return { whoLeads: (key, options) => redisLeader.whoLeads(client, key, options), candidates: (key, options) => redisLeader.candidates(client, key, options) };
    },
  },
];

let keys = 0;

for (const store of STORES) {
  describe(`the election's API on ${store.label}`, () => {
    it("whenElected, leaderChanges, health, the diagnostics channels and yield", async () => {
      const key = `api-${++keys}`;
      const states: StateMessage[] = [];
      const renewals: RenewalMessage[] = [];
      const onState = (message: unknown) => void states.push(message as StateMessage);
      const onRenewal = (message: unknown) => void renewals.push(message as RenewalMessage);
      subscribe(channels.state, onState);
      subscribe(channels.renewal, onRenewal);
      const a = await store.member(key, "a");
      const b = await store.member(key, "b");
      closers.push(() => a.leave(), () => b.leave());
      try {
        // Bounded: a member that never names the leader fails the case instead of hanging it.
        const changes = b.leaderChanges({ signal: AbortSignal.timeout(BOUND_MS) });
        const token = await a.whenElected({ signal: AbortSignal.timeout(BOUND_MS) });
        assert.equal(a.fencingToken(), token);
        const routine = a.whileLeading(async (term) => term.token);
        b.start();
        // b's view: nobody, or a at once, then a.
        const seen: Array<string | undefined> = [];
        for await (const leader of changes) {
          seen.push(leader?.name);
          if (leader?.name === "a") break;
        }
        assert.equal(seen.at(-1), "a");
        assert.equal(await routine, token, "whileLeading's term carries the token whenElected gave");

        await waitFor("a renewal reported", BOUND_MS, () => renewals.find((r) => r.member === "a" && r.leading));
        const health = a.health({ readiness: "leader" });
        assert.equal(health.leading, true);
        assert.equal(health.ready.ok, true);
        assert.equal(health.live.ok, true);
        assert.match(health.store, store.described);
        const follower = b.health({ readiness: "leader" });
        assert.equal(follower.leader, "a");
        assert.equal(follower.ready.ok, false, "with readiness 'leader', a follower is not ready");
        assert.equal(follower.live.ok, true);
        const leading = states.find((s) => s.member === "a" && s.to === "leading");
        assert.ok(leading, "a's change to leading went out on the state channel");
        assert.equal(leading.token, token);
        assert.match(leading.store, store.described);

        await a.yield({ signal: AbortSignal.timeout(BOUND_MS) });
        await waitFor("b to lead after a yielded", BOUND_MS, () => b.isLeader() || undefined);
        assert.ok(b.fencingToken()! > token, "the next term's token is larger");
        assert.equal(a.isLeader(), false);
      } finally {
        unsubscribe(channels.state, onState);
        unsubscribe(channels.renewal, onRenewal);
      }
    });

    it("the one-shot reads refuse a signal already aborted, and one that is no signal, at once", async () => {
      const { whoLeads, candidates } = store.reads();
      const reason = new Error("given up before it began");
      for (const read of [whoLeads, candidates]) {
        await assert.rejects(read("k", { signal: AbortSignal.abort(reason) }), (err: Error) => err.name === "AbortError" && err.cause === reason);
        await assert.rejects(read("k", { signal: "soon" }), /signal must be an AbortSignal/);
        await assert.rejects(read("k", { requestTimeout: 0 }), /requestTimeout must be a positive number/);
      }
    });
  });
}
