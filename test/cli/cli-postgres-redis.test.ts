// The `etcd-leader` command on PostgreSQL (--backend postgres) and Redis
// (--backend redis), against real servers: `run` starts its command with the
// fencing token once elected, a clean stop hands the election to the next
// member at once; `who` and `who --all` name the leader (only the leader:
// followers hold nothing there, and the output says so); `watch` prints each
// change; the URL comes from --url or from DATABASE_URL / REDIS_URL.
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { after, afterEach, before, describe, it } from "node:test";
import { killAllClis, runCli, startCli } from "../kit/cli-process";
import { CHILD, CommandLog } from "../kit/command-log";
import { startPostgres, type PostgresServer } from "../kit/postgres-server";
import { startRedis, type RedisServer } from "../kit/redis-server";
import { exitOrFail } from "../kit/waiting";

const START_MS = 30_000;
const TTL_SECONDS = 10;

let postgres: PostgresServer;
let redis: RedisServer;
const logs: CommandLog[] = [];

before(async () => {
  [postgres, redis] = await Promise.all([startPostgres(), startRedis()]);
});

afterEach(async () => {
  await killAllClis();
});

after(async () => {
  await killAllClis();
  await Promise.all([postgres?.close(), redis?.close()]);
  for (const log of logs) log.remove();
  exitOrFail();
});

const STORES = [
  { backend: "postgres", label: "PostgreSQL", url: () => postgres.url, env: "DATABASE_URL" },
  { backend: "redis", label: "Redis", url: () => redis.url, env: "REDIS_URL" },
] as const;

for (const store of STORES) {
  describe(`etcd-leader on ${store.label} (--backend ${store.backend})`, { timeout: 60_000 }, () => {
    it("run, who, who --all and watch: a leader, a clean hand-over with a larger token, and nobody after", async () => {
      const key = `cli-${randomUUID()}`;
      const flags = ["--backend", store.backend, "--url", store.url()];
      const log = new CommandLog();
      logs.push(log);
      // The URL from the environment, as those ecosystems give it.
      const nobody = await runCli(["who", "--backend", store.backend, key], undefined, { [store.env]: store.url() });
      assert.deepEqual([nobody.code, nobody.stdout], [3, `nobody leads ${key}`], nobody.stderr);

      const watcher = startCli(["watch", "--json", ...flags, key]);
      const seen = () => watcher.stdout.map((line) => (JSON.parse(line) as { leader: { name: string } | null }).leader?.name ?? "nobody");
      await watcher.until("the first line", START_MS, () => seen()[0]);
      // A long TTL, so that a hand-over at once cannot be mistaken for the lease running out.
      const run = (name: string) =>
        startCli(["run", "--json", ...flags, "--ttl", String(TTL_SECONDS), "--name", name, key, "--", process.execPath, CHILD, log.path]);
      const a = run("a");
      const aElected = await a.next("elected", START_MS);
      const b = run("b");
      await b.next("leader", START_MS);

      const who = await runCli(["who", ...flags, key]);
      assert.deepEqual([who.code, who.stdout], [0, `a leads ${key} (fencing token ${aElected.value})`], who.stderr);
      const all = await runCli(["who", "--all", "--json", ...flags, key]);
      assert.equal(all.code, 0, all.stderr);
      assert.deepEqual(JSON.parse(all.stdout), { key, scope: "leader", members: [{ name: "a", token: aElected.value }] });
      const readable = await runCli(["who", "--all", ...flags, key]);
      assert.match(readable.stdout, /only the leader is known/);
      const started = await log.waitFor("a's command", START_MS, (records) => records.find((r) => r.event === "start" && r.name === "a"));
      assert.equal(started.token, aElected.value, "the command got the fencing token in ETCD_LEADER_TOKEN");

      const stoppedAt = Date.now();
      a.kill("SIGTERM");
      const bElected = await b.next("elected", START_MS);
      assert.ok(bElected.value > aElected.value, `b's token ${bElected.value} is above a's ${aElected.value}`);
      // A clean stop hands over at once, not when the lease runs out (5 s after a's last renewal at the earliest).
      assert.ok(bElected.at - stoppedAt < TTL_SECONDS * 500, `b was elected ${bElected.at - stoppedAt} ms after a's stop`);
      assert.equal((await a.exited).code, 0);
      await watcher.until("b leads", START_MS, () => seen().includes("b") || undefined);
      b.kill("SIGTERM");
      assert.equal((await b.exited).code, 0);
      await watcher.until("nobody again", START_MS, () => (seen().at(-1) === "nobody" && seen().includes("b") ? true : undefined));
      const changes = seen().filter((name, i, names) => i === 0 || name !== names[i - 1]);
      assert.deepEqual(changes.filter((name, i) => name !== "nobody" || i === 0 || i === changes.length - 1), ["nobody", "a", "b", "nobody"]);
      watcher.kill("SIGINT");
      assert.equal((await watcher.exited).code, 0);
    });
  });
}
