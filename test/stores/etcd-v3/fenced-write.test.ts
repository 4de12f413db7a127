// Writes fenced by etcd itself (whileLeading's `fenced`, etcd v3): a leader
// paused past its deadline (its event loop blocked in a child process, so
// that nothing of it runs, as in a GC pause or a SIGSTOP) has its late write
// refused by etcd, while its successor's succeeds, and the data holds the
// successor's value. Without the fence the same late write would land.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { createInterface } from "node:readline";
import { describe, it } from "node:test";
import { Etcd3 } from "etcd3";
import etcdLeader = require("../../../src/index");
import { exitWhenDone, useCleanup, useEtcd } from "../../kit/hooks";
import { REPO_ROOT } from "../../kit/paths";
import { waitFor } from "../../kit/waiting";

const TTL = 2;
const BOUND_MS = 15_000;
const etcd = useEtcd();
const cleanup = useCleanup();
exitWhenDone();

interface ChildLine {
  event: string;
  token?: number;
  succeeded?: boolean;
  isLeader?: boolean;
  at: number;
}

describe("fenced writes, etcd v3", () => {
  it("a leader paused past its deadline has its late write refused by etcd; its successor's succeeds", async () => {
    const key = `/fenced/${Date.now()}`;
    const dataKey = `${key}-data`;
    const child = spawn(process.execPath, ["--import", "tsx", "test/fixtures/fenced-writer.ts", etcd.hostPorts[0]!, key, "paused", String(TTL), dataKey], {
      cwd: REPO_ROOT,
      stdio: ["pipe", "pipe", "inherit"],
    });
    cleanup.push(() => child.kill("SIGKILL"));
    const seen: ChildLine[] = [];
    createInterface({ input: child.stdout! }).on("line", (line) => seen.push(JSON.parse(line) as ChildLine));
    const leading = await waitFor("the child to lead", BOUND_MS, () => seen.find((l) => l.event === "leading"));

    const client = new Etcd3(etcdLeader.etcd3Options({ hosts: etcd.hostPorts }));
    cleanup.push(() => client.close());
    const successor = etcdLeader({ client, key, name: "successor", ttl: TTL });
    cleanup.push(() => successor.leave());
    const successorWrote = successor.whileLeading(async ({ fenced, token }) => {
      const result = await fenced!(client.put(dataKey).value("successor"));
      return { token, succeeded: result.succeeded, at: Date.now() };
    });
    await waitFor("the successor to follow", BOUND_MS, () => successor.currentLeader() === "paused");

    // Paused for twice the TTL: its lease expires meanwhile and the successor is elected.
    child.stdin!.write(`freeze ${TTL * 2_000}\n`);
    const mine = await successorWrote;
    assert.equal(mine.succeeded, true, "the successor's fenced write lands");
    assert.ok(mine.token > leading.token!, "the successor's term is a later one");
    const late = await waitFor("the paused leader's late write", BOUND_MS, () => seen.find((l) => l.event === "wrote"));
    assert.ok(late.at > mine.at, "the paused leader wrote after its successor");
    assert.equal(late.succeeded, false, "etcd refused the paused leader's late write");
    assert.equal(late.isLeader, false, "(and had it asked, isLeader() would have said so)");
    assert.equal(await client.get(dataKey).string(), "successor");

    // The same write without the fence, from where the paused leader stood, lands: the fence is what refused it.
    await client.put(dataKey).value("unfenced");
    assert.equal(await client.get(dataKey).string(), "unfenced");
  });

  it("is offered on etcd v3 only: undefined in the scope on etcd v2", async () => {
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    const Etcd = require("node-etcd") as new (hosts: string[]) => unknown;
    const election = etcdLeader({ client: new Etcd(etcd.hostPorts), key: `/fenced-v2/${Date.now()}`, name: "v2", ttl: TTL });
    cleanup.push(() => election.leave());
    const offered = await election.whileLeading(({ fenced }) => fenced, { onLoss: "reject" });
    assert.equal(offered, undefined);
  });
});
