// Leader changes as async iterables, against a real etcd on both APIs: an
// observer's and a member's changes arrive in order and none is lost when the
// reader is slow, and ending an iteration (break, or its signal) releases the
// watch it started, as etcd's own count of open watches shows.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import etcdLeader = require("../../src/index");
import { EtcdAdmin } from "../faults/etcd-admin";
import { BACKENDS } from "../faults/types";
import { exitWhenDone, useCleanup, useEtcd, useStoreClients } from "../kit/hooks";
import { openWatches } from "../kit/store-clients";
import { deferred, sleep, waitFor, withDeadline } from "../kit/waiting";

type Leader = etcdLeader.Leader | undefined;

const TTL = 2;
const BOUND_MS = 15_000;
/** How long the slow reader dawdles over each change: longer than etcd takes to make the next one. */
const SLOW_READ_MS = 50;

const etcd = useEtcd();
const clients = useStoreClients(etcd);
const cleanup = useCleanup();
exitWhenDone();
let keys = 0;

for (const api of BACKENDS) {
  describe(`leader changes as async iterables, etcd ${api} API`, () => {
    const admin = () => new EtcdAdmin(api, etcd.hostPorts);
    const uniqueKey = (label: string) => `/leader-changes-${api}/${label}-${++keys}`;
    const watchesNow = () => openWatches(etcd.members[0]!.clientUrl, api);
    /** The count once it holds still: watches that earlier tests cancelled go away in the background. */
    const settledWatches = async (): Promise<number> => {
      let last: number | undefined;
      const still = await waitFor("the count of open watches to hold still", 10_000, async () => {
        const now = await watchesNow();
        const held = now === last;
        last = now;
        return held ? { count: now } : undefined;
      }, { every: 200 });
      return still.count;
    };

    function member(key: string, name: string): etcdLeader.Election {
      const election = etcdLeader({ client: clients.create(api), key, name, ttl: TTL });
      cleanup.push(() => election.leave());
      return election;
    }

    function observer(key: string): etcdLeader.LeaderObserver {
      const watching = etcdLeader.observe({ client: clients.create(api), key });
      cleanup.push(() => watching.stop());
      return watching;
    }

    /** Members joined one after another, so that they stand in line in this order. */
    async function line(key: string, names: string[]): Promise<etcdLeader.Election[]> {
      const members: etcdLeader.Election[] = [];
      for (const name of names) {
        members.push(member(key, name).start());
        await waitFor(`${name} in line`, BOUND_MS, async () => (await admin().line(key)).length === members.length);
      }
      await waitFor(`${names[0]} leading`, BOUND_MS, () => members[0]!.isLeader());
      return members;
    }

    it("an observer's iterator sees every leader of a burst of hand-overs, in order, while its reader is slow", async () => {
      const key = uniqueKey("burst");
      const names = ["m0", "m1", "m2", "m3", "m4", "m5", "m6", "m7"];
      const members = await line(key, names);
      const tokens = (await admin().line(key)).map((entry) => entry.token);
      const expected: Leader[] = [...names.map((name, i) => ({ name, token: tokens[i]! })), undefined];

      const seen: Leader[] = [];
      const firstSeen = deferred();
      const reading = (async () => {
        for await (const leader of observer(key)) {
          seen.push(leader);
          if (seen.length === 1) firstSeen.resolve();
          if (seen.length === expected.length) break;
          await sleep(SLOW_READ_MS);
        }
      })();
      await withDeadline(firstSeen.promise, BOUND_MS, "the observer's first answer");
      // Each leave hands over at once; together they take far less than the reader's pauses.
      for (const election of members) await election.leave();
      await withDeadline(reading, BOUND_MS + expected.length * SLOW_READ_MS, `all changes (seen ${JSON.stringify(seen)})`);
      assert.deepEqual(seen, expected);
    });

    it("`break` releases the watch of an observer the iteration started, and a signal does too", async () => {
      const key = uniqueKey("break");
      await line(key, ["a"]);
      const before = await withDeadline(settledWatches(), BOUND_MS, "a steady count of watches");

      const watching = observer(key);
      for await (const leader of watching) {
        assert.equal(leader?.name, "a");
        await waitFor("the observer's watch", BOUND_MS, async () => (await watchesNow()) > before);
        break;
      }
      assert.equal(watching.isRunning(), false, "the iteration started the observer, so break stopped it");
      await waitFor(`etcd to hold ${before} watches again`, BOUND_MS, async () => (await watchesNow()) <= before);

      const controller = new AbortController();
      const changes = watching.changes({ signal: controller.signal });
      assert.equal((await changes.next()).value?.name, "a");
      await waitFor("the observer's watch", BOUND_MS, async () => (await watchesNow()) > before);
      const pending = changes.next();
      controller.abort();
      await assert.rejects(pending, (err: unknown) => (err as Error).name === "AbortError");
      assert.equal((await changes.next()).done, true);
      assert.equal(watching.isRunning(), false);
      await waitFor(`etcd to hold ${before} watches again`, BOUND_MS, async () => (await watchesNow()) <= before);
    });

    it("`break` leaves an observer that was started by hand running", async () => {
      const key = uniqueKey("by-hand");
      await line(key, ["a"]);
      const watching = observer(key).start();
      for await (const leader of watching) {
        assert.equal(leader?.name, "a");
        break;
      }
      assert.equal(watching.isRunning(), true);
      assert.equal(watching.currentLeader(), "a");
    });

    it("an observer's `leader` event carries the fencing token", async () => {
      const key = uniqueKey("event-token");
      const [a] = await line(key, ["a"]);
      const watching = observer(key);
      const heard: Array<[string | undefined, number | undefined]> = [];
      watching.on("leader", (name, token) => heard.push([name, token]));
      watching.start();
      await waitFor("the first answer", BOUND_MS, () => heard.length === 1);
      assert.deepEqual(heard, [["a", a!.fencingToken()]]);
    });

    it("a member's leaderChanges() yields each leader it learns of, itself once elected, and nobody once it stops; nothing is lost unread", async () => {
      const key = uniqueKey("member");
      const [a, b, c] = await line(key, ["a", "b", "c"]);
      const tokens = (await admin().line(key)).map((entry) => entry.token);
      const changes = c!.leaderChanges();
      await a!.leave();
      await waitFor("c to follow b", BOUND_MS, () => c!.currentLeader() === "b");
      await b!.leave();
      await waitFor("c to lead", BOUND_MS, () => c!.isLeader());
      c!.stop();
      // Read only now: every change waited in the iterator's buffer.
      assert.equal(changes.buffered, 4);
      const seen: Leader[] = [];
      for await (const leader of changes) {
        seen.push(leader);
        if (seen.length === 4) break;
      }
      assert.deepEqual(seen, [
        { name: "a", token: tokens[0] },
        { name: "b", token: tokens[1] },
        { name: "c", token: tokens[2] },
        undefined,
      ]);
      assert.equal((await changes.next()).done, true);
    });
  });
}
