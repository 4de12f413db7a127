// The step-down guarantee carried to the command: the leading CLI is cut off
// from etcd at a fault proxy (nothing passes, no reset), and its command must
// get SIGTERM before the other CLI's command starts, in every run. Two CLIs,
// each behind its own proxy, take turns: each run cuts whichever leads, waits
// for the other's command, heals, and waits for the cut one to follow again.
//
// CLI_PARTITION_RUNS sets the runs per store: 1 in npm test, 10 under npm run
// soak (test/kit/repetitions.ts). Printed figures: from
// the cut to the term's abort (whileLeading's signal, which the CLI reports as
// command-stop), from that abort to the successor's election, from the abort
// to the command's SIGTERM handler, and from that SIGTERM to the successor's
// command start.
//
// Also the leader's key deleted from outside: its command is stopped at the
// latest a watch delivery after the successor's command starts (the README's
// one exception to the step-down guarantee).
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { afterEach, describe, it } from "node:test";
import { EtcdAdmin } from "../faults/etcd-admin";
import { EXTERNAL_DELETE_OVERLAP_MS } from "../faults/store-faults";
import { BACKENDS, FAULT_BACKENDS } from "../faults/types";
import { NATS_BUCKET, startCli, useCliTestEnvironment, type CliProcess, type CliStore } from "../kit/cli-process";
import { CHILD, overlaps } from "../kit/command-log";
import { FaultProxy } from "../kit/fault-proxy";
import { inEachOf, runsFrom } from "../kit/repetitions";

const RUNS = runsFrom("CLI_PARTITION_RUNS");
const START_MS = 30_000;
const FAILOVER_MS = 15_000;

const proxies: FaultProxy[] = [];
const { etcd, nats, newLog } = useCliTestEnvironment(undefined, { nats: true });

/** A fault proxy in front of `store`'s server, and the flags that point the CLI through it. */
async function throughProxy(store: CliStore): Promise<{ proxy: FaultProxy; args: string[] }> {
  if (store === "nats") {
    const proxy = await FaultProxy.start({ upstream: `127.0.0.1:${nats().port}` });
    return { proxy, args: ["--backend", "nats", "--server", `nats://${proxy.hostPort}`, "--bucket", NATS_BUCKET] };
  }
  const proxy = await FaultProxy.start({ upstream: etcd().hostPorts[0]! });
  return { proxy, args: ["--api", store, "--endpoints", proxy.url, "--ttl", "2"] };
}

afterEach(async () => {
  await Promise.all(proxies.splice(0).map((proxy) => proxy.close()));
});

