// The facts of JetStream KV that the NATS KV recipe relies on
// (nats-kv-facts.ts), held by a real nats-server (Debian's 2.9.10) through the
// @nats-io/kv adapter of the port, and by the simulated bucket the simulation
// runs on (test/sim/stores/nats-kv.ts): one set of cases, two targets.
//
// Then the facts only a real server can show, checked with the raw clients
// (@nats-io/kv, @nats-io/jetstream and @nats-io/transport-node 3.4), each
// saying why it cannot run on the simulated bucket: the client's error
// classes and codes (which the adapter classifies, and its unit tests hold it
// to), the stream's own configuration, what the client does with requests
// and watches through outages of the server or the connection (which the
// simulation's network, test/sim/network.ts, and the linked port model, not
// the bucket), and the test launcher.
import { after, before, describe, test, type TestContext } from "node:test";
import assert from "node:assert/strict";
import {
  AuthorizationError,
  ConnectionError,
  connect,
  TimeoutError,
  type ConnectionOptions,
  type NatsConnection,
} from "@nats-io/transport-node";
import { jetstream, jetstreamManager, JetStreamApiError, type JetStreamManager } from "@nats-io/jetstream";
import { Kvm, KvWatchInclude, type KV, type KvWatchEntry } from "@nats-io/kv";
import { NatsKvAdapter } from "../../../src/stores/nats-kv/nats/adapter";
import { NatsKvStore } from "../../sim/stores/nats-kv";
import { Random, Scheduler } from "../../sim/world";
import { FaultProxy } from "../../kit/fault-proxy";
import { startNats, type NatsServer } from "../../kit/nats-server";
import { makeTestPki } from "../../kit/tls";
import { exitOrFail, sleep, waitFor, withDeadline } from "../../kit/waiting";
import { NATS_KV_FACTS, type BucketMaker } from "./nats-kv-facts";

/** The JetStream API error a failed revision check gives (JSStreamWrongLastSequenceErrF). */
const WRONG_LAST_SEQUENCE = 10071;
/** JSStreamNotFoundErr. */
const STREAM_NOT_FOUND = 10059;
/** The JetStream client's request timeout when none is given. */
const DEFAULT_JS_TIMEOUT_MS = 5_000;

let shared: NatsServer;
let nc: NatsConnection;
let kvm: Kvm;
let jsm: JetStreamManager;
let bucketCount = 0;

before(async () => {
  shared = await startNats();
  // Quick to come back after the cases that restart the server; never out of attempts.
  nc = await connect({ servers: shared.url, reconnectTimeWait: 100, maxReconnectAttempts: -1 });
  kvm = new Kvm(nc);
  jsm = await jetstreamManager(nc);
});

after(async () => {
  await nc?.close().catch(() => undefined);
  await shared?.close();
  exitOrFail();
});

/** A fresh bucket the way the backend will use one: a bucket TTL and one entry per key. */
function freshBucket(ttlMs: number, on: Kvm = kvm): Promise<KV> {
  return on.create(`facts_${++bucketCount}`, { ttl: ttlMs, history: 1 });
}

/**
 * A bucket on the shared server: made by the operator's handle, and opened
 * for the port as a user opens it (Kvm.open), through the adapter.
 */
const onRealServer: BucketMaker = async (ttlMs) => {
  const name = `facts_${++bucketCount}`;
  let made = await kvm.create(name, { ttl: ttlMs, history: 1 });
  const port = new NatsKvAdapter(await kvm.open(name));
  const markerRevision = async (key: string) => (await made.get(key))!.revision;
  return {
    port,
    operator: {
      put: (key, value) => made.put(key, value),
      remove: async (key) => {
        await made.delete(key);
        return markerRevision(key);
      },
      purge: async (key) => {
        await made.purge(key);
        return markerRevision(key);
      },
      lastSequence: async () => (await made.status()).streamInfo.state.last_seq,
      entries: async () => (await made.status()).values,
      deleteBucket: async () => void (await jsm.streams.delete(`KV_${name}`)),
      makeBucket: async (ttl) => void (made = await kvm.create(name, { ttl, history: 1 })),
      restart: async () => {
        const back = nextStatus(nc, "reconnect");
        await shared.restart();
        await withDeadline(back, 15_000, "the client's reconnect after the restart");
      },
      elapse: sleep,
      now: () => performance.now(),
    },
  };
};

