// Elections nested under one another, against a real etcd, on both APIs: with
// elections at `<key>` and `<key>/cleanup`, the inner election's member keys
// lie under the outer election's key. Each election must count only its own
// members: an outer member is elected whatever the inner election holds, its
// `leader` events and an observer name only outer members, and the inner
// election works as if the outer one were not there.
import assert from "node:assert/strict";
import { after, afterEach, before, describe, it } from "node:test";
import { Etcd3 } from "etcd3";
import etcdLeader from "../../src/index";
import { startEtcd, type EtcdCluster } from "../kit/etcd-server";
import { EventRecorder } from "../kit/event-recorder";
import { exitOrFail, holdsFor, sleep, waitFor, withDeadline } from "../kit/waiting";

// eslint-disable-next-line @typescript-eslint/no-require-imports
const Etcd = require("node-etcd");

type Election = etcdLeader.Election;
type Observer = etcdLeader.LeaderObserver;

let etcd: EtcdCluster;
const etcd3Clients: Etcd3[] = [];
/** Run after each test: members leave, observers stop. */
const running = new Set<{ stop: () => unknown }>();

before(async () => {
  etcd = await startEtcd();
});

afterEach(async () => {
  await withDeadline(Promise.all([...running].map((r) => r.stop())), 8_000, "members leaving");
  running.clear();
});

after(async () => {
  for (const c of etcd3Clients) c.close();
  await etcd?.close();
  exitOrFail();
});

const QUICK = { ttl: 2, retryInitialDelay: 50, retryMaxDelay: 200 } as const;

interface Api {
  name: "v2" | "v3";
  client(): unknown;
  /** A fresh outer election key; the inner election is `<key>/cleanup`. */
  key(label: string): string;
}

let keys = 0;
const APIS: Api[] = [
  {
    name: "v2",
    client: () => new Etcd(etcd.hostPorts),
    key: (label) => `/nested-v2/${++keys}-${label}/jobs`,
  },
  {
    name: "v3",
    client: () => {
      const c = new Etcd3({ hosts: etcd.hostPorts });
      etcd3Clients.push(c);
      return c;
    },
    // Used verbatim on v3, as `etcdctl elect a/jobs` would.
    key: (label) => `nested-v3/${++keys}-${label}/jobs`,
  },
];

class Member extends EventRecorder {
  readonly election: Election;

  constructor(client: unknown, key: string, readonly name: string) {
    const election = etcdLeader(client, key, name, QUICK);
    super(election, name);
    this.election = election;
    running.add({ stop: () => this.election.leave() });
    this.election.start();
  }
}

/** An observer of `key`, started, with the leaders it named (`leaders`: undefined for nobody) and its errors. */
class Watcher extends EventRecorder {
  readonly observer: Observer;

  constructor(client: unknown, key: string) {
    const observer = etcdLeader.observe(client, key, QUICK);
    super(observer, `observer of ${key}`);
    this.observer = observer;
    running.add({ stop: () => this.observer.stop() });
    this.observer.start();
  }
}

/** Fails if, at any moment for `ms`, the members leading are not exactly `expected`. */
function holdsSteady(members: Member[], expected: Member[], ms: number): Promise<void> {
  return holdsFor(ms, () => assert.deepEqual(members.filter((m) => m.election.isLeader()).map((m) => m.name), expected.map((m) => m.name)));
}

function noErrors(...all: Array<Member | Watcher>): void {
  for (const x of all) assert.deepEqual(x.errors.map((e) => e.message), [], `${x.who} saw no error`);
}

