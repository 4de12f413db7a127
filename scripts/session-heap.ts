// Heap per election on one etcd v3 session: starts a throwaway etcd, makes N
// elections on one session (each on a key of its own, so each leads), waits
// until every one leads and the renewals have fallen into step, and prints
// the heap it took per election, after a full GC before and after.
//
//   node scripts/build.mjs && node --expose-gc --import tsx scripts/session-heap.ts [N=1000] [--followers]
//
// It measures the built package (dist/), as users run it: under tsx, every
// function of the sources carries a `name` property of its own (esbuild's
// keepNames), some 5 KiB per election that the package does not have.
//
// --followers: a second session (not counted) leads every key first, so the
// measured elections follow instead (a follower watches more than a leader).
// --own-leases: plain elections, each with a lease of its own, for comparison.
// --all-at-once: start every election in the same moment, not in batches.
import { Etcd3 } from "etcd3";
import type etcdLeaderType = require("../src/index");
import { startEtcd } from "../test/kit/etcd-server";
import { waitFor } from "../test/kit/waiting";

// eslint-disable-next-line @typescript-eslint/no-require-imports
const etcdLeader = require("../dist/cjs/index.js") as typeof etcdLeaderType;
const count = Number(process.argv[2] ?? 1_000);
const START_BATCH = process.argv.includes("--all-at-once") ? Infinity : 500;
const followers = process.argv.includes("--followers");
const ownLeases = process.argv.includes("--own-leases");
const gc = (globalThis as { gc?: () => void }).gc;
if (!gc) throw new Error("run with node --expose-gc");

function heap(): number {
  for (let i = 0; i < 3; i++) gc!();
  return process.memoryUsage().heapUsed;
}

async function main(): Promise<void> {
  const cluster = await startEtcd({ enableV2: false });
  const client = new Etcd3(etcdLeader.etcd3Options({ hosts: cluster.hostPorts }));
  const other = new Etcd3(etcdLeader.etcd3Options({ hosts: cluster.hostPorts }));
  try {
    const ttl = 10;
    const leaders = followers ? etcdLeader.session(other, { ttl }) : undefined;
    if (leaders) {
      const first: etcdLeaderType.Election[] = [];
      for (let i = 0; i < count; i++) {
        first.push(leaders.election(`/heap/${i}`, `leader-${i}`).start());
        if (first.length % START_BATCH === 0 || i === count - 1) {
          await waitFor("the other session to lead", 600_000, () => first.every((e) => e.isLeader()), { every: 100 });
        }
      }
    }
    // The client's own structures (connection, keep-alive stream) are warmed up by one election first.
    const session = etcdLeader.session(client, { ttl });
    const warm = session.election("/heap/warm-up", "warm").start();
    await waitFor("the warm-up election", 30_000, () => warm.isLeader());
    const before = heap();
    if (process.env.HEAP_SNAPSHOT) {
      const { writeHeapSnapshot } = await import("node:v8");
      writeHeapSnapshot(`${process.env.HEAP_SNAPSHOT}.before`);
    }
    const started = performance.now();
    const elections: etcdLeaderType.Election[] = [];
    const settled = followers
      ? () => elections.every((e) => e.currentLeader()?.startsWith("leader-"))
      : () => elections.every((e) => e.isLeader());
    // In batches: ten thousand joins at once, each a transaction on the one
    // connection, hold the keep-alive behind them past the request timeout.
    for (let i = 0; i < count; i++) {
      const key = `/heap/${i}`;
      elections.push((ownLeases ? etcdLeader(client, key, `member-${i}`, { ttl }) : session.election(key, `member-${i}`)).start());
      if (elections.length % START_BATCH === 0 || i === count - 1) {
        await waitFor("every election to settle", 600_000, settled, { every: 100 });
        const { heapUsed, rss } = process.memoryUsage();
        console.error(`${elections.length} settled after ${Math.round(performance.now() - started)} ms; heap ${(heapUsed / 2 ** 20).toFixed(0)} MiB, rss ${(rss / 2 ** 20).toFixed(0)} MiB`);
      }
    }
    const joinedMs = performance.now() - started;
    // A refresh interval and more: every renewal timer has run once.
    await new Promise((resolve) => setTimeout(resolve, 6_000));
    const after = heap();
    const perElection = (after - before) / count;
    console.log(
      JSON.stringify({
        elections: count,
        role: followers ? "follower" : "leader",
        leases: ownLeases ? "one per election" : "one session",
        joinedMs: Math.round(joinedMs),
        heapBeforeMiB: +(before / 2 ** 20).toFixed(1),
        heapAfterMiB: +(after / 2 ** 20).toFixed(1),
        bytesPerElection: Math.round(perElection),
        kibPerElection: +(perElection / 1024).toFixed(2),
      }),
    );
    if (process.env.HEAP_SNAPSHOT) {
      const { writeHeapSnapshot } = await import("node:v8");
      console.log("snapshot", writeHeapSnapshot(process.env.HEAP_SNAPSHOT));
    }
    await Promise.all(ownLeases ? elections.map((e) => e.leave()) : []);
    await session.close();
    await leaders?.close();
  } finally {
    client.close();
    other.close();
    await cluster.close();
  }
}

void main().then(
  () => process.exit(0),
  (err: unknown) => {
    console.error(err);
    process.exit(1);
  },
);
