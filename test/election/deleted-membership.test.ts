// A member never leads on a membership the store no longer holds. Memberships
// deleted from outside while their members wait, on both APIs against a real
// etcd: the whole election at once (`etcdctl del --prefix`, a recursive delete
// on v2), and one follower's key just before the leader leaves. Each follower
// whose key went must rejoin before it can lead, so the terms of the members
// never overlap and every term after the delete has a new fencing token. On
// v2, a key deleted and written again by someone else is not taken for the
// member's own.
import assert from "node:assert/strict";
import { after, afterEach, before, describe, it } from "node:test";
import { Etcd3 } from "etcd3";
import etcdLeader = require("../../src/index");
import { startEtcd, type EtcdCluster } from "../kit/etcd-server";
import { EventRecorder } from "../kit/event-recorder";
import { checkHistories, formatReport } from "../kit/leadership-history";
import { exitOrFail, waitFor } from "../kit/waiting";

// eslint-disable-next-line @typescript-eslint/no-require-imports
const Etcd = require("node-etcd");

type Api = "v2" | "v3";

let etcd: EtcdCluster;
let v3: Etcd3;
const elections = new Set<etcdLeader.Election>();
let keys = 0;

before(async () => {
  etcd = await startEtcd();
  v3 = new Etcd3({ hosts: etcd.hostPorts });
});

afterEach(async () => {
  await Promise.all([...elections].map((e) => e.leave()));
  elections.clear();
});

after(async () => {
  v3?.close();
  await etcd?.close();
  exitOrFail();
});

/** A started member of the election, with what it reported (times are performance.now()). */
class Member extends EventRecorder {
  readonly election: etcdLeader.Election;

  constructor(api: Api, key: string, readonly name: string, ttl: number) {
    const election = etcdLeader(api === "v2" ? new Etcd(etcd.hostPorts) : v3, key, name, ttl);
    super(election, name);
    this.election = election;
    elections.add(election);
    election.start();
  }
}

/** Starts members one after the other, each queued behind the one before. */
async function startLine(api: Api, key: string, names: string[], ttl: number): Promise<Member[]> {
  const members: Member[] = [];
  for (const name of names) {
    members.push(new Member(api, key, name, ttl));
    await waitFor(`${name} in line`, 10_000, async () => (await memberKeys(api, key)).length === members.length);
  }
  await waitFor(`${names[0]} elected`, 10_000, () => members[0]!.election.isLeader());
  return members;
}

/** The election's member keys, oldest first. */
async function memberKeys(api: Api, key: string): Promise<string[]> {
  if (api === "v3") {
    const response = await v3.getAll().prefix(`${key}/`).sort("Create", "Ascend").exec();
    return response.kvs.map((kv) => kv.key.toString());
  }
  return new Promise((resolve, reject) => {
    new Etcd(etcd.hostPorts).get(key, { sorted: true }, (err: { errorCode?: number } | null, body: { node?: { nodes?: Array<{ key: string }> } }) => {
      if (err?.errorCode === 100) return resolve([]);
      if (err) return reject(err);
      resolve((body.node?.nodes ?? []).map((n) => n.key));
    });
  });
}

/** Deletes keys from outside the election; resolves with the store index or revision of the delete. */
async function deleteFromOutside(api: Api, target: string, options: { prefix?: boolean } = {}): Promise<number> {
  if (api === "v3") {
    const request = options.prefix ? v3.delete().prefix(`${target}/`) : v3.delete().key(target);
    const response = await request.exec();
    return Number(response.header.revision);
  }
  return new Promise((resolve, reject) => {
    const done = (err: Error | null, body: { node?: { modifiedIndex: number } }) =>
      err ? reject(err) : resolve(body.node!.modifiedIndex);
    if (options.prefix) new Etcd(etcd.hostPorts).del(target, { recursive: true }, done);
    else new Etcd(etcd.hostPorts).del(target, {}, done);
  });
}