let simulatedCount = 0;

/** A simulated bucket in a world of its own, in virtual time; its expiry timer's lag drawn from a seed of its own. */
const onSimulatedBucket: BucketMaker = async (ttlMs) => {
  const scheduler = new Scheduler();
  const store = new NatsKvStore({ ttlMs, scheduler, random: new Random(++simulatedCount) });
  return {
    port: store,
    operator: {
      put: async (key, value) => store.put(key, value),
      remove: async (key) => store.remove(key),
      purge: async (key) => store.purge(key),
      lastSequence: async () => store.sequence,
      entries: async () => store.entryCount,
      deleteBucket: async () => store.deleteBucket(),
      makeBucket: async (ttl) => store.makeBucket(ttl),
      // The stream, its entries and consumers are kept on disk: nothing of the bucket changes.
      restart: async () => undefined,
      elapse: (ms) => scheduler.runUntil(scheduler.now + ms),
      now: () => scheduler.now,
    },
  };
};

describe("NATS JetStream KV facts, on a real nats-server (2.9), through the @nats-io/kv adapter", () => {
  for (const fact of NATS_KV_FACTS) test(fact.title, () => fact.run(onRealServer));
});

describe("NATS JetStream KV facts, on the simulated bucket", () => {
  for (const fact of NATS_KV_FACTS) test(fact.title, () => fact.run(onSimulatedBucket));
});

/** Whatever a promise rejects with, and after how long; fails if it resolves. */
async function rejection(what: string, promise: Promise<unknown>): Promise<{ err: Error; ms: number }> {
  const started = performance.now();
  try {
    const value = await promise;
    assert.fail(`${what} should have failed, but gave ${JSON.stringify(value)}`);
  } catch (err) {
    if (err instanceof assert.AssertionError) throw err;
    return { err: err as Error, ms: performance.now() - started };
  }
}

function assertWrongLastSequence(err: Error, currentRevision: number): void {
  assert.ok(err instanceof JetStreamApiError, `expected a JetStreamApiError, got ${err.name}: ${err.message}`);
  assert.equal(err.name, "JetStreamApiError");
  assert.equal(err.code, WRONG_LAST_SEQUENCE);
  assert.equal(err.status, 400);
  assert.equal(err.message, `wrong last sequence: ${currentRevision}`);
}

/** A watch whose entries are collected as they come; `stop()` ends it. */
interface CollectingWatch {
  entries: KvWatchEntry[];
  /** Whether the watch's iterator has ended, by stop() or by itself. */
  readonly hasEnded: boolean;
  stop(): void;
}

async function collectWatch(kv: KV, key: string, include?: KvWatchInclude): Promise<CollectingWatch> {
  const iterator = await kv.watch({ key, ...(include ? { include } : {}) });
  const entries: KvWatchEntry[] = [];
  let hasEnded = false;
  void (async () => {
    for await (const entry of iterator) entries.push(entry);
    hasEnded = true;
  })();
  return {
    entries,
    get hasEnded() {
      return hasEnded;
    },
    stop: () => iterator.stop(),
  };
}

const describeEntries = (entries: KvWatchEntry[]) => entries.map((e) => `${e.operation}@${e.revision}`);

/** A connection of its own, closed by the test's end. */
async function ownConnection(t: TestContext, options: ConnectionOptions): Promise<NatsConnection> {
  const connection = await connect(options);
  t.after(() => connection.close());
  return connection;
}

/** A server of its own, for tests that stop it; closed by the test's end. */
async function ownServer(t: TestContext): Promise<NatsServer> {
  const server = await startNats();
  t.after(() => server.close());
  return server;
}

interface ConsumerDetail {
  name: string;
  config: { inactive_threshold?: number; idle_heartbeat?: number };
  /** Whether a client is subscribed to its deliveries right now. */
  push_bound?: boolean;
}

