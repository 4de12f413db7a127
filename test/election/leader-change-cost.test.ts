// What a change of leader costs the followers, counted at the store: a
// follower that is not next in line learns the new leader from one watch
// request (the next member, watched from where it was last seen, so that a
// removal since then is replayed), with no read. The successor proves its
// membership outlived its turn without a read too: on v3 from its watch over
// its own key and the predecessor's, on v2 from its witness (a watch of the
// election directory held by the member next in line). On v2 only that member
// watches the leader; the others watch it, and learn from its announcement.
//
// v2: every request goes through a counting proxy, by kind. v3: etcd's own
// gRPC counters (Range calls and Watch stream messages).
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { after, describe, it } from "node:test";
import { Etcd3 } from "etcd3";
import etcdLeader = require("../../src/index");
import { CountingProxy, diffCounts } from "../kit/counting-proxy";
import { EventRecorder } from "../kit/event-recorder";
import { exitWhenDone, useCleanup, useEtcd, useStoreClients } from "../kit/hooks";
import { etcdMetrics } from "../kit/store-clients";
import { processTurns } from "../../src/util/turns";
import { sleep, waitFor } from "../kit/waiting";

const MEMBERS = 8;
const TTL_SECONDS = 10;
const SETTLE_MS = 10_000;

const etcd = useEtcd();
const clients = useStoreClients(etcd);
const cleanup = useCleanup();
exitWhenDone();

const proxies: CountingProxy[] = [];
after(() => Promise.all(proxies.map((p) => p.close())));

async function countingProxy(): Promise<CountingProxy> {
  const proxy = await CountingProxy.start(etcd.hostPorts[0]!, { record: false });
  proxies.push(proxy);
  return proxy;
}

interface Line {
  key: string;
  elections: etcdLeader.Election[];
  recorders: EventRecorder[];
}

/** `count` members joined one after the other, every follower naming m0. */
async function line(api: "v2" | "v3", hosts: string[], count = MEMBERS, ttl = TTL_SECONDS): Promise<Line> {
  const key = `/leader-change-cost-${api}/${randomUUID()}`;
  const elections: etcdLeader.Election[] = [];
  const recorders: EventRecorder[] = [];
  for (let i = 0; i < count; i++) {
    const election = etcdLeader(clients.create(api, hosts), key, `m${i}`, ttl);
    cleanup.push(() => election.leave());
    const recorder = new EventRecorder(election, `m${i}`);
    elections.push(election);
    recorders.push(recorder);
    election.start();
    if (i === 0) await recorder.next("elected", SETTLE_MS);
    else await recorder.next("leader", SETTLE_MS, 0, (leader) => leader === "m0");
  }
  return { key, elections, recorders };
}

/** etcd v2 keeps its last 1000 events: more writes than that, elsewhere, push what came before out of its history. */
async function moveHistoryOn(): Promise<void> {
  for (let i = 0; i < 1100; i++) await fetch(`${etcd.clientUrls[0]}/v2/keys/noise/${i % 10}`, { method: "PUT", body: new URLSearchParams({ value: String(i) }) });
}

/** The leader m<i> leaves; resolves once m<i+1> leads and every other follower names it. */
async function changeLeader({ elections, recorders }: Line, i = 0): Promise<void> {
  const marks = recorders.map((r) => r.mark);
  await elections[i]!.leave();
  await recorders[i + 1]!.next("elected", SETTLE_MS, marks[i + 1]);
  const successor = `m${i + 1}`;
  await Promise.all(recorders.slice(i + 2).map((r, j) => r.next("leader", SETTLE_MS, marks[i + 2 + j], (leader) => leader === successor)));
  // Whatever a follower would still send for this change, it has sent by now.
  await sleep(300);
}

