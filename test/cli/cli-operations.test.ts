// What `etcd-leader run` offers operators, the CLI spawned as a real process
// on each store: --health-addr serves /livez and /readyz for its member (with
// --readiness leader only the leader's /readyz passes, and it moves with the
// leadership), --metrics-addr serves /metrics (on the same server when the
// address is the same), and SIGUSR1 makes the leader yield. Bad flags are
// usage errors that name the value.
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { describe, it } from "node:test";
import { BACKENDS } from "../faults/types";
import { NATS_BUCKET_TTL_SECONDS, runCli, startCli, useCliTestEnvironment, type CliProcess, type CliStore } from "../kit/cli-process";
import { CHILD, type CommandLog } from "../kit/command-log";
import { freePort } from "../kit/free-port";
import { waitFor } from "../kit/waiting";

const START_MS = 30_000;
const STORES: readonly CliStore[] = [...BACKENDS, "nats"];

const { storeArgs, newLog } = useCliTestEnvironment(() => undefined, { nats: true });

function runArgs(api: CliStore, key: string, name: string, log: CommandLog, extra: string[]): string[] {
  return ["run", "--json", ...storeArgs(api), "--ttl", String(NATS_BUCKET_TTL_SECONDS), "--name", name, ...extra, key, "--", process.execPath, CHILD, log.path];
}

/** The URL the CLI reported it serves its probes at. */
async function probesOf(cli: CliProcess): Promise<string> {
  const health = await cli.next("health", START_MS);
  return String((health as { url?: unknown }).url);
}

async function status(url: string): Promise<{ status: number; reason: string }> {
  const response = await fetch(url, { signal: AbortSignal.timeout(5_000) });
  const body = (await response.json()) as { elections: Array<{ reason: string }> };
  return { status: response.status, reason: body.elections[0]?.reason ?? "" };
}

for (const api of STORES) {
  describe(`etcd-leader run --health-addr (${api === "nats" ? "NATS KV" : `etcd ${api}`})`, { timeout: 90_000 }, () => {
    it("serves /livez and /readyz; with --readiness leader only the leader is ready, and readiness moves with the leadership", async () => {
      const key = `/cli-health/${randomUUID()}`;
      const log = newLog();
      const probes = ["--health-addr", "127.0.0.1:0", "--readiness", "leader"];
      // a serves its metrics on the same address as its probes: one server.
      const shared = `127.0.0.1:${await freePort()}`;
      const a = startCli(runArgs(api, key, "a", log, ["--health-addr", shared, "--readiness", "leader", "--metrics-addr", shared]));
      const aUrl = await probesOf(a);
      assert.equal(aUrl, `http://${shared}`);
      const metricsAt = await a.next("metrics", START_MS);
      assert.equal((metricsAt as { url?: unknown }).url, `http://${shared}`);
      await a.next("elected", START_MS);
      const metrics = await (await fetch(`${aUrl}/metrics`)).text();
      assert.match(metrics, /^etcd_leader_is_leader\{election="[^"]+",member="a"\} 1$/m);
      assert.match(metrics, /^etcd_leader_time_to_first_term_seconds\{/m);
      assert.equal((await fetch(`${aUrl}/nothing`)).status, 404);
      const b = startCli(runArgs(api, key, "b", log, probes));
      const bUrl = await probesOf(b);
      await b.next("leader", START_MS);
      assert.deepEqual([(await status(`${aUrl}/readyz`)).status, (await status(`${aUrl}/livez`)).status], [200, 200]);
      const waiting = await status(`${bUrl}/readyz`);
      assert.equal(waiting.status, 503);
      assert.match(waiting.reason, /a leads/);
      assert.equal((await status(`${bUrl}/livez`)).status, 200);

      a.kill("SIGTERM");
      await b.next("elected", START_MS);
      await waitFor("b's /readyz to pass", 10_000, async () => (await status(`${bUrl}/readyz`)).status === 200);
      await b.stop();
    });
  });
}

for (const api of STORES) {
  describe(`etcd-leader run, SIGUSR1 (${api === "nats" ? "NATS KV" : `etcd ${api}`})`, { timeout: 90_000 }, () => {
    it("the leader yields: its command stops, the next member's starts, and it stays in the election behind", async () => {
      const key = `/cli-yield/${randomUUID()}`;
      const log = newLog();
      const a = startCli(runArgs(api, key, "a", log, []));
      await log.waitFor("a's command", START_MS, (r) => r.find((x) => x.event === "start" && x.name === "a"));
      const b = startCli(runArgs(api, key, "b", log, []));
      await b.next("leader", START_MS);
      process.kill(a.pid, "SIGUSR1");
      await a.next("yield", START_MS);
      await log.waitFor("b's command", START_MS, (r) => r.find((x) => x.event === "start" && x.name === "b"));
      const yielded = await a.next("yielded", START_MS);
      assert.equal((yielded as { leader?: unknown }).leader, "b");
      assert.ok(log.records().some((r) => r.event === "sigterm" && r.name === "a"), "a's command was stopped");
      assert.equal(a.count("exit"), 0, "a is still running, in the election");

      // b leaves: a, at the back of the line, leads again and its command starts again.
      b.kill("SIGTERM");
      await log.waitFor("a's command again", START_MS, (r) => r.filter((x) => x.event === "start" && x.name === "a")[1]);
      await a.stop();
    });
  });
}

describe("etcd-leader run --health-addr: bad flags", () => {
  for (const [flags, message] of [
    [["--health-addr", "localhost"], /--health-addr must be HOST:PORT .* got "localhost"/],
    [["--health-addr", "127.0.0.1:70000"], /--health-addr must be HOST:PORT/],
    [["--health-addr", "127.0.0.1:0", "--readiness", "all"], /--readiness must be member .* or leader .* got "all"/],
    [["--readiness", "leader"], /--readiness goes with --health-addr/],
    [["--health-addr", "127.0.0.1:0", "--unhealthy-after", "0"], /--unhealthy-after must be a number of at least 0.001, got "0"/],
    [["--metrics-addr", "9464"], /--metrics-addr must be HOST:PORT .* got "9464"/],
  ] as const) {
    it(`${flags.join(" ")}: exit 64 with a message naming the value`, async () => {
      const { code, stderr } = await runCli(["run", ...storeArgs("v3"), ...flags, "/cli-health/bad", "--", "true"]);
      assert.equal(code, 64);
      assert.match(stderr, message);
    });
  }

  it("an address already taken: exit 69 naming it", async () => {
    const { createServer } = await import("node:net");
    const taken = createServer();
    await new Promise<void>((resolve) => taken.listen(0, "127.0.0.1", resolve));
    const { port } = taken.address() as { port: number };
    try {
      const { code, stderr } = await runCli(["run", ...storeArgs("v3"), "--health-addr", `127.0.0.1:${port}`, "/cli-health/taken", "--", "true"]);
      assert.equal(code, 69);
      assert.match(stderr, new RegExp(`--health-addr 127\\.0\\.0\\.1:${port}: cannot listen there \\(EADDRINUSE\\)`));
    } finally {
      taken.close();
    }
  });
});