/** The consumers the server holds on a bucket's stream (a watch is one), from its monitoring port, so a cut-off client does not matter. */
async function consumersOf(server: NatsServer, bucket: string): Promise<ConsumerDetail[]> {
  const stream = `KV_${bucket}`;
  const jsz = await server.monitor<{
    account_details?: Array<{ stream_detail?: Array<{ name: string; consumer_detail?: ConsumerDetail[] }> }>;
  }>("/jsz?consumers=true&config=true");
  const streams = (jsz.account_details ?? []).flatMap((account) => account.stream_detail ?? []);
  return streams.find((s) => s.name === stream)?.consumer_detail ?? [];
}

/** Resolves at the connection's next status event of `type` (e.g. "reconnect"). */
function nextStatus(connection: NatsConnection, type: string): Promise<number> {
  const next = (async () => {
    for await (const status of connection.status()) {
      if (status.type === type) return performance.now();
    }
    throw new Error(`the connection closed before a "${type}" status`);
  })();
  // A test that fails before it waits for this must not also die of an unhandled rejection.
  next.catch(() => undefined);
  return next;
}

describe("NATS JetStream KV facts only a real nats-server can show (the client's errors, the stream's configuration, outages)", () => {
  // Real server only: the stream's configuration, which the port does not show (it gives only the bucket's name and TTL).
  test("a bucket made with a TTL and history 1 is a stream with max_age in nanoseconds and one message per subject", async (t) => {
    const kv = await freshBucket(30_000);
    const status = await kv.status();
    assert.equal(status.ttl, 30_000);
    assert.equal(status.history, 1);
    assert.equal(status.streamInfo.config.max_age, 30_000 * 1_000_000);
    assert.equal(status.streamInfo.config.max_msgs_per_subject, 1);
    t.diagnostic(`server ${nc.info?.version}; storage ${status.storage}, discard ${status.streamInfo.config.discard}, allow_direct ${status.streamInfo.config.allow_direct}`);
  });

  // Real server only: the client's error classes and codes, which the adapter classifies (its unit tests hold it to these shapes);
  // through the port, on both targets, a missing bucket is only isBucketMissing().
  test("open() of a bucket that does not exist resolves; its status() fails with StreamNotFoundError, a JetStreamApiError 10059 'stream not found'", async () => {
    const kv = await kvm.open("no_such_bucket");
    const { err } = await rejection("status() of a missing bucket", kv.status());
    assert.ok(err instanceof JetStreamApiError, `expected a JetStreamApiError, got ${err.name}`);
    assert.equal(err.name, "StreamNotFoundError");
    assert.equal(err.code, STREAM_NOT_FOUND);
    assert.equal(err.status, 404);
    assert.equal(err.message, "stream not found");
  });

  test("on a bucket that does not exist, create fails with StreamNotFoundError (from its fallback get) but update with JetStreamNotEnabled caused by 'no responders'", async () => {
    const kv = await kvm.open("no_such_bucket");
    const created = await rejection("create in a missing bucket", kv.create("k", "v"));
    assert.equal(created.err.name, "StreamNotFoundError");
    assert.equal((created.err as JetStreamApiError).code, STREAM_NOT_FOUND);

    const updated = await rejection("update in a missing bucket", kv.update("k", "v", 1));
    assert.equal(updated.err.name, "JetStreamNotEnabled");
    assert.equal(updated.err.message, "jetstream is not enabled");
    assert.ok(!(updated.err instanceof JetStreamApiError));
    const cause = updated.err.cause as Error;
    assert.equal(cause?.name, "RequestError");
    assert.equal(cause.message, "no responders: '$KV.no_such_bucket.k'");
  });

  // Real server only: the client's error for a failed revision check, which the adapter reads the current revision from;
  // through the port, on both targets, it is only wrongLastSequence().
  test("a failed revision check, from create, update or delete alike, is a JetStreamApiError 10071, status 400, 'wrong last sequence: <current revision>'", async () => {
    const kv = await freshBucket(30_000);
    const revision = await kv.create("leader", "a");
    const created = await rejection("a second create", kv.create("leader", "b"));
    assertWrongLastSequence(created.err, revision);
    const updated = await rejection("an update at a stale revision", kv.update("leader", "b", revision + 1));
    assertWrongLastSequence(updated.err, revision);
    const deleted = await rejection("a delete at a stale revision", kv.delete("leader", { previousSeq: revision + 1 }));
    assertWrongLastSequence(deleted.err, revision);
  });

  // Real server only: which marker a key holds; through the port a delete marker and a purge marker are both no value.
  test("a read and a watch tell a delete marker (operation DEL) from a purge marker (PURGE), each with an empty value", async (t) => {
    const kv = await freshBucket(30_000);
    const watch = await collectWatch(kv, "leader", KvWatchInclude.UpdatesOnly);
    t.after(() => watch.stop());
    await kv.create("leader", "a");
    await kv.delete("leader");
    const deleted = await kv.get("leader");
    assert.equal(deleted?.operation, "DEL");
    assert.equal(deleted?.length, 0);
    await kv.create("leader", "b");
    await kv.purge("leader");
    const purged = await kv.get("leader");
    assert.equal(purged?.operation, "PURGE");
    // Generous: on a machine busy with other test files, one run in many saw
    // fewer than four within 5 s. The entries so far are named if it fails.
    await waitFor("four watch entries", 15_000, () => watch.entries.length >= 4, { detail: () => describeEntries(watch.entries).join(", ") });
    assert.deepEqual(watch.entries.map((e) => e.operation), ["PUT", "DEL", "PUT", "PURGE"]);
    for (const marker of [watch.entries[1]!, watch.entries[3]!]) {
      assert.equal(marker.length, 0);
      assert.equal(marker.key, "leader");
    }
  });

  // Real server only: what the client does with requests while the server is down, or paused, or the connection cut.
  // The simulation's network and the linked port model it (each request fails after the client's 5 s; a create,
  // which is a put and then a read, after two), not the bucket.
  test("while the server is down, update fails with TimeoutError after the client's 5 s default and create after twice that (its fallback get times out too); neither is applied once it is back", async (t) => {
    const server = await ownServer(t);
    const connection = await ownConnection(t, { servers: server.url });
    const kv = await freshBucket(60_000, new Kvm(connection));
    const revision = await kv.create("leader", "a");
    await server.stop();

    const [create, update] = await withDeadline(
      Promise.all([
        rejection("create while the server is down", kv.create("other", "b")),
        rejection("update while the server is down", kv.update("leader", "b", revision)),
      ]),
      3 * DEFAULT_JS_TIMEOUT_MS + 10_000,
      "create and update while the server is down",
    );
    t.diagnostic(`update failed after ${update.ms.toFixed(0)} ms, create after ${create.ms.toFixed(0)} ms`);
    for (const { err } of [create, update]) {
      assert.ok(err instanceof TimeoutError, `expected a TimeoutError, got ${err.name}: ${err.message}`);
      assert.equal(err.message, "timeout");
    }
    assert.ok(update.ms >= DEFAULT_JS_TIMEOUT_MS - 50, `update failed after ${update.ms.toFixed(0)} ms`);
    assert.ok(update.ms < 2 * DEFAULT_JS_TIMEOUT_MS, `update failed after ${update.ms.toFixed(0)} ms, not at its one timeout`);
    assert.ok(create.ms >= 2 * DEFAULT_JS_TIMEOUT_MS - 50, `create failed after ${create.ms.toFixed(0)} ms, not after two timeouts`);

    const reconnected = nextStatus(connection, "reconnect");
    await server.start();
    await server.waitReady();
    await withDeadline(reconnected, 15_000, "reconnect");
    assert.equal(await kv.get("other"), null, "the create sent during the outage was not applied later");
    const entry = await kv.get("leader");
    assert.equal(entry?.revision, revision, "the update sent during the outage was not applied later");
    assert.equal(entry?.string(), "a");
  });

  test("a request made while disconnected is dropped at reconnect: it fails only at its own timeout although the connection came back before", async (t) => {
    const server = await ownServer(t);
    const connection = await ownConnection(t, { servers: server.url });
    const kv = await freshBucket(60_000, new Kvm(connection));
    const revision = await kv.create("leader", "a");
    await server.stop();
    // Long enough to span the restart and the client's reconnect (every 2 s by default).
    const timeoutMs = 8_000;
    const pending = rejection("an update made during the outage", kv.update("leader", "b", revision, timeoutMs));
    const reconnected = nextStatus(connection, "reconnect");
    await server.start();
    await server.waitReady();
    const reconnectedAt = await withDeadline(reconnected, 15_000, "reconnect status");
    const { err, ms } = await withDeadline(pending, timeoutMs + 5_000, "the pending update");
    const failedAt = performance.now();
    t.diagnostic(`the update failed ${ms.toFixed(0)} ms after it was made, ${(failedAt - reconnectedAt).toFixed(0)} ms after the reconnect`);
    assert.ok(err instanceof TimeoutError, `expected a TimeoutError, got ${err.name}: ${err.message}`);
    assert.ok(failedAt > reconnectedAt, "it failed after the connection was back");
    assert.equal((await kv.get("leader"))?.revision, revision, "it was never applied");
  });

  test("with the default maxReconnectAttempts (10) a connection gives up and closes with ConnectionError 'connection refused' when the server stays down", async (t) => {
    const server = await ownServer(t);
    // A short wait between attempts keeps this quick; the count is the default.
    const connection = await ownConnection(t, { servers: server.url, reconnectTimeWait: 100 });
    let attempts = 0;
    void (async () => {
      for await (const status of connection.status()) if (status.type === "reconnecting") attempts++;
    })();
    await server.stop();
    const closedWith = await withDeadline(connection.closed(), 20_000, "the connection to give up");
    assert.ok(connection.isClosed());
    assert.equal(attempts, 10);
    assert.ok(closedWith instanceof ConnectionError, `closed with ${closedWith}`);
    assert.equal(closedWith.message, "connection refused");
  });

  // Real server only: which consumer serves a watch, seen on the server's monitoring port; on both targets the case
  // "a watch goes on across a restart of the server" holds what the port sees.
  test("a watch resumes after the server restarts on its store dir: it delivers writes made after the restart", async (t) => {
    const server = await ownServer(t);
    const connection = await ownConnection(t, { servers: server.url });
    const kv = await freshBucket(60_000, new Kvm(connection));
    const bucket = (await kv.status()).bucket;
    const watch = await collectWatch(kv, "leader", KvWatchInclude.UpdatesOnly);
    t.after(() => watch.stop());
    const before = await kv.create("leader", "a");
    await waitFor("the first watch entry", 5_000, () => watch.entries.length === 1);
    const consumerBefore = (await consumersOf(server, bucket)).map((c) => c.name);
    assert.equal(consumerBefore.length, 1, "the watch is one consumer on the bucket's stream");

    const reconnected = nextStatus(connection, "reconnect");
    await server.restart({ crash: true });
    await withDeadline(reconnected, 15_000, "reconnect status");
    const afterRestart = await kv.update("leader", "b", before);
    await waitFor("the watch to deliver the write made after the restart", 10_000, () => watch.entries.length === 2);
    assert.deepEqual(describeEntries(watch.entries), [`PUT@${before}`, `PUT@${afterRestart}`]);
    assert.equal(watch.hasEnded, false);
    // The same consumer, kept in the store dir: not one the client made anew.
    assert.deepEqual((await consumersOf(server, bucket)).map((c) => c.name), consumerBefore);
  });

  // Real server only: a fault of the connection (a proxy resets it), which the simulation's network makes and the
  // linked port's watch answers as the client does (it resumes from where the server's consumer stood).
  test("a watch resumes after the client's connection is cut while the server keeps running (the server keeps its consumer 5 min), but it skips entries superseded meanwhile: history 1 keeps only the latest", async (t) => {
    const server = await ownServer(t);
    const proxy = await FaultProxy.start({ upstream: `127.0.0.1:${server.port}` });
    t.after(() => proxy.close());
    // Reconnect attempts fail fast while the proxy resets them: do not let the connection run out of them.
    const connection = await ownConnection(t, { servers: proxy.hostPort, reconnectTimeWait: 250, maxReconnectAttempts: -1 });
    const kv = await freshBucket(60_000, new Kvm(connection));
    const bucket = (await kv.status()).bucket;
    const watch = await collectWatch(kv, "leader", KvWatchInclude.UpdatesOnly);
    t.after(() => watch.stop());
    const first = await kv.create("leader", "a");
    await waitFor("the first watch entry", 5_000, () => watch.entries.length === 1);
    const [consumer] = await consumersOf(server, bucket);
    assert.equal(consumer.config.inactive_threshold, 5 * 60 * 1e9, "the server drops a watch's consumer after 5 min without its client");
    assert.equal(consumer.config.idle_heartbeat, 30 * 1e9, "the server heartbeats an idle watch every 30 s");

    proxy.setMode("reset");
    await waitFor("the server to see the watch's client gone", 5_000, async () => (await consumersOf(server, bucket))[0]?.push_bound !== true);
    // Two writes from another client while this one is cut off: the second replaces the first.
    const other = await ownConnection(t, { servers: server.url });
    const otherKv = await new Kvm(other).open(bucket);
    const superseded = await otherKv.update("leader", "b", first);
    const latest = await otherKv.update("leader", "c", superseded);
    const reconnected = nextStatus(connection, "reconnect");
    proxy.setMode("pass");
    await withDeadline(reconnected, 15_000, "reconnect status");
    await waitFor("the watch to deliver the latest write", 10_000, () => watch.entries.length >= 2);
    const afterCut = await kv.update("leader", "d", latest);
    await waitFor("the watch to deliver the write after the cut", 10_000, () => watch.entries.length >= 3);
    assert.deepEqual(describeEntries(watch.entries), [`PUT@${first}`, `PUT@${latest}`, `PUT@${afterCut}`]);
    assert.deepEqual((await consumersOf(server, bucket)).map((c) => c.name), [consumer.name], "the same consumer");
  });

  test("a paused server (SIGSTOP) makes create time out, yet the create is applied once the server resumes", async (t) => {
    const server = await ownServer(t);
    const connection = await ownConnection(t, { servers: server.url });
    // create() takes no timeout of its own: it uses the JetStream client's.
    const kv = await freshBucket(60_000, new Kvm(jetstream(connection, { timeout: 1_000 })));
    server.pause();
    let resumed = false;
    t.after(() => {
      if (!resumed) server.resume();
    });
    const { err, ms } = await withDeadline(rejection("create on a paused server", kv.create("leader", "a")), 10_000, "create on a paused server");
    t.diagnostic(`create failed after ${ms.toFixed(0)} ms with a 1 s JetStream timeout`);
    assert.ok(err instanceof TimeoutError, `expected a TimeoutError, got ${err.name}: ${err.message}`);
    server.resume();
    resumed = true;
    const entry = await waitFor("the timed-out create to show", 5_000, () => kv.get("leader"));
    assert.equal(entry.string(), "a");
    assert.equal(entry.operation, "PUT");
  });
});

