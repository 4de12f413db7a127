// Who is in line, against real stores: on etcd (both APIs) every member in
// the order they would lead, the leader first, each with its token, from a
// member and from etcdLeader.candidates() alike, and the line moves as the
// leader leaves; keys under the prefix that no member wrote are not members.
// On NATS KV the leader alone, said so by `scope`. A custom backend's answer
// is checked before it is believed.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { Kvm } from "@nats-io/kv";
import etcdLeader = require("../../src/index");
import { natsLeader } from "../../src/nats";
import { BACKENDS } from "../faults/types";
import { exitWhenDone, useCleanup, useEtcd, useNats, useStoreClients } from "../kit/hooks";
import { ScriptedBackend } from "../kit/scripted-backend";
import { waitFor } from "../kit/waiting";

const BOUND_MS = 15_000;
const etcd = useEtcd();
const clients = useStoreClients(etcd);
const cleanup = useCleanup();
exitWhenDone();
let keys = 0;

for (const api of BACKENDS) {
  describe(`candidates, etcd ${api} API`, () => {
    it("lists every member in line, the leader first, with growing tokens; the line moves when the leader leaves", async () => {
      const key = `/candidates-${api}/${++keys}`;
      const members: etcdLeader.Election[] = [];
      for (const name of ["a", "b", "c"]) {
        const election = etcdLeader({ client: clients.create(api), key, name, ttl: 5 });
        cleanup.push(() => election.leave());
        members.push(election.start());
        await waitFor(`${name} in line`, BOUND_MS, () => election.currentLeader() === "a");
      }
      const [a, b] = members as [etcdLeader.Election, etcdLeader.Election];
      if (api === "v3") {
        // A key under the prefix that is no member (another tool's, a nested election's) is not listed.
        await (clients.create("v3") as import("etcd3").Etcd3).put(`${key}/not-a-member`).value("x");
      }
      const fromMember = await b.candidates();
      const fromClient = await etcdLeader.candidates(clients.create(api), key);
      for (const line of [fromMember, fromClient]) {
        assert.equal(line.scope, "line");
        assert.deepEqual(line.members.map((m) => m.name), ["a", "b", "c"]);
        assert.equal(line.members[0]!.token, a.fencingToken());
        assert.ok(line.members[0]!.token < line.members[1]!.token && line.members[1]!.token < line.members[2]!.token);
      }
      await a.leave();
      await waitFor("b to lead", BOUND_MS, () => b.isLeader());
      const after = await etcdLeader.candidates({ client: clients.create(api), key });
      assert.deepEqual(after.members.map((m) => m.name), ["b", "c"]);
      assert.equal(after.members[0]!.token, b.fencingToken());
    });

    it("an election nobody joined has no candidates; bad options and signals are refused", async () => {
      const key = `/candidates-${api}/${++keys}`;
      assert.deepEqual(await etcdLeader.candidates(clients.create(api), key), { scope: "line", members: [] });
      await assert.rejects(etcdLeader.candidates(clients.create(api), key, { signal: {} as AbortSignal }), { name: "TypeError", message: /signal must be an AbortSignal/ });
      await assert.rejects(etcdLeader.candidates(clients.create(api), key, { requestTimeout: -1 }), RangeError);
      await assert.rejects(etcdLeader.candidates(clients.create(api), key, { signal: AbortSignal.abort(new Error("no")) }), { name: "AbortError" });
    });
  });
}

describe("candidates, NATS KV", () => {
  const nats = useNats();

  it("is the leader alone, with scope \"leader\": followers hold nothing in the bucket", async () => {
    const kv = await new Kvm(nats.connection).create(`candidates_${++keys}`, { ttl: 5_000, history: 1 });
    const a = await natsLeader(kv, "leader", "a");
    const b = await natsLeader(kv, "leader", "b");
    for (const election of [a, b]) cleanup.push(() => election.leave());
    assert.deepEqual(await natsLeader.candidates(kv, "leader"), { scope: "leader", members: [] });
    a.start();
    await waitFor("a to lead", BOUND_MS, () => a.isLeader());
    b.start();
    await waitFor("b to follow", BOUND_MS, () => b.currentLeader() === "a");
    const line = await b.candidates();
    assert.equal(line.scope, "leader");
    assert.deepEqual(line.members.map((m) => m.name), ["a"]);
    assert.equal((await natsLeader.candidates(kv, "leader")).members[0]!.name, "a");
  });
});

describe("candidates from a backend of one's own", () => {
  const withAnswer = (answer: unknown) => {
    const backend = Object.assign(new ScriptedBackend(), { description: "toy store", readCandidates: async () => answer as readonly etcdLeader.Leader[] });
    return etcdLeader.withBackend(backend, "me");
  };

  it("believes a well-formed line, and refuses one that is not, naming the backend and the member", async () => {
    assert.deepEqual(await withAnswer([{ name: "x", token: 1 }, { name: "y", token: 2 }]).candidates(), {
      scope: "line",
      members: [{ name: "x", token: 1 }, { name: "y", token: 2 }],
    });
    await assert.rejects(withAnswer("x, y").candidates(), { name: "TypeError", message: /toy store answered readCandidates with string/ });
    await assert.rejects(withAnswer([{ name: "x", token: 1 }, { name: 7, token: 2 }]).candidates(), { message: /toy store .* member 1 that has a name that is/ });
    await assert.rejects(withAnswer([{ name: "x", token: 2 }, { name: "y", token: 2 }]).candidates(), { message: /out of order: member 1 \(y\) has token 2, not above x's 2/ });
    await assert.rejects(withAnswer([undefined]).candidates(), { message: /member 0 that is undefined/ });
  });

  it("without readCandidates, is the leader alone; a backend that never answers is cut off at the request timeout", async () => {
    const backend = new ScriptedBackend();
    assert.deepEqual(await etcdLeader.withBackend(backend, "me").candidates(), { scope: "leader", members: [{ name: "me", token: 0 }] });
    const hanging = Object.assign(new ScriptedBackend(), { readCandidates: () => new Promise<never>(() => undefined) });
    await assert.rejects(etcdLeader.withBackend(hanging, "me", { ttl: 1 }).candidates(), /did not answer|timed out|timeout/i);
  });
});
