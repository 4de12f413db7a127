// The step-down guarantee carried to the command: the leading CLI is cut off
// from etcd at a fault proxy (nothing passes, no reset), and its command must
// get SIGTERM before the other CLI's command starts, in every run. Two CLIs,
// each behind its own proxy, take turns: each run cuts whichever leads, waits
// for the other's command, heals, and waits for the cut one to follow again.
//
// CLI_PARTITION_RUNS (default 10) sets the runs per API. Printed figures: from
// the term's abort (the CLI's command-stop report) to the command's SIGTERM
// handler, and from that SIGTERM to the successor's command start.
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { afterEach, describe, it } from "node:test";
import { BACKENDS } from "./faults/types";
import { CHILD, overlaps, startCli, useCliTestEnvironment, type CliProcess } from "./helpers/cli-process";
import { FaultProxy } from "./helpers/fault-proxy";

const RUNS = Math.max(1, Number(process.env.CLI_PARTITION_RUNS ?? 10));
const START_MS = 30_000;
const FAILOVER_MS = 15_000;

const proxies: FaultProxy[] = [];
const { etcd, newLog } = useCliTestEnvironment();

afterEach(async () => {
  await Promise.all(proxies.splice(0).map((proxy) => proxy.close()));
});

for (const api of BACKENDS) {
  describe(`etcd-leader run, leader cut off at a proxy (${api})`, { timeout: 60_000 + RUNS * 30_000 }, () => {
    it(`the cut leader's command gets SIGTERM before the other's command starts, in each of ${RUNS} runs`, async (t) => {
      const key = `/cli-partition/${randomUUID()}`;
      const log = newLog();
      const members: { name: string; proxy: FaultProxy; cli: CliProcess }[] = [];
      for (const name of ["a", "b"]) {
        const proxy = await FaultProxy.start({ upstream: etcd().hostPorts[0]! });
        proxies.push(proxy);
        const args = ["run", "--json", "--api", api, "--endpoints", proxy.url, "--ttl", "2", "--grace", "1", "--name", name, key, "--", process.execPath, CHILD, log.path];
        members.push({ name, proxy, cli: startCli(args) });
        // a leads first; b joins behind it.
        if (name === "a") await log.waitFor("a's command", START_MS, (r) => r.find((x) => x.event === "start"));
        else await members[1]!.cli.waitForEvent("leader", START_MS);
      }
      const abortToSigterm: number[] = [];
      const sigtermToSuccessor: number[] = [];
      for (let run = 0; run < RUNS; run++) {
        const starts = log.records().filter((r) => r.event === "start");
        const leaderStart = starts.at(-1)!;
        const leader = members.find((m) => m.name === leaderStart.name)!;
        const follower = members.find((m) => m !== leader)!;
        const fromEvent = leader.cli.events.length;
        const fromRecord = log.records().length;
        leader.proxy.setMode("blackhole");
        const successor = await log.waitFor(`${follower.name}'s command (run ${run + 1})`, FAILOVER_MS, (r) =>
          r.slice(fromRecord).find((x) => x.event === "start" && x.name === follower.name),
        );
        const sigterm = log.records().find((r) => r.event === "sigterm" && r.pid === leaderStart.pid);
        assert.ok(sigterm, `run ${run + 1}: ${leader.name}'s command got SIGTERM`);
        assert.ok(sigterm.at < successor.at, `run ${run + 1}: SIGTERM at ${sigterm.at}, the successor's command started at ${successor.at}`);
        assert.ok(successor.token > leaderStart.token, "the successor's fencing token is larger");
        const stop = leader.cli.events.slice(fromEvent).find((e) => e.event === "command-stop");
        assert.ok(stop, `run ${run + 1}: ${leader.name} reported stopping its command`);
        abortToSigterm.push(sigterm.at - stop.atMs);
        sigtermToSuccessor.push(successor.at - sigterm.at);
        leader.proxy.heal();
        await leader.cli.waitForEvent("leader", FAILOVER_MS, fromEvent);
      }
      assert.deepEqual(overlaps(log.records()), []);
      t.diagnostic(`${api}: term abort -> command's SIGTERM: ${summary(abortToSigterm)}`);
      t.diagnostic(`${api}: SIGTERM -> successor's command start: ${summary(sigtermToSuccessor)}`);
      for (const member of members) member.cli.kill("SIGTERM");
      await Promise.all(members.map((m) => m.cli.exited));
    });
  });
}

function summary(values: number[]): string {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length / 2;
  const median = sorted.length % 2 ? sorted[Math.floor(mid)]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
  return `median ${median} ms, min ${sorted[0]} ms, max ${sorted.at(-1)} ms (n=${sorted.length}): ${values.join(", ")}`;
}
