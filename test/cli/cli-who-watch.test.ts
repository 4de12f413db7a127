// `etcd-leader who` and `etcd-leader watch` against a real etcd, in readable
// and JSON form, on both APIs and on a NATS KV bucket (--backend nats): who prints the leader and its token (exit 0) or
// that nobody leads (exit 3); watch prints every change as it happens.
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { describe, it } from "node:test";
import { BACKENDS } from "../faults/types";
import { runCli, startCli, useCliTestEnvironment, type CliStore } from "../kit/cli-process";
import { CHILD } from "../kit/command-log";

const START_MS = 30_000;

const STORES: readonly CliStore[] = [...BACKENDS, "nats"];

// The runs' --ttl 2 is also the NATS bucket's TTL.
const { storeArgs, newLog } = useCliTestEnvironment(undefined, { nats: true });

for (const api of STORES) {
  describe(`etcd-leader who and watch (${api === "nats" ? "NATS KV" : `etcd ${api}`})`, { timeout: 120_000 }, () => {
    const connection = () => storeArgs(api);

    it("who prints the leader and its fencing token, or that nobody leads (exit 3), in both formats", async () => {
      const key = `/cli-who/${randomUUID()}`;
      const nobody = await runCli(["who", ...connection(), key]);
      assert.equal(nobody.code, 3);
      assert.equal(nobody.stdout, `nobody leads ${key}`);
      const nobodyJson = await runCli(["who", "--json", ...connection(), key]);
      assert.equal(nobodyJson.code, 3);
      assert.deepEqual(JSON.parse(nobodyJson.stdout), { key, leader: null });

      const log = newLog();
      const a = startCli(["run", "--json", ...connection(), "--ttl", "2", "--name", "worker-a", key, "--", process.execPath, CHILD, log.path]);
      const elected = await a.next("elected", START_MS);
      // On NATS a one-shot read sees the key's latest revision: the fencing token until the
      // leader's first renewal, a larger number after (the entry holds the bare name only).
      const token = (shown: number) => (api === "nats" && shown >= Number(elected.value) ? elected.value : shown);
      const readable = await runCli(["who", ...connection(), key]);
      assert.equal(readable.code, 0);
      const shown = /^worker-a leads (\S+) \(fencing token (\d+)\)$/.exec(readable.stdout);
      assert.ok(shown, readable.stdout);
      assert.deepEqual([shown[1], token(Number(shown[2]))], [key, elected.value]);
      const json = await runCli(["status", "--json", ...connection(), key]);
      assert.equal(json.code, 0);
      const parsed = JSON.parse(json.stdout) as { key: string; leader: { name: string; token: number } };
      assert.deepEqual({ ...parsed, leader: { ...parsed.leader, token: token(parsed.leader.token) } }, { key, leader: { name: "worker-a", token: elected.value } });
      a.kill("SIGTERM");
      await a.exited;
    });

    it("who --all prints every member in line, the leader first (on NATS KV the leader alone, and says so)", async () => {
      const key = `/cli-who-all/${randomUUID()}`;
      const log = newLog();
      const run = (name: string) => startCli(["run", "--json", ...connection(), "--ttl", "2", "--name", name, key, "--", process.execPath, CHILD, log.path]);
      const a = run("worker-a");
      const elected = await a.next("elected", START_MS);
      const b = run("worker-b");
      await b.next("leader", START_MS);
      const json = await runCli(["who", "--all", "--json", ...connection(), key]);
      assert.equal(json.code, 0, json.stderr);
      const line = JSON.parse(json.stdout) as { key: string; scope: string; members: Array<{ name: string; token: number }> };
      const readable = await runCli(["who", "--all", ...connection(), key]);
      assert.equal(readable.code, 0, readable.stderr);
      if (api === "nats") {
        assert.deepEqual([line.scope, line.members.map((m) => m.name)], ["leader", ["worker-a"]]);
        assert.match(readable.stdout, /^leader +worker-a \(token \d+\)\n\(NATS KV .*only the leader is known\)$/);
      } else {
        assert.deepEqual([line.scope, line.members.map((m) => m.name)], ["line", ["worker-a", "worker-b"]]);
        assert.equal(line.members[0]!.token, elected.value);
        assert.match(readable.stdout, new RegExp(`^leader +worker-a \\(token ${elected.value}\\)\\n +2 +worker-b \\(token \\d+\\)$`));
      }
      a.kill("SIGTERM");
      b.kill("SIGTERM");
      await Promise.all([a.exited, b.exited]);
      const nobody = await runCli(["who", "--all", ...connection(), key]);
      assert.deepEqual([nobody.code, nobody.stdout], [3, `nobody leads ${key}`]);
    });

    for (const format of ["readable", "json"] as const) {
      it(`watch prints each change of leader as it happens (${format})`, async () => {
        const key = `/cli-watch/${randomUUID()}`;
        const log = newLog();
        const watcher = startCli(["watch", ...(format === "json" ? ["--json"] : []), ...connection(), key]);
        const lines = () => watcher.stdout.map((line) => (format === "json" ? describeJson(line) : line.replace(/^\S+ /, "")));
        const run = (name: string) =>
          startCli(["run", "--json", ...connection(), "--ttl", "2", "--name", name, key, "--", process.execPath, CHILD, log.path]);
        await watcher.until("the first line", START_MS, () => lines()[0]);
        const a = run("a");
        const aElected = await a.next("elected", START_MS);
        await watcher.until("a leads", 10_000, () => lines().find((l) => l.startsWith("a leads")));
        const b = run("b");
        await b.next("leader", START_MS);
        a.kill("SIGTERM");
        const bElected = await b.next("elected", 15_000);
        await watcher.until("b leads", 10_000, () => lines().find((l) => l.startsWith("b leads")));
        b.kill("SIGTERM");
        await b.exited;
        await watcher.until("nobody leads again", 10_000, () => (lines().length >= 3 && lines().at(-1)!.startsWith("nobody") ? true : undefined));
        // Between a and b there may or may not be a moment with nobody leading, as the watcher sees it.
        const seen = lines().filter((line, i, all) => i === 0 || line !== all[i - 1]);
        const withoutGaps = seen.filter((line, i) => !(line.startsWith("nobody") && i > 0 && i < seen.length - 1));
        assert.deepEqual(withoutGaps, [
          `nobody leads ${key}`,
          `a leads ${key} (fencing token ${aElected.value})`,
          `b leads ${key} (fencing token ${bElected.value})`,
          `nobody leads ${key}`,
        ]);
        if (format === "readable") assert.match(watcher.stdout[0]!, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z /, "lines start with an ISO timestamp");
        watcher.kill("SIGINT");
        assert.equal((await watcher.exited).code, 0);
        await a.exited;
      });
    }
  });
}

/** A JSON line of watch, in the readable form, checking its fields on the way. */
function describeJson(line: string): string {
  const parsed = JSON.parse(line) as { at: string; key: string; leader: { name: string; token: number } | null };
  assert.ok(!Number.isNaN(Date.parse(parsed.at)), `an ISO timestamp: ${parsed.at}`);
  return parsed.leader ? `${parsed.leader.name} leads ${parsed.key} (fencing token ${parsed.leader.token})` : `nobody leads ${parsed.key}`;
}