for (const api of FAULT_BACKENDS) {
  describe(`etcd-leader run, leader cut off at a proxy (${api})`, { timeout: 60_000 + RUNS * 30_000 }, () => {
    it(`the cut leader's command gets SIGTERM before the other's command starts, ${inEachOf(RUNS)}`, async (t) => {
      const key = `/cli-partition/${randomUUID()}`;
      const log = newLog();
      const members: { name: string; proxy: FaultProxy; cli: CliProcess }[] = [];
      for (const name of ["a", "b"]) {
        const { proxy, args: storeArgs } = await throughProxy(api);
        proxies.push(proxy);
        const args = ["run", "--json", ...storeArgs, "--grace", "1", "--name", name, key, "--", process.execPath, CHILD, log.path];
        members.push({ name, proxy, cli: startCli(args) });
        // a leads first; b joins behind it.
        if (name === "a") await log.waitFor("a's command", START_MS, (r) => r.find((x) => x.event === "start"));
        else await members[1]!.cli.next("leader", START_MS);
      }
      const cutToAbort: number[] = [];
      const abortBeforeElected: number[] = [];
      const abortToSigterm: number[] = [];
      const sigtermToSuccessor: number[] = [];
      for (let run = 0; run < RUNS; run++) {
        const starts = log.records().filter((r) => r.event === "start");
        const leaderStart = starts.at(-1)!;
        const leader = members.find((m) => m.name === leaderStart.name)!;
        const follower = members.find((m) => m !== leader)!;
        const fromEvent = leader.cli.seen.length;
        const followerFrom = follower.cli.seen.length;
        const fromRecord = log.records().length;
        const cutAt = Date.now();
        leader.proxy.setMode("blackhole");
        const successor = await log.waitFor(`${follower.name}'s command (run ${run + 1})`, FAILOVER_MS, (r) =>
          r.slice(fromRecord).find((x) => x.event === "start" && x.name === follower.name),
        );
        const sigterm = log.records().find((r) => r.event === "sigterm" && r.pid === leaderStart.pid);
        assert.ok(sigterm, `run ${run + 1}: ${leader.name}'s command got SIGTERM`);
        assert.ok(sigterm.at < successor.at, `run ${run + 1}: SIGTERM at ${sigterm.at}, the successor's command started at ${successor.at}`);
        assert.ok(successor.token > leaderStart.token, "the successor's fencing token is larger");
        const stop = leader.cli.all("command-stop", fromEvent)[0];
        assert.ok(stop, `run ${run + 1}: ${leader.name} reported stopping its command`);
        assert.equal(stop.cause, "LeaseExpiredError", `run ${run + 1}: why the term ended`);
        const elected = await follower.cli.next("elected", FAILOVER_MS, followerFrom);
        assert.ok(stop.at < elected.at, `run ${run + 1}: the term ended at ${stop.at}, the successor was elected at ${elected.at}`);
        cutToAbort.push(stop.at - cutAt);
        abortBeforeElected.push(elected.at - stop.at);
        abortToSigterm.push(sigterm.at - stop.at);
        sigtermToSuccessor.push(successor.at - sigterm.at);
        leader.proxy.heal();
        await leader.cli.next("leader", FAILOVER_MS, fromEvent);
      }
      assert.deepEqual(overlaps(log.records()), []);
      t.diagnostic(`${api}: cut -> term abort (command-stop): ${summary(cutToAbort)}`);
      t.diagnostic(`${api}: term abort -> successor elected: ${summary(abortBeforeElected)}`);
      t.diagnostic(`${api}: term abort -> command's SIGTERM: ${summary(abortToSigterm)}`);
      t.diagnostic(`${api}: SIGTERM -> successor's command start: ${summary(sigtermToSuccessor)}`);
      for (const member of members) member.cli.kill("SIGTERM");
      await Promise.all(members.map((m) => m.cli.exited));
    });
  });
}

for (const api of BACKENDS) {
  describe(`etcd-leader run, the leader's key deleted from outside (${api})`, { timeout: 60_000 }, () => {
    it("its command gets SIGTERM (MembershipRemovedError), at the latest a watch delivery after the successor's command starts", async () => {
      const key = `/cli-outside-delete/${randomUUID()}`;
      const log = newLog();
      const clis: CliProcess[] = [];
      for (const name of ["a", "b"]) {
        const args = ["run", "--json", "--api", api, "--endpoints", etcd().clientUrls[0]!, "--ttl", "2", "--grace", "1", "--name", name, key, "--", process.execPath, CHILD, log.path];
        clis.push(startCli(args));
        if (name === "a") await log.waitFor("a's command", START_MS, (r) => r.find((x) => x.event === "start"));
        else await clis[1]!.next("leader", START_MS);
      }
      const [a, b] = clis as [CliProcess, CliProcess];
      const first = log.records().find((r) => r.event === "start")!;
      const admin = new EtcdAdmin(api, etcd().hostPorts);
      const [entry] = await admin.line(key);
      assert.equal(entry?.name, "a");
      await admin.deleteKey(entry.key);
      const successor = await log.waitFor("b's command", FAILOVER_MS, (r) => r.find((x) => x.event === "start" && x.name === "b"));
      const sigterm = await log.waitFor("a's SIGTERM", FAILOVER_MS, (r) => r.find((x) => x.event === "sigterm" && x.pid === first.pid));
      assert.ok(
        sigterm.at <= successor.at + EXTERNAL_DELETE_OVERLAP_MS,
        `a's command got SIGTERM ${sigterm.at - successor.at} ms after b's command started`,
      );
      const stop = await a.next("command-stop", FAILOVER_MS);
      assert.equal(stop.cause, "MembershipRemovedError");
      assert.ok(successor.token > first.token, "the successor's fencing token is larger");
      assert.deepEqual(overlaps(log.records(), Date.now(), EXTERNAL_DELETE_OVERLAP_MS), []);
      for (const cli of clis) cli.kill("SIGTERM");
      await Promise.all([a.exited, b.exited]);
    });
  });
}

function summary(values: number[]): string {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length / 2;
  const median = sorted.length % 2 ? sorted[Math.floor(mid)]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
  return `median ${median} ms, min ${sorted[0]} ms, max ${sorted.at(-1)} ms (n=${sorted.length}): ${values.join(", ")}`;
}
