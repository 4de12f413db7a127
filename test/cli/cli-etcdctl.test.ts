// `etcd-leader run` and `etcdctl elect` campaign on the same key (etcd's own
// election recipe, v3): whoever leads, the other waits, and the two never
// lead at once, in either order.
import assert from "node:assert/strict";
import { spawn, type ChildProcess } from "node:child_process";
import { randomUUID } from "node:crypto";
import { afterEach, describe, it } from "node:test";
import { startCli, useCliTestEnvironment } from "../kit/cli-process";
import { CHILD } from "../kit/command-log";
import { sleep, waitFor } from "../kit/waiting";

const START_MS = 30_000;

const ctls = new Set<ChildProcess>();
const { endpoint, newLog } = useCliTestEnvironment();

afterEach(() => {
  for (const ctl of ctls) ctl.kill("SIGKILL");
  ctls.clear();
});

/** `etcdctl elect key proposal`, with when it printed its election. */
function elect(key: string, proposal: string): { ctl: ChildProcess; electedAt: () => number | undefined; exited: Promise<number | null> } {
  const ctl = spawn("etcdctl", [`--endpoints=${endpoint()}`, "elect", key, proposal], { stdio: ["ignore", "pipe", "pipe"] });
  ctls.add(ctl);
  let electedAt: number | undefined;
  ctl.stdout!.on("data", (chunk: Buffer) => {
    if (chunk.toString().includes(proposal)) electedAt ??= Date.now();
  });
  const exited = new Promise<number | null>((resolve) => ctl.on("close", (code) => resolve(code)));
  return { ctl, electedAt: () => electedAt, exited };
}

describe("etcd-leader run and etcdctl elect on one key (v3)", { timeout: 90_000 }, () => {
  it("etcdctl waits while run's command runs, and leads only after the command was stopped", async () => {
    const key = `/cli-etcdctl/${randomUUID()}`;
    const log = newLog();
    const a = startCli(["run", "--json", "--endpoints", endpoint(), "--ttl", "2", "--name", "a", key, "--", process.execPath, CHILD, log.path]);
    await log.waitFor("a's command", START_MS, (r) => r.find((x) => x.event === "start"));
    const ctl = elect(key, "ctl");
    await sleep(2_000);
    assert.equal(ctl.electedAt(), undefined, "etcdctl does not lead while run's command runs");
    a.kill("SIGTERM");
    const electedAt = await waitFor("etcdctl to be elected", 15_000, () => ctl.electedAt());
    const stopped = log.records().find((r) => r.event === "sigterm");
    assert.ok(stopped, "a's command got SIGTERM");
    assert.ok(stopped.at <= electedAt, `a's command was stopped (${stopped.at}) before etcdctl printed its election (${electedAt})`);
    ctl.ctl.kill("SIGTERM");
    await ctl.exited;
  });

  it("run waits while etcdctl leads, names it, and starts its command only after etcdctl resigned", async () => {
    const key = `/cli-etcdctl/${randomUUID()}`;
    const log = newLog();
    const ctl = elect(key, "ctl");
    await waitFor("etcdctl to be elected", START_MS, () => ctl.electedAt());
    const b = startCli(["run", "--json", "--endpoints", endpoint(), "--ttl", "2", "--name", "b", key, "--", process.execPath, CHILD, log.path]);
    const following = await b.next("leader", START_MS);
    assert.equal(following.value, "ctl");
    await sleep(2_000);
    assert.deepEqual(log.records(), [], "run's command does not start while etcdctl leads");
    const resignedFrom = Date.now();
    ctl.ctl.kill("SIGTERM");
    await ctl.exited;
    const start = await log.waitFor("b's command", 15_000, (r) => r.find((x) => x.event === "start"));
    assert.ok(start.at >= resignedFrom);
    b.kill("SIGTERM");
    assert.equal((await b.exited).code, 0);
  });
});
