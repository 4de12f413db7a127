// `etcd-leader run` with --on-elected / --on-unelected hooks, end to end
// against a real etcd: the hooks run in order around the command, a failing
// begin hook gives up leadership (the error state), and an end hook that keeps
// failing makes the CLI leave and exit 75 instead of going on as if nothing
// happened.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { randomUUID } from "node:crypto";
import { describe, it } from "node:test";
import { BACKENDS } from "../faults/types";
import { runCli, startCli, useCliTestEnvironment } from "../kit/cli-process";
import { CHILD, CommandLog } from "../kit/command-log";

const START_MS = 30_000;

const { endpoint, newLog } = useCliTestEnvironment();

/** A hook that appends `event` to the log, as the command does, and exits with `code`. */
function hook(log: CommandLog, event: string, code = 0): string {
  return `printf '{"event":"%s","name":"%s","token":%s,"pid":%s,"at":%s}\\n' ${event} "$ETCD_LEADER_NAME" "$ETCD_LEADER_TOKEN" $$ "$(date +%s%3N)" >> ${log.path}; exit ${code}`;
}

function base(api: string, name: string): string[] {
  return ["run", "--json", "--api", api, "--endpoints", endpoint(), "--ttl", "2", "--name", name];
}

for (const api of BACKENDS) {
  describe(`etcd-leader run with hooks (${api})`, { timeout: 120_000 }, () => {
    it("runs the begin hook before the command and the end hook after it stopped, with the term's token", async () => {
      const key = `/cli-hooks/${randomUUID()}`;
      const log = newLog();
      const a = startCli([...base(api, "a"), "--on-elected", hook(log, "begin"), "--on-unelected", hook(log, "end"), key, "--", process.execPath, CHILD, log.path]);
      await log.waitFor("the command", START_MS, (r) => r.find((x) => x.event === "start"));
      a.kill("SIGTERM");
      assert.equal((await a.exited).code, 0, a.output());
      const records = log.records();
      assert.deepEqual(records.map((r) => r.event), ["begin", "start", "sigterm", "exit", "end"]);
      assert.equal(new Set(records.map((r) => r.token)).size, 1, "one term's token throughout");
      assert.equal(records[0]!.name, "a");
    });

    it("a begin hook that keeps failing gives up leadership: the member leaves, another leads, and it rejoins later", async () => {
      const key = `/cli-hooks/${randomUUID()}`;
      const log = newLog();
      const a = startCli([...base(api, "a"), "--on-elected", hook(log, "begin", 1), "--on-unelected", hook(log, "end"), "--hook-retries", "1", "--error-delay", "2", key, "--", process.execPath, CHILD, log.path]);
      const errorState = await a.next("error-state", START_MS);
      assert.deepEqual(log.records().map((r) => r.event), ["begin", "begin", "end"], "two tries, then the end hook undoes it");
      assert.equal(a.count("hook-failed"), 2);
      // Out of the election: nobody leads, so b is elected at once.
      const b = startCli([...base(api, "b"), key, "--", process.execPath, CHILD, log.path]);
      const bStart = await log.waitFor("b's command", START_MS, (r) => r.find((x) => x.event === "start"));
      assert.equal(bStart.name, "b");
      // After the error delay, a joins again and waits behind b.
      const rejoin = await a.next("leader", 15_000, a.seen.indexOf(errorState));
      assert.equal(rejoin.value, "b");
      assert.equal(log.records().filter((r) => r.name === "a" && r.event === "start").length, 0, "a's command never ran");
      b.kill("SIGTERM");
      a.kill("SIGTERM");
      await Promise.all([a.exited, b.exited]);
    });

    it("an end hook that keeps failing makes the CLI leave the election and exit 75 with a clear message", async () => {
      const key = `/cli-hooks/${randomUUID()}`;
      const log = newLog();
      const a = startCli([...base(api, "a"), "--on-unelected", hook(log, "end", 1), "--hook-retries", "2", key, "--", process.execPath, CHILD, log.path]);
      await log.waitFor("the command", START_MS, (r) => r.find((x) => x.event === "start"));
      a.kill("SIGTERM");
      const { code } = await a.exited;
      assert.equal(code, 75, a.output());
      assert.equal(log.records().filter((r) => r.event === "end").length, 3, "three tries");
      assert.ok(a.stderr.some((line) => line.includes("the on-unelected hook still failed after its retries")), a.output());
      assert.ok(!a.stderr.some((line) => /^\s+at /.test(line)), "no stack trace");
      const who = await runCli(["who", "--api", api, "--endpoints", endpoint(), key]);
      assert.equal(who.code, 3, "the member left");
    });
  });
}

describe("etcd-leader run with hooks, and what a hook leaves in its process group (v3)", { timeout: 60_000 }, () => {
  it("a hook whose shell leaves a background job is done when the job is: the command starts after it", async () => {
    const key = `/cli-hooks/${randomUUID()}`;
    const log = newLog();
    const a = startCli([...base("v3", "a"), "--on-elected", `sleep 1 & ${hook(log, "begin")}`, key, "--", process.execPath, CHILD, log.path]);
    const start = await log.waitFor("the command", START_MS, (r) => r.find((x) => x.event === "start"));
    const begin = log.records().find((r) => r.event === "begin")!;
    assert.ok(start.at - begin.at >= 900, `the command started ${start.at - begin.at} ms after the hook's shell exited, before its sleep ended`);
    a.kill("SIGTERM");
    assert.equal((await a.exited).code, 0, a.output());
  });
});

describe("etcd-leader run with hooks, leadership lost (v3)", { timeout: 60_000 }, () => {
  it("an end hook that fails after the membership was deleted from outside makes the CLI exit 75", async () => {
    const key = `/cli-hooks/${randomUUID()}`;
    const log = newLog();
    const a = startCli([...base("v3", "a"), "--on-elected", hook(log, "begin"), "--on-unelected", hook(log, "end", 1), "--hook-retries", "0", key]);
    await log.waitFor("the begin hook", START_MS, (r) => r.find((x) => x.event === "begin"));
    const del = spawnSync("etcdctl", [`--endpoints=${endpoint()}`, "del", "--prefix", `${key}/`], { encoding: "utf8" });
    assert.equal(del.status, 0, del.stderr);
    const { code } = await a.exited;
    assert.equal(code, 75, a.output());
    assert.ok(a.count("unelected") > 0);
    assert.deepEqual(log.records().map((r) => r.event), ["begin", "end"]);
  });
});
