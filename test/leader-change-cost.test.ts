// What a change of leader costs the followers, counted at the store: a
// follower that is not next in line learns the new leader from one watch
// request (the next member, watched from where it was last seen, so that a
// removal since then is replayed), with no read. The only read is the
// successor's own, proving its membership outlived its turn.
//
// v2: every request goes through a counting proxy, by kind. v3: etcd's own
// gRPC counters (Range calls and Watch stream messages).
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { after, describe, it } from "node:test";
import etcdLeader = require("../src/index");
import { CountingProxy, diffCounts } from "./helpers/counting-proxy";
import { EventRecorder } from "./helpers/event-recorder";
import { exitWhenDone, useCleanup, useEtcd, useStoreClients } from "./helpers/hooks";
import { etcdMetrics } from "./helpers/store-clients";
import { sleep } from "./helpers/waiting";

const MEMBERS = 8;
const TTL_SECONDS = 10;
const SETTLE_MS = 10_000;

const etcd = useEtcd();
const clients = useStoreClients(etcd);
const cleanup = useCleanup();
exitWhenDone();

let proxy: CountingProxy | undefined;
after(() => proxy?.close());

interface Line {
  elections: etcdLeader.Election[];
  recorders: EventRecorder[];
}

/** MEMBERS members joined one after the other, every follower naming m0. */
async function line(api: "v2" | "v3", hosts: string[]): Promise<Line> {
  const key = `/leader-change-cost-${api}/${randomUUID()}`;
  const elections: etcdLeader.Election[] = [];
  const recorders: EventRecorder[] = [];
  for (let i = 0; i < MEMBERS; i++) {
    const election = etcdLeader(clients.create(api, hosts), key, `m${i}`, TTL_SECONDS);
    cleanup.push(() => election.leave());
    const recorder = new EventRecorder(election, `m${i}`);
    elections.push(election);
    recorders.push(recorder);
    election.start();
    if (i === 0) await recorder.next("elected", SETTLE_MS);
    else await recorder.next("leader", SETTLE_MS, 0, (leader) => leader === "m0");
  }
  return { elections, recorders };
}

/** m0 leaves; resolves once m1 leads and every other follower names it. */
async function changeLeader({ elections, recorders }: Line): Promise<void> {
  const marks = recorders.map((r) => r.mark);
  await elections[0]!.leave();
  await recorders[1]!.next("elected", SETTLE_MS, marks[1]);
  await Promise.all(recorders.slice(2).map((r, i) => r.next("leader", SETTLE_MS, marks[i + 2], (leader) => leader === "m1")));
  // Whatever a follower would still send for this change, it has sent by now.
  await sleep(300);
}

describe("the cost of a change of leader to its followers", () => {
  it("v2: no read by any follower but the successor, and one watch each", { timeout: 60_000 }, async () => {
    proxy = await CountingProxy.start(etcd.hostPorts[0]!, { record: false });
    const members = await line("v2", [proxy.hostPort]);
    await sleep(300);
    const before = proxy.snapshot();
    await changeLeader(members);
    const cost = diffCounts(proxy.snapshot(), before);
    const followers = MEMBERS - 2;
    assert.equal(cost.list, 0, `listings: ${JSON.stringify(cost)}`);
    // The successor's read of its own key; nobody else reads.
    assert.ok(cost.read <= 2, `point reads: ${cost.read} (${JSON.stringify(cost)})`);
    // The successor watches its own key; each other follower re-arms one watch, on m1.
    assert.ok(cost.watch <= followers + 2, `watches: ${cost.watch} for ${followers} followers (${JSON.stringify(cost)})`);
  });

  it("v3: no read by any follower but the successor", { timeout: 60_000 }, async () => {
    const clientUrl = etcd.clientUrls[0]!;
    const members = await line("v3", etcd.hostPorts);
    await sleep(300);
    const ranges = async () => (await etcdMetrics(clientUrl))(/^grpc_server_handled_total\{.*grpc_method="Range"/);
    const watchMessages = async () => (await etcdMetrics(clientUrl))(/^grpc_server_msg_received_total\{.*grpc_method="Watch"/);
    const [rangesBefore, watchesBefore] = [await ranges(), await watchMessages()];
    await changeLeader(members);
    const [rangeCost, watchCost] = [(await ranges()) - rangesBefore, (await watchMessages()) - watchesBefore];
    // The successor's read of its own key; nobody else reads.
    assert.ok(rangeCost <= 1, `Range calls during the change: ${rangeCost}`);
    // Each follower: a watch on m1 and the cancel of its watch on m0; the successor cancels two and adds one on itself.
    assert.ok(watchCost <= 2 * (MEMBERS - 1) + 2, `Watch messages during the change: ${watchCost}`);
  });
});