describe("the nats-server test launcher", () => {
  test("serves TLS with client certificates and a password: a client with both gets a bucket; a wrong password gets AuthorizationError", async (t) => {
    const pki = makeTestPki();
    t.after(() => pki.cleanup());
    const auth = { user: "elector", password: 'pa ss"word' };
    const server = await startNats({
      tls: { certFile: pki.server.certFile, keyFile: pki.server.keyFile, caFile: pki.caFile, clientCertAuth: true },
      auth,
    });
    t.after(() => server.close());
    assert.match(server.url, /^tls:\/\/127\.0\.0\.1:\d+$/);
    const tls = { caFile: pki.caFile, certFile: pki.client.certFile, keyFile: pki.client.keyFile };
    const connection = await ownConnection(t, { servers: server.url, user: auth.user, pass: auth.password, tls });
    const kv = await freshBucket(30_000, new Kvm(connection));
    assert.ok((await kv.create("leader", "a")) > 0);

    const { err } = await rejection("a connection with a wrong password", connect({ servers: server.url, user: auth.user, pass: "wrong", tls }));
    assert.ok(err instanceof AuthorizationError, `expected an AuthorizationError, got ${err.name}: ${err.message}`);
  });

  test("says what to set when NATS_SERVER_BIN names no executable", async () => {
    const saved = process.env.NATS_SERVER_BIN;
    process.env.NATS_SERVER_BIN = "/nonexistent/nats-server";
    try {
      await assert.rejects(startNats(), /NATS_SERVER_BIN=\/nonexistent\/nats-server is not an executable file/);
    } finally {
      if (saved === undefined) delete process.env.NATS_SERVER_BIN;
      else process.env.NATS_SERVER_BIN = saved;
    }
  });
});
