// The Redis backend end to end, through the etcd-leader/redis entry, against
// a real redis-server (7.0, no persistence): a hand-over with growing tokens
// and whileLeading; tokens that keep growing across a restart that lost
// every key, so that a resource fencing on them refuses the old leader; a
// key deleted from outside heard at once through keyspace notifications and,
// without them, at the one check scheduled at the key's PTTL; the observer
// and the one-shot reads; bad input refused at once.
import assert from "node:assert/strict";
import { after, afterEach, before, describe, it } from "node:test";
import { Redis } from "ioredis";
import type { Election } from "../../../src/election/election";
import { IoredisAdapter } from "../../../src/stores/redis/ioredis/adapter";
import { electionKeys } from "../../../src/stores/redis/scripts";
import { redisLeader, type RedisElectionOptions } from "../../../src/redis";
import { startRedis, type RedisServer } from "../../kit/redis-server";
import { deferred, exitOrFail, waitFor, withDeadline } from "../../kit/waiting";

/** Generous: elections settle in milliseconds, but the machine is shared. */
const BOUND_MS = 10_000;

let server: RedisServer;
const clients: Redis[] = [];
const elections = new Set<Election>();
let keys = 0;

before(async () => {
  server = await startRedis();
});

afterEach(async () => {
  await Promise.all([...elections].map((e) => e.leave()));
  elections.clear();
});

after(async () => {
  for (const client of clients) client.disconnect();
  await server?.close();
  exitOrFail();
});

function client(): Redis {
  const redis = new Redis(server.url, { retryStrategy: () => 50 });
  redis.on("error", () => undefined);
  clients.push(redis);
  return redis;
}

const freshKey = () => `election-${++keys}`;

async function member(key: string, name: string, options: RedisElectionOptions = {}): Promise<Election> {
  const election = await redisLeader(client(), key, name, { ttl: 2, ...options });
  elections.add(election);
  election.start();
  return election;
}

async function leaderOf(members: Election[]): Promise<Election> {
  const [leader] = await waitFor("one leader", BOUND_MS, () => {
    const leading = members.filter((m) => m.isLeader());
    return leading.length === 1 ? leading : undefined;
  });
  return leader!;
}

