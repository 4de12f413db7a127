// What a JetStream cluster of real nats-servers (Debian's 2.9.10, three on
// loopback) does with a bucket replicated on all three, where it differs
// from one server in a way the NATS KV recipe depends on.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { jetstreamManager, type JetStreamManager } from "@nats-io/jetstream";
import { Kvm, KvWatchInclude, type KV } from "@nats-io/kv";
import { startNatsCluster, type NatsCluster } from "../../kit/nats-cluster";
import { waitFor } from "../../kit/waiting";

const BUCKET = "facts";
const STREAM = `KV_${BUCKET}`;
const TRIES = 100;

/** The key's subject in the bucket's stream. */
const subjectOf = (key: string) => `$KV.${BUCKET}.${key}`;

describe("NATS KV facts on a three-server JetStream cluster, R3 bucket", () => {
  let cluster: NatsCluster;
  let connections: NatsConnection[] = [];
  /** The bucket through each server in turn, on a connection that stays with that server. */
  let buckets: KV[] = [];
  /** A manager on each of those connections: its requests go to the stream's leader, whichever server relays them. */
  let managers: JetStreamManager[] = [];

  /** The key's latest entry as the stream's leader has it (a direct get may come from a replica behind it). */
  const last = async (key: string) => {
    const message = await managers[0]!.streams.getMessage(STREAM, { last_by_subj: subjectOf(key) });
    if (!message) return undefined;
    return { value: message.header.get("KV-Operation") ? undefined : message.string(), revision: message.seq };
  };

  /** What a member does to take a key over from the marker at `marker`: purge the key through it, then create. */
  const takeOver = async (member: number, key: string, marker: number): Promise<number> => {
    await managers[member]!.streams.purge(STREAM, { filter: subjectOf(key), seq: marker + 1 });
    return buckets[member]!.put(key, `member${member}`, { previousSeq: 0 });
  };

  before(async () => {
    cluster = await startNatsCluster(3);
    connections = await Promise.all(cluster.urls.map((url) => connect({ servers: url, ignoreClusterUpdates: true })));
    await new Kvm(connections[0]!).create(BUCKET, { history: 1, replicas: 3, ttl: 60_000 });
    await cluster.waitStreamCurrent(`KV_${BUCKET}`);
    buckets = await Promise.all(connections.map((connection) => new Kvm(connection).open(BUCKET)));
    managers = await Promise.all(connections.map((connection) => jetstreamManager(connection)));
  });

  after(async () => {
    await Promise.all(connections.map((connection) => connection.close().catch(() => undefined)));
    await cluster?.close();
  });

  // nats-server issue 4320: on a replicated stream the expected last subject
  // sequence is checked by the stream's leader before it proposes the write,
  // against what it has applied, so writes proposed together pass the same
  // check. (2.9.21 tracks writes in flight on the leader; the check is still
  // not part of what the replicas apply.) On one server they never both win
  // (the recipe's conformance and fault suites race them all the time).
  test("updates conditioned on the same revision, sent at once through the three servers, can all succeed", async (t) => {
    let severalWon = 0;
    for (let i = 0; i < TRIES; i++) {
      const key = `update${i}`;
      const revision = await buckets[0]!.put(key, "before");
      const answers = await Promise.allSettled(buckets.map((bucket, j) => bucket.update(key, `member${j}`, revision)));
      if (answers.filter((answer) => answer.status === "fulfilled").length > 1) severalWon++;
    }
    t.diagnostic(`more than one update won in ${severalWon} of ${TRIES} tries`);
    assert.ok(severalWon > 0, `every one of ${TRIES} races had one winner: the server serializes these writes now (a fixed nats-server?)`);
  });

  test("creates of an absent key sent at once through the three servers: one wins (in these tries)", async (t) => {
    let severalWon = 0;
    for (let i = 0; i < TRIES; i++) {
      const answers = await Promise.allSettled(buckets.map((bucket, j) => bucket.create(`create${i}`, `member${j}`)));
      const won = answers.filter((answer) => answer.status === "fulfilled").length;
      assert.ok(won >= 1, "nobody won a create of an absent key");
      if (won > 1) severalWon++;
    }
    t.diagnostic(`more than one create won in ${severalWon} of ${TRIES} tries`);
    assert.equal(severalWon, 0);
  });

  test("the bucket's status says how many replicas it has", async () => {
    assert.equal((await buckets[1]!.status()).replicas, 3);
  });

  // The client's create tries a create of an absent key first and, over a
  // delete or purge marker, an update conditioned on the marker's revision:
  // the write that is not serialized above.
  test("the client's create over a delete marker, sent at once through the three servers, can succeed more than once", async (t) => {
    let severalWon = 0;
    for (let i = 0; i < TRIES; i++) {
      const key = `overMarker${i}`;
      await buckets[0]!.put(key, "before");
      await buckets[0]!.delete(key);
      await cluster.waitStreamCurrent(STREAM);
      const answers = await Promise.allSettled(buckets.map((bucket, j) => bucket.create(key, `member${j}`)));
      if (answers.filter((answer) => answer.status === "fulfilled").length > 1) severalWon++;
    }
    t.diagnostic(`more than one create over the marker won in ${severalWon} of ${TRIES} tries`);
    assert.ok(severalWon > 0, `every one of ${TRIES} races had one winner: the server serializes these writes now (a fixed nats-server?)`);
  });

  // A create is a write whose expected last subject sequence is 0: every
  // replica checks it as it applies the write (2.9 skips only the checks of
  // a sequence above 0 there), and a purge is applied by every replica in
  // its place in the stream's log. So the members that saw one marker can
  // each purge the key through it and create: whatever the order, one
  // create finds the key empty and every later one finds its value, which
  // no purge through the marker can remove.
  test("a purge of the key through a marker, then a create, by three members at once through the three servers: one wins, and its value stays", async (t) => {
    const winners: number[] = [];
    for (let i = 0; i < TRIES; i++) {
      const key = `takeOver${i}`;
      await buckets[0]!.put(key, "before");
      await buckets[0]!.delete(key);
      const marker = (await last(key))!.revision;
      const answers = await Promise.allSettled(buckets.map((_, j) => takeOver(j, key, marker)));
      const won = answers.flatMap((answer, j) => (answer.status === "fulfilled" ? [{ member: j, revision: answer.value }] : []));
      for (const answer of answers) {
        if (answer.status === "rejected") assert.equal((answer.reason as { code?: number }).code, 10071, `a take-over failed otherwise: ${String(answer.reason)}`);
      }
      assert.equal(won.length, 1, `race ${i}: ${won.length} creates won (${JSON.stringify(won)})`);
      winners.push(won[0]!.member);
      await cluster.waitStreamCurrent(STREAM);
      assert.deepEqual(await last(key), { value: `member${won[0]!.member}`, revision: won[0]!.revision }, `race ${i}: the winner's write is not the key's value`);
    }
    t.diagnostic(`one winner in each of ${TRIES} races; wins by server: ${[0, 1, 2].map((j) => winners.filter((w) => w === j).length).join(", ")}`);
  });

  test("a purge of the key through an older revision leaves its newer value", async () => {
    const first = await buckets[0]!.put("older", "a");
    const second = await buckets[1]!.put("older", "b");
    await managers[2]!.streams.purge(STREAM, { filter: subjectOf("older"), seq: first + 1 });
    assert.deepEqual(await last("older"), { value: "b", revision: second });
  });

  test("a watch of the key opened through one server sees the create that follows a purge through another", async () => {
    await buckets[0]!.put("watched", "a");
    await buckets[0]!.delete("watched");
    const marker = (await last("watched"))!.revision;
    const watch = await buckets[2]!.watch({ key: "watched", include: KvWatchInclude.UpdatesOnly });
    const seen: string[] = [];
    void (async () => {
      for await (const entry of watch) seen.push(`${entry.operation} ${entry.operation === "PUT" ? entry.string() : ""} ${entry.revision}`.trim());
    })();
    try {
      const revision = await takeOver(1, "watched", marker);
      await waitFor("the create on the watch", 10_000, () => seen.length > 0);
      assert.deepEqual(seen, [`PUT member1 ${revision}`]);
    } finally {
      watch.stop();
    }
  });

  // nats-server issue 4196 (reported on 2.9.17; pull request 4357 fixed the
  // last of it in 2.9.21): a server that restarts replays the stream's raft
  // log, and replays a purge of one subject up to a sequence as a purge of
  // the whole stream up to the stream's last sequence at the time. Its
  // replica then lacks every other key's entries from before that purge.
  // The election's own key keeps its entry: every purge the election makes
  // is followed by its create. Runs last: it restarts a server.
  test("a server that restarts replays a purge of one key as a purge of every key written before it (2.9.10)", async () => {
    const other = await buckets[0]!.put("other", "kept");
    await buckets[0]!.put("purged", "a");
    await buckets[0]!.delete("purged");
    await managers[0]!.streams.purge(STREAM, { filter: subjectOf("purged"), seq: (await last("purged"))!.revision + 1 });
    const after = await buckets[0]!.put("written_after", "kept");
    await cluster.waitStreamCurrent(STREAM);
    const leader = await cluster.streamLeader(STREAM);
    const replica = cluster.servers.find((server) => server !== leader)!;
    const onReplica = async () => streamState(await replica.monitor<JszStreams>("/jsz?streams=true&accounts=true"));
    const before = await onReplica();
    await replica.kill();
    await replica.start();
    await cluster.waitStreamCurrent(STREAM, 30_000);
    const restarted = await onReplica();
    assert.ok(before && restarted, "no state of the stream on the replica");
    const seen = `before the restart: ${JSON.stringify(before)}; after: ${JSON.stringify(restarted)}; "other" at ${other}, "written_after" at ${after}`;
    assert.ok(restarted.first_seq > other, `the restarted replica kept the other key: ${seen}`);
    assert.ok(restarted.messages < before.messages, seen);
    console.log(seen);
    // Through the leader's own server: a connection to the restarted one may still be reconnecting.
    const viaLeader = managers[cluster.servers.indexOf(leader)]!;
    const kept = await viaLeader.streams.getMessage(STREAM, { last_by_subj: subjectOf("other") });
    assert.equal(kept?.string(), "kept", "the stream's leader lost the other key too");
  });
});

interface JszStreams {
  account_details?: { stream_detail?: { name: string; state?: { messages: number; first_seq: number } }[] }[];
}

function streamState(jsz: JszStreams) {
  return jsz.account_details?.flatMap((account) => account.stream_detail ?? []).find((stream) => stream.name === STREAM)?.state;
}