describe("the cost of a change of leader to its followers", () => {
  it("v2: no read by any follower but the successor, and one watch each", { timeout: 60_000 }, async () => {
    const proxy = await countingProxy();
    const members = await line("v2", [proxy.hostPort]);
    await sleep(300);
    const before = proxy.snapshot();
    await changeLeader(members);
    const cost = diffCounts(proxy.snapshot(), before);
    const followers = MEMBERS - 2;
    assert.equal(cost.list, 0, `listings: ${JSON.stringify(cost)}`);
    assert.equal(cost.read, 0, `point reads: ${JSON.stringify(cost)}`);
    // The successor watches its own key (after its announcement, the one write); each other
    // follower re-arms one watch, m2 on m1 and the rest on m2; the new next in line arms its
    // witness at its next renewal (TTL 10: not within this change).
    assert.ok(cost.watch <= followers + 1, `watches: ${cost.watch} for ${followers} followers (${JSON.stringify(cost)})`);
    assert.equal(cost.write, 1, `the successor's announcement: ${JSON.stringify(cost)}`);
  });

  it("v2: only the member next in line watches the leader, so the leader's removal wakes only it", { timeout: 60_000 }, async () => {
    const proxy = await CountingProxy.start(etcd.hostPorts[0]!);
    proxies.push(proxy);
    const from = performance.now();
    const members = await line("v2", [proxy.hostPort], 6);
    await sleep(300);
    const watched = (key: string | undefined) =>
      proxy.since(from).filter((r) => r.kind === "watch" && r.query.get("recursive") !== "true" && r.path === `/v2/keys${key}`).length;
    const listing = (await (await fetch(`${etcd.clientUrls[0]}/v2/keys${members.key}?sorted=true`)).json()) as { node: { nodes: Array<{ key: string }> } };
    const [leaderKey, heirKey] = listing.node.nodes.map((n) => n.key);
    assert.equal(watched(leaderKey), 2, "the leader's key is watched by the leader itself and by m1");
    assert.equal(watched(heirKey), 4, "m2 to m5 watch m1");

    // A leader that goes wakes m1, which leads and announces; the others learn from that.
    const marks = members.recorders.map((r) => r.mark);
    await members.elections[0]!.leave();
    await Promise.all(members.recorders.slice(2).map((r, j) => r.next("leader", SETTLE_MS, marks[2 + j], (leader) => leader === "m1")));
  });

  it("v2: the member that becomes next in line watches the new leader at once, not behind the other followers' turns", { timeout: 60_000 }, async () => {
    // Work queued for later turns of the event loop before the change, as a
    // thousand followers' re-arms would be: the new heir's watch on the new
    // leader must not wait behind it (the followers behind the heir may).
    const proxy = await CountingProxy.start(etcd.hostPorts[0]!);
    proxies.push(proxy);
    const members = await line("v2", [proxy.hostPort], 6);
    await sleep(300);
    const listing = (await (await fetch(`${etcd.clientUrls[0]}/v2/keys${members.key}?sorted=true`)).json()) as { node: { nodes: Array<{ key: string }> } };
    const newLeaderKey = listing.node.nodes[1]!.key;
    const from = performance.now();
    const watchesOfNewLeader = () =>
      proxy.since(from).filter((r) => r.kind === "watch" && r.query.get("recursive") !== "true" && r.path === `/v2/keys${newLeaderKey}`).length;
    let queuedLeft = 100;
    for (let i = 0; i < 100; i++) {
      void processTurns.next().then(() => {
        const until = performance.now() + 10;
        while (performance.now() < until);
        queuedLeft--;
      });
    }
    await members.elections[0]!.leave();
    // Its own watch for its loss, and the new heir's.
    await waitFor("two watches of the new leader, or the queued work done", SETTLE_MS, () => watchesOfNewLeader() >= 2 || queuedLeft === 0);
    assert.ok(queuedLeft > 0, `the new heir watched m1 only after the work queued before it (${watchesOfNewLeader()} watches of m1)`);
    assert.equal(members.elections[1]!.isLeader(), true);
  });

  it("v2: an announcement that fails is sent again by the next renewal", { timeout: 60_000 }, async () => {
    // TTL 2: renewals every second. m1's first announcement gets no answer.
    const direct = etcd.hostPorts;
    const viaProxy = await countingProxy();
    const key = `/leader-change-cost-v2/${randomUUID()}`;
    const names = ["m0", "m1", "m2"];
    const elections = names.map((name, i) => etcdLeader(clients.create("v2", i === 1 ? [viaProxy.hostPort] : direct), key, name, 2));
    const recorders = elections.map((e, i) => new EventRecorder(e, names[i]!));
    for (const e of elections) cleanup.push(() => e.leave());
    elections[0]!.start();
    await recorders[0]!.next("elected", SETTLE_MS);
    for (const i of [1, 2]) {
      elections[i]!.start();
      await recorders[i]!.next("leader", SETTLE_MS, 0, (leader) => leader === "m0");
    }
    let writes = 0;
    const firstWrite = viaProxy.hold((r) => r.kind === "write" && ++writes === 1);
    const mark = recorders[2]!.mark;
    await elections[0]!.leave();
    await recorders[1]!.next("elected", SETTLE_MS);
    await firstWrite.seen;
    await recorders[2]!.next("leader", SETTLE_MS, mark, (leader) => leader === "m1");
    assert.ok(writes >= 2, `writes by m1: ${writes}`);
    firstWrite.release();
  });

  it("v2: once etcd's history has moved past where a follower last saw a member, it reads that member first, without a watch etcd would refuse", { timeout: 60_000 }, async () => {
    const key = `/leader-change-cost-v2/${randomUUID()}`;
    const proxy = await countingProxy();
    const names = ["m0", "m1", "m2", "m3", "m4"];
    const elections = names.map((name, i) => etcdLeader(clients.create("v2", i === 4 ? [proxy.hostPort] : etcd.hostPorts), key, name, TTL_SECONDS));
    const recorders = elections.map((e, i) => new EventRecorder(e, names[i]!));
    for (const e of elections) cleanup.push(() => e.leave());
    for (const [i, e] of elections.entries()) {
      e.start();
      await recorders[i]!.next(i === 0 ? "elected" : "leader", SETTLE_MS, 0, (leader) => i === 0 || leader === "m0");
    }
    const handOver = async (from: number) => {
      const mark = recorders[4]!.mark;
      await elections[from]!.leave();
      await recorders[4]!.next("leader", SETTLE_MS, mark, (leader) => leader === names[from + 1]);
      await sleep(300);
    };
    await moveHistoryOn();
    // m4 comes to m2 from its listing: a 401, then a read of m2, then the watch from the
    // announcement it just saw (which replays one by m2 since). It learns where the history starts.
    let before = proxy.snapshot();
    await handOver(0);
    let cost = diffCounts(proxy.snapshot(), before);
    assert.equal(cost.watch, 2, `a watch answered 401, and one after the read: ${JSON.stringify(cost)}`);
    assert.equal(cost.read, 1, `m2 read once: ${JSON.stringify(cost)}`);
    await moveHistoryOn();
    // Then to m3, also last seen in its listing: the read comes first.
    before = proxy.snapshot();
    await handOver(1);
    cost = diffCounts(proxy.snapshot(), before);
    assert.equal(cost.read, 1, `m3 read once: ${JSON.stringify(cost)}`);
    assert.equal(cost.watch, 1, `one watch, after the read: ${JSON.stringify(cost)}`);
  });

  it("v2: a follower that finds the member it watches only by a read, its history gone, still learns that it leads", { timeout: 60_000 }, async () => {
    const key = `/leader-change-cost-v2/${randomUUID()}`;
    const proxy = await countingProxy();
    const names = ["m0", "m1", "m2", "m3"];
    const elections = names.map((name, i) => etcdLeader(clients.create("v2", i === 3 ? [proxy.hostPort] : etcd.hostPorts), key, name, TTL_SECONDS));
    const recorders = elections.map((e, i) => new EventRecorder(e, names[i]!));
    for (const e of elections) cleanup.push(() => e.leave());
    let held: ReturnType<CountingProxy["hold"]> | undefined;
    for (const [i, e] of elections.entries()) {
      // m3's watch (on m1, the member next in line) is held back before it reaches etcd.
      if (i === 3) held = proxy.hold((r) => r.kind === "watch");
      e.start();
      await recorders[i]!.next(i === 0 ? "elected" : "leader", SETTLE_MS, 0, (leader) => i === 0 || leader === "m0");
    }
    await held!.seen;
    // m1 comes to lead and announces it while m3's watch is held; then etcd forgets that.
    await elections[0]!.leave();
    await recorders[1]!.next("elected", SETTLE_MS);
    await moveHistoryOn();
    // Let the watch go: etcd answers 401, m3 reads m1, still there. Only the leader's
    // absence can tell m3 that m1 leads.
    held!.release();
    await recorders[3]!.next("leader", SETTLE_MS, 0, (leader) => leader === "m1");
  });

  it("v2: a member that became next in line proves its turn without a read once it has renewed", { timeout: 60_000 }, async () => {
    const proxy = await countingProxy();
    // TTL 2: renewals every second.
    const members = await line("v2", [proxy.hostPort], 3, 2);
    await changeLeader(members, 0);
    // m2 is next in line now; its witness starts at its next renewal.
    await sleep(1500);
    const before = proxy.snapshot();
    await changeLeader(members, 1);
    const cost = diffCounts(proxy.snapshot(), before);
    assert.equal(cost.read, 0, `point reads: ${JSON.stringify(cost)}`);
    assert.equal(cost.list, 0, `listings: ${JSON.stringify(cost)}`);
  });

  it("v2: a member leaving from the middle of the line wakes nobody; the one behind it passes over it later, with one read", { timeout: 60_000 }, async () => {
    const proxy = await countingProxy();
    const members = await line("v2", [proxy.hostPort], 4);
    await sleep(300);
    let before = proxy.snapshot();
    await members.elections[2]!.leave();
    await sleep(500);
    let cost = diffCounts(proxy.snapshot(), before);
    // m2's delete, and m1's witness re-armed after reporting it (a watch of the whole
    // directory); m3 re-arms nothing: it watches only the leader, not m2.
    assert.equal(cost.read + cost.list, 0, `reads and listings: ${JSON.stringify(cost)}`);
    assert.ok(cost.watch <= 1, `watches re-armed: ${JSON.stringify(cost)}`);
    let marks = members.recorders.map((r) => r.mark);
    await members.elections[0]!.leave();
    await members.recorders[1]!.next("elected", SETTLE_MS, marks[1]);
    await members.recorders[3]!.next("leader", SETTLE_MS, marks[3], (leader) => leader === "m1");
    marks = members.recorders.map((r) => r.mark);
    before = proxy.snapshot();
    await members.elections[1]!.leave();
    await members.recorders[3]!.next("elected", SETTLE_MS, marks[3]);
    await sleep(300);
    cost = diffCounts(proxy.snapshot(), before);
    // m3 did not know it was next (no witness): it reads its own key once.
    assert.ok(cost.read <= 1, `point reads: ${JSON.stringify(cost)}`);
    assert.equal(cost.list, 0, `listings: ${JSON.stringify(cost)}`);
    assert.equal(members.elections[3]!.isLeader(), true);
  });

  it("v3: nothing sent by any follower but the successor and the member that becomes next in line", { timeout: 60_000 }, async () => {
    const clientUrl = etcd.clientUrls[0]!;
    const members = await line("v3", etcd.hostPorts);
    await sleep(300);
    const ranges = async () => (await etcdMetrics(clientUrl))(/^grpc_server_handled_total\{.*grpc_method="Range"/);
    const watchMessages = async () => (await etcdMetrics(clientUrl))(/^grpc_server_msg_received_total\{.*grpc_method="Watch"/);
    // Three changes in a row: each new leader's key is in the range its followers watch already.
    for (let i = 0; i < 3; i++) {
      const [rangesBefore, watchesBefore] = [await ranges(), await watchMessages()];
      await changeLeader(members, i);
      const [rangeCost, watchCost] = [(await ranges()) - rangesBefore, (await watchMessages()) - watchesBefore];
      // The successor's read of its own key; nobody else reads.
      assert.ok(rangeCost <= 1, `change ${i + 1}: Range calls ${rangeCost}`);
      // The old leader cancels the watch of its own key; the successor
      // cancels its watch of the line and watches its own key; the member that
      // becomes next in line re-arms its line watch to see the new leader's
      // puts and cancels its leader watch. The other followers send nothing.
      assert.ok(watchCost <= 6, `change ${i + 1}: Watch messages ${watchCost}`);
    }
  });

  it("v3: a member joining inside a follower's watched range of keys wakes it only if its predecessor leads", { timeout: 60_000 }, async () => {
    // A follower's "line" watch covers every key between its predecessor's
    // and its own, and other members' keys fall there. A put there (here a
    // key of no member, placed inside each follower's range so that the count
    // does not hang on random lease IDs) reaches that watch only in the
    // member next in line, whose predecessor is the leader and may Proclaim.
    // Every other follower's "leader" watch covers the keys from the first to
    // the last of the members older than itself (one etcd grants all the
    // leases here), and takes puts: a put there wakes it too.
    const clientUrl = etcd.clientUrls[0]!;
    const members = await line("v3", etcd.hostPorts);
    await sleep(300);
    const v3 = new Etcd3({ hosts: etcd.hostPorts });
    cleanup.push(() => v3.close());
    const keys = (await v3.getAll().prefix(`${members.key}/`).sort("Create", "Ascend").keys()).map((k) => k.toString());
    assert.equal(keys.length, MEMBERS);
    const hex = (key: string) => key.slice(members.key.length + 1);
    const source = (key: string) => `${hex(key).length}:${hex(key).slice(0, -12)}`;
    assert.ok(keys.every((key) => source(key) === source(keys[0]!)), `lease IDs of one etcd member: ${keys.map(hex).join(" ")}`);
    const rangeOf = (i: number) => [keys[i - 1]!, keys[i]!].sort() as [string, string];
    const leaderRangeOf = (i: number) => [keys.slice(0, i).sort()[0]!, keys.slice(0, i).sort().at(-1)!] as [string, string];
    const inRange = (key: string, [start, end]: [string, string]) => key >= start && key <= end;
    // Just after each follower's first key: inside its range, whatever the others.
    const puts = keys.slice(1).map((_, j) => `${rangeOf(j + 1)[0]}\0`);
    const events = async () => (await etcdMetrics(clientUrl))(/^etcd_debugging_mvcc_events_total /);
    const before = await events();
    for (const key of puts) await v3.put(key).value("not a member");
    await sleep(300);
    const delivered = (await events()) - before;
    const toHeir = puts.filter((key) => inRange(key, rangeOf(1))).length;
    let toLeaderWatches = 0;
    for (let i = 2; i < MEMBERS; i++) toLeaderWatches += puts.filter((key) => inRange(key, leaderRangeOf(i))).length;
    assert.equal(
      delivered,
      toHeir + toLeaderWatches,
      `watch events delivered for ${puts.length} puts: ${toHeir} in the heir's line range, ${toLeaderWatches} in other followers' leader ranges`,
    );
    for (const key of puts) await v3.delete().key(key);
    // Still one leader, named by every follower.
    assert.ok(members.elections[0]!.isLeader());
    for (const election of members.elections.slice(1)) assert.equal(election.currentLeader(), "m0");
  });
});