describe("etcd-leader/redis on a real redis-server", () => {
  it("hands over at once on leave, with a larger token, runs whileLeading only while leading, and names the leader to followers and observers", async () => {
    const key = freshKey();
    const observer = redisLeader.observe(client(), key, { ttl: 2 });
    const observed: Array<string | undefined> = [];
    observer.on("leader", (leader) => observed.push(leader));
    observer.start();
    const members = [await member(key, "a"), await member(key, "b")];
    const first = await leaderOf(members);
    const follower = members.find((m) => m !== first)!;
    await waitFor("the follower to name the leader", BOUND_MS, () => follower.currentLeader() === first.name);
    assert.deepEqual(await redisLeader.whoLeads(client(), key), { name: first.name, token: first.fencingToken() });
    assert.deepEqual(await redisLeader.candidates(client(), key), { scope: "leader", members: [{ name: first.name, token: first.fencingToken() }] });

    const started = deferred<AbortSignal>();
    const routine = first.whileLeading(async ({ signal }) => {
      started.resolve(signal);
      await new Promise((resolve) => signal.addEventListener("abort", resolve, { once: true }));
    });
    routine.catch(() => undefined);
    const signal = await withDeadline(started.promise, BOUND_MS, "the routine to start");
    const firstToken = first.fencingToken()!;
    const leftAt = performance.now();
    await first.leave();
    await assert.rejects(withDeadline(routine, BOUND_MS, "whileLeading to settle"), { name: "AbortError" });
    assert.equal(signal.aborted, true);
    await waitFor("the follower to lead", BOUND_MS, () => follower.isLeader());
    assert.ok(performance.now() - leftAt < 1_000, "the release is announced: no wait for the TTL");
    assert.ok(follower.fencingToken()! > firstToken);
    await waitFor("the observer to name the new leader", BOUND_MS, () => observed.at(-1) === follower.name);
    // (It may first have seen nobody lead, before the first win.)
    assert.equal(observed.find((name) => name !== undefined), first.name);
    observer.stop();
  });

  it("keeps tokens growing across a restart without persistence, so a resource fencing on them refuses the old leader", async () => {
    const key = freshKey();
    const a = await member(key, "a");
    await leaderOf([a]);
    const before = a.fencingToken()!;
    // A resource that accepts a write only with a token at least the largest it saw.
    let largestSeen = 0;
    const fencedWrite = (token: number) => {
      if (token < largestSeen) return false;
      largestSeen = token;
      return true;
    };
    assert.equal(fencedWrite(before), true);
    await server.restart();
    // The key and its counter are gone: a wins again, on a counter started from the server's clock.
    await waitFor("a new term after the restart", BOUND_MS, () => a.isLeader() && a.fencingToken()! !== before);
    const after = a.fencingToken()!;
    assert.ok(after > before, `${after} after ${before}`);
    assert.equal(fencedWrite(after), true);
    assert.equal(fencedWrite(before), false, "the old term's token is refused");
    const stored = await client().get(electionKeys(key).counter);
    assert.equal(Number(stored), after);
  });

  for (const notifications of [true, false]) {
    it(
      notifications
        ? "with keyspace notifications on, a follower hears an outside DEL of a silent holder's key at once"
        : "without keyspace notifications, a follower learns of an outside DEL of a silent holder's key at the one check at its PTTL",
      async () => {
        await server.notifyKeyspaceEvents(notifications ? "Kgx" : "");
        try {
          const key = freshKey();
          const keys = electionKeys(key);
          // A holder that never renews nor watches (a paused process): its key lives 1.5 s.
          const won = await new IoredisAdapter(client(), 5_000).acquire(keys, "silent", 1_500);
          assert.equal(won.won, true);
          const follower = await member(key, "follower");
          await waitFor("the follower to name the holder", BOUND_MS, () => follower.currentLeader() === "silent");
          const deletedAt = performance.now();
          await client().del(keys.key);
          await waitFor("the follower to lead", BOUND_MS, () => follower.isLeader());
          const after = performance.now() - deletedAt;
          if (notifications) assert.ok(after < 500, `elected ${Math.round(after)} ms after the DEL`);
          else assert.ok(after > 800 && after < 1_500 + 500, `elected ${Math.round(after)} ms after the DEL, at the check`);
        } finally {
          await server.notifyKeyspaceEvents("");
        }
      },
    );
  }

  it("refuses bad input at once, naming it", async () => {
    const redis = client();
    await assert.rejects(redisLeader("redis://localhost" as never, "k", "a"), /redis must be an ioredis client .*the string "redis:\/\/localhost"/);
    await assert.rejects(redisLeader({} as never, "k", "a"), /redis must be an ioredis client/);
    await assert.rejects(redisLeader(redis, "", "a"), /key must be a non-empty string/);
    await assert.rejects(redisLeader(redis, "a{b}", "a"), /holds a brace/);
    await assert.rejects(redisLeader(redis, "k", " "), /name must be a non-empty string/);
    await assert.rejects(redisLeader(redis, "k", "a", { keyspaceNotifications: "yes" as never }), /keyspaceNotifications must be "auto", true or false, got "yes"/);
    await assert.rejects(redisLeader(redis, "k", "a", { ttl: 0 }), /ttl must be a positive whole number/);
    await assert.rejects(redisLeader(redis, "k", "a", { refreshIntervall: 1 } as never), /unknown option "refreshIntervall"/);
    await assert.rejects(redisLeader(redis, "k", "a", { v2: {} }), /v2 option is for the etcd v2 store/);
    await assert.rejects(redisLeader.whoLeads(redis, "k", { requestTimeout: -1 }), /requestTimeout must be a positive number/);
    const election = await redisLeader({ redis, key: "k", name: "a", ttl: 3 });
    assert.equal(election.isRunning(), false);
  });
});