/** Every `elected` token a member emitted after `from` (performance.now()). */
function tokensSince(member: Member, from: number): number[] {
  return member.all("elected").filter((e) => e.at >= from).map((e) => e.value);
}

function assertOneLeaderAtATime(members: Member[], allowedOverlapMs: number): void {
  const report = checkHistories(
    members.map((m) => m.history()),
    { allowedOverlapMs, endOfHistory: performance.now() },
  );
  assert.equal(report.overlaps.length, 0, formatReport("deleted memberships", report));
  assert.ok(report.tokensIncrease.ok, formatReport("deleted memberships", report));
}

for (const api of ["v2", "v3"] as const) {
  describe(`memberships deleted from outside (${api})`, () => {
    it("never elects a waiting member whose key went with the whole election", async () => {
      const key = `/deleted-membership/${api}/whole-${++keys}`;
      // TTL 10: every follower has a renewal from the last few seconds, which
      // is exactly what must not be taken as proof that its key still exists.
      const members = await startLine(api, key, ["a", "b", "c", "d"], 10);
      const deletedAt = performance.now();
      const deletedAtIndex = await deleteFromOutside(api, key, { prefix: true });

      // Everyone rejoins; one of them leads on a new membership.
      await waitFor("a full line again", 15_000, async () => (await memberKeys(api, key)).length === members.length);
      await waitFor("a leader again", 15_000, () => members.some((m) => m.election.isLeader()));

      for (const member of members) {
        for (const token of tokensSince(member, deletedAt)) {
          assert.ok(
            token > deletedAtIndex,
            `${member.name} was elected with token ${token}, a membership deleted at ${deletedAtIndex}`,
          );
        }
      }
      // The leader learns of its own key's deletion through a watch, as the
      // README documents: the one case with an allowance.
      assertOneLeaderAtATime(members, 100);
    });

    it("never elects a follower whose own key was deleted just before the leader left", async () => {
      const key = `/deleted-membership/${api}/own-${++keys}`;
      const members = await startLine(api, key, ["a", "b", "c"], 10);
      const [leader, second, third] = members as [Member, Member, Member];
      const secondKey = (await memberKeys(api, key))[1]!;

      const deletedAt = performance.now();
      const deletedAtIndex = await deleteFromOutside(api, secondKey);
      await leader.election.leave();

      await waitFor("c elected", 10_000, () => third.election.isLeader());
      await waitFor("b back in line", 10_000, async () => (await memberKeys(api, key)).length === 2);
      for (const token of tokensSince(second, deletedAt)) {
        assert.ok(token > deletedAtIndex, `b was elected with token ${token}, its membership deleted at ${deletedAtIndex}`);
      }
      assertOneLeaderAtATime(members, 0);
    });
  });
}

describe("a v2 membership key deleted and written again by someone else", () => {
  it("is not taken for the member's own: its next renewal finds a different key, and it joins again", async () => {
    const key = `/deleted-membership/v2/rewritten-${++keys}`;
    // c is not next in line, so only its renewals can tell (the member next in line has a witness).
    const members = await startLine("v2", key, ["a", "b", "c"], 2);
    const cKey = (await memberKeys("v2", key))[2]!;
    await deleteFromOutside("v2", cKey);
    // A plain set (no prevExist) creates a new node under the same name.
    await new Promise<void>((resolve, reject) =>
      new Etcd(etcd.hostPorts).set(cKey, "someone else", {}, (err: Error | null) => (err ? reject(err) : resolve())),
    );
    // c renews within a second (TTL 2); the key it refreshes is not the one it created, so it joins again.
    await waitFor("c in line again under a key of its own", 5_000, async () => {
      const line = await memberKeys("v2", key);
      return line.length >= 3 && line.at(-1) !== cKey;
    });
    assert.ok(members[0]!.election.isLeader());
  });
});