for (const api of APIS) {
  describe(`nested elections on the ${api.name} API`, () => {
    it("the outer election's only member is elected while the inner election has a member, and neither names the other", { timeout: 20_000 }, async () => {
      const key = api.key("alone");
      const client = api.client();
      const inner = new Member(client, `${key}/cleanup`, "inner");
      await waitFor("inner elected", 5_000, () => inner.elected.length === 1);

      const outer = new Member(client, key, "outer");
      await waitFor("outer elected", 5_000, () => outer.elected.length === 1);
      await holdsSteady([inner, outer], [inner, outer], 300);
      assert.deepEqual(outer.leaders, [], "outer names no leader: it leads");
      assert.deepEqual(inner.leaders, []);
      noErrors(inner, outer);
    });

    it("each election hands over among its own members only, with the other's members between them in line", { timeout: 25_000 }, async () => {
      const key = api.key("handover");
      const client = api.client();
      // Join order: o1, i1, o2, i2. On v3 each inner key is older than the outer member after it.
      const o1 = new Member(client, key, "o1");
      await waitFor("o1 elected", 5_000, () => o1.elected.length === 1);
      const i1 = new Member(client, `${key}/cleanup`, "i1");
      await waitFor("i1 elected", 5_000, () => i1.elected.length === 1);
      const o2 = new Member(client, key, "o2");
      await waitFor("o2 follows o1", 5_000, () => o2.lastLeader === "o1");
      const i2 = new Member(client, `${key}/cleanup`, "i2");
      await waitFor("i2 follows i1", 5_000, () => i2.lastLeader === "i1");
      const all = [o1, i1, o2, i2];
      await holdsSteady(all, [o1, i1], 300);

      await o1.election.leave();
      await waitFor("o2 elected", 5_000, () => o2.elected.length === 1);
      await holdsSteady(all, [i1, o2], 200);
      await i1.election.leave();
      await waitFor("i2 elected", 5_000, () => i2.elected.length === 1);
      await holdsSteady(all, [o2, i2], 200);

      assert.deepEqual(o2.leaders, ["o1"], "o2 followed only o1");
      assert.deepEqual(i2.leaders, ["i1"], "i2 followed only i1");
      assert.ok(o2.elected[0]! > o1.elected[0]!, "the outer election's token grows");
      assert.ok(i2.elected[0]! > i1.elected[0]!, "the inner election's token grows");
      noErrors(...all);
    });

    it("an outer member behind more inner members than a v3 listing reads from an end still finds its place", { timeout: 30_000 }, async () => {
      // On v3 a line is read 9 keys from each end. Here the 9 oldest keys are
      // inner members', and so are the newest before o1 and all but one of
      // the newest before o2: neither may take that for an empty line.
      const key = api.key("crowded");
      const client = api.client();
      const inners = [new Member(client, `${key}/cleanup`, "i0")];
      await waitFor("i0 elected", 5_000, () => inners[0]!.elected.length === 1);
      const joinInner = async (i: number) => {
        const inner = new Member(client, `${key}/cleanup`, `i${i}`);
        await waitFor(`i${i} follows i0`, 5_000, () => inner.lastLeader === "i0");
        inners.push(inner);
      };
      for (let i = 1; i <= 9; i++) await joinInner(i);
      const o1 = new Member(client, key, "o1");
      await waitFor("o1 elected", 5_000, () => o1.elected.length === 1);
      for (let i = 10; i <= 12; i++) await joinInner(i);
      const o2 = new Member(client, key, "o2");
      await waitFor("o2 follows o1", 5_000, () => o2.lastLeader === "o1");
      await holdsSteady([o1, o2, ...inners], [o1, inners[0]!], 300);
      await o1.election.leave();
      await waitFor("o2 elected", 5_000, () => o2.elected.length === 1);
      await holdsSteady([o2, ...inners], [o2, inners[0]!], 200);
      assert.deepEqual(o2.leaders, ["o1"]);
      noErrors(o1, o2, ...inners);
    });

    it("observers of either election report only that election's leader", { timeout: 25_000 }, async () => {
      const key = api.key("observe");
      const client = api.client();
      const outerWatcher = new Watcher(client, key);
      const innerWatcher = new Watcher(client, `${key}/cleanup`);
      await waitFor("first answers", 5_000, () => outerWatcher.leaders.length === 1 && innerWatcher.leaders.length === 1);

      // An inner member joins an outer election nobody is in.
      const i1 = new Member(client, `${key}/cleanup`, "i1");
      await waitFor("the inner observer sees i1", 5_000, () => innerWatcher.leaders.at(-1) === "i1");
      await sleep(300);
      assert.deepEqual(outerWatcher.leaders, [undefined], "the outer election still has no leader");

      const o1 = new Member(client, key, "o1");
      await waitFor("the outer observer sees o1", 5_000, () => outerWatcher.leaders.at(-1) === "o1");
      // Started now, it reads a line whose oldest key is the inner member's.
      const lateWatcher = new Watcher(client, key);
      await waitFor("the late observer's first answer", 5_000, () => lateWatcher.leaders.length === 1);
      assert.deepEqual(lateWatcher.leaders, ["o1"]);

      await o1.election.leave();
      await waitFor("the outer observers see nobody", 5_000, () =>
        [outerWatcher, lateWatcher].every((w) => w.leaders.length > 0 && w.leaders.at(-1) === undefined),
      );
      await sleep(300);
      assert.deepEqual(outerWatcher.leaders, [undefined, "o1", undefined]);
      assert.deepEqual(lateWatcher.leaders, ["o1", undefined]);
      assert.equal(outerWatcher.observer.currentLeader(), undefined);
      assert.deepEqual(innerWatcher.leaders, [undefined, "i1"], "the inner observer saw only i1");
      noErrors(outerWatcher, innerWatcher, lateWatcher, i1, o1);
    });
  });
}
