// The step-down guarantee carried to the command when the CLI itself cannot
// act: the leading CLI is frozen with SIGSTOP (as a debugger, a stalled VM or
// an event loop blocked for seconds would leave it) for longer than its TTL.
// Its own timers cannot run, so the orphan guard, told the lease deadline on
// every renewal, must stop the command: SIGTERM before the other member's
// command starts, in every run. After SIGCONT the frozen CLI learns its term
// is over and follows.
//
// CLI_FREEZE_RUNS sets the runs per store (etcd v2, v3, NATS KV): 1 in npm
// test, 10 under npm run soak (test/kit/repetitions.ts).
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { describe, it } from "node:test";
import { FAULT_BACKENDS } from "../faults/types";
import { NATS_BUCKET_TTL_SECONDS, startCli, useCliTestEnvironment, type CliProcess } from "../kit/cli-process";
import { CHILD, overlaps } from "../kit/command-log";
import { believedUntil } from "../kit/event-recorder";
import { inEachOf, runsFrom } from "../kit/repetitions";

const RUNS = runsFrom("CLI_FREEZE_RUNS");
/** The same TTL on etcd and on the NATS bucket. */
const TTL_SECONDS = NATS_BUCKET_TTL_SECONDS;
const START_MS = 30_000;
const FAILOVER_MS = 15_000;

const { storeArgs, newLog } = useCliTestEnvironment(undefined, { nats: true });

for (const api of FAULT_BACKENDS) {
  describe(`etcd-leader run, leading CLI frozen past its TTL (${api})`, { timeout: 60_000 + RUNS * 30_000 }, () => {
    it(`the frozen leader's command gets SIGTERM at the lease deadline, before the other's command starts, ${inEachOf(RUNS)}`, async () => {
      const key = `/cli-freeze/${randomUUID()}`;
      const log = newLog();
      const members = new Map<string, CliProcess>();
      for (const name of ["a", "b"]) {
        const args = ["run", "--json", "--verbose", ...storeArgs(api), "--ttl", String(TTL_SECONDS), "--grace", "1", "--name", name, key, "--", process.execPath, CHILD, log.path];
        members.set(name, startCli(args));
        if (name === "a") await log.waitFor("a's command", START_MS, (r) => r.find((x) => x.event === "start"));
        else await members.get("b")!.next("leader", START_MS);
      }
      for (let run = 0; run < RUNS; run++) {
        const leaderStart = log.records().filter((r) => r.event === "start").at(-1)!;
        const leader = members.get(leaderStart.name)!;
        const follower = [...members.entries()].find(([name]) => name !== leaderStart.name)!;
        // The deadline the frozen CLI believed it led until: from its last report before the freeze.
        const lastUntil = () => leader.seen.flatMap((e) => believedUntil(e) ?? []).at(-1)!;
        const fromEvent = leader.seen.length;
        const fromRecord = log.records().length;
        leader.kill("SIGSTOP");
        const frozenAt = Date.now();
        const until = lastUntil();
        const successor = await log.waitFor(`${follower[0]}'s command (run ${run + 1})`, FAILOVER_MS, (r) =>
          r.slice(fromRecord).find((x) => x.event === "start" && x.name === follower[0]),
        );
        const sigterm = log.records().find((r) => r.event === "sigterm" && r.pid === leaderStart.pid);
        assert.ok(sigterm, `run ${run + 1}: the frozen ${leaderStart.name}'s command got SIGTERM (frozen at ${frozenAt}, lease until ${until})`);
        assert.ok(sigterm.at < successor.at, `run ${run + 1}: SIGTERM at ${sigterm.at}, the successor's command started at ${successor.at}`);
        // Not before the deadline the member believed (floored to the millisecond), and soon after it.
        assert.ok(sigterm.at >= until - 1, `run ${run + 1}: SIGTERM at ${sigterm.at} is before the lease deadline ${until}`);
        assert.ok(successor.token > leaderStart.token, "the successor's fencing token is larger");
        leader.kill("SIGCONT");
        await leader.next("leader", FAILOVER_MS, fromEvent);
      }
      assert.deepEqual(overlaps(log.records()), []);
      for (const cli of members.values()) cli.kill("SIGTERM");
      await Promise.all([...members.values()].map((cli) => cli.exited));
    });
  });
}
