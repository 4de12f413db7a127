// The v3 port on the etcd3 client (src/stores/etcd-v3/etcd3/port.ts), on a
// stand-in for the client: what it makes of etcd3's answers, events and
// errors. The requests it sends are checked against a real etcd in
// test/stores/etcd-v3/.
import assert from "node:assert/strict";
import { EventEmitter } from "node:events";
import { describe, it } from "node:test";
import type { Etcd3Client } from "../../src/stores/etcd-v3/etcd3/client";
import { Etcd3Port } from "../../src/stores/etcd-v3/etcd3/port";
import { LeaseNotFoundError, WatchCancelledError } from "../../src/stores/etcd-v3/port";

/** An etcd3 IKeyValue as the client hands it over: Buffers and decimal strings. */
function rawKv(key: string, value: string, createRevision: number, modRevision = createRevision) {
  return { key: Buffer.from(key), value: Buffer.from(value), create_revision: String(createRevision), mod_revision: String(modRevision), lease: "0", version: "1" };
}

/** etcd's Watch stream as etcd3's `watchClient.watch()` hands it over: what is written is kept, what etcd says is emitted. */
class FakeWatchStream extends EventEmitter {
  readonly written: Array<{ create_request?: { key: Buffer; range_end?: Buffer; start_revision: string; filters?: unknown[] }; cancel_request?: { watch_id: string } }> = [];
  ended = false;
  write(request: FakeWatchStream["written"][number]): void {
    this.written.push(request);
  }
  end(): void {
    this.ended = true;
  }
  cancel(): void {}
  /** etcd's answers to the creates written so far, with IDs from `firstId` on. */
  answerCreates(firstId: number): void {
    let id = firstId;
    for (const request of this.written) if (request.create_request) this.emit("data", { created: true, watch_id: String(id++), events: [] });
  }
  cancels(): string[] {
    return this.written.flatMap((request) => (request.cancel_request ? [request.cancel_request.watch_id] : []));
  }
}

/** Chainable builders that record nothing: the answers are what is under test. */
function builder(exec: () => Promise<unknown>): Record<string, unknown> {
  const self: Record<string, unknown> = {};
  for (const method of ["prefix", "inRange", "sort", "limit", "minCreateRevision", "maxCreateRevision", "revision", "value", "lease"]) {
    self[method] = () => self;
  }
  self.exec = exec;
  return self;
}

function client(answers: { txn?: unknown; keepAlive?: (id: string) => unknown }): { client: Etcd3Client; streams: FakeWatchStream[] } {
  const streams: FakeWatchStream[] = [];
  const fake = {
    get: () => builder(async () => ({ kvs: [], header: { revision: "1" } })),
    getAll: () => builder(async () => ({ kvs: [], header: { revision: "1" } })),
    put: () => builder(async () => ({})),
    if: () => {
      const txn = { then: () => txn, else: () => txn, commit: async () => answers.txn };
      return txn;
    },
    prefix: Buffer.alloc(0),
    watchClient: {
      watch: async () => {
        const stream = new FakeWatchStream();
        streams.push(stream);
        return stream;
      },
    },
    leaseClient: {
      leaseGrant: async () => ({ ID: "7587869834", TTL: "5" }),
      leaseRevoke: async () => ({}),
      leaseKeepAlive: async () => {
        const stream = Object.assign(new EventEmitter(), {
          write: (request: { ID: string }) => {
            setImmediate(() => {
              const answer = answers.keepAlive!(request.ID);
              if (answer instanceof Error) stream.emit("error", answer);
              else stream.emit("data", answer);
            });
          },
          end: () => undefined,
          cancel: () => undefined,
        });
        return stream;
      },
    },
  };
  return { client: fake as unknown as Etcd3Client, streams };
}

async function waitUntil(test: () => boolean): Promise<void> {
  for (let i = 0; i < 200 && !test(); i++) await new Promise((resolve) => setTimeout(resolve, 5));
  assert.ok(test(), "timed out waiting");
}

/** Until the first watch stream is open and its creates are written. */
function untilOpen(streams: FakeWatchStream[]): Promise<void> {
  return waitUntil(() => streams.length > 0 && streams[0]!.written.length > 0);
}

describe("the v3 port on an etcd3 client", () => {
  it("answers a campaign that found the key with the key as it stood", async () => {
    const txn = { succeeded: false, header: { revision: "50" }, responses: [{ response_range: { kvs: [rawKv("/e/2b", "old", 30, 31)] } }] };
    const answer = await new Etcd3Port(client({ txn }).client).campaign({ key: "/e/2b", value: "new", leaseId: "43" });
    assert.deepEqual([answer.succeeded, answer.revision, answer.existing?.createRevision, answer.existing?.value], [false, 50, 30, "old"]);
  });

  it("delivers a watch's events as the port's, the rest of one answer queued with the first; a replaced watch's are dropped", async () => {
    const { client: fake, streams } = client({});
    const watches = new Etcd3Port(fake).watches<"line" | "leader">(AbortSignal.timeout(5_000));
    watches.add("line", { range: { start: "/e/1", end: "/e/3\0" }, deletesOnly: true }, 11);
    watches.add("leader", { prefix: "/e/" }, 11);
    await untilOpen(streams);
    const stream = streams[0]!;
    const [line, leader] = stream.written.map((request) => request.create_request!);
    assert.deepEqual([line!.key.toString(), line!.range_end!.toString(), line!.start_revision, line!.filters], ["/e/1", "/e/3\0", "11", [0]]);
    assert.deepEqual([leader!.key.toString(), leader!.range_end!.toString(), leader!.filters], ["/e/", "/e0", undefined]);
    assert.equal(watches.created("line"), false);
    stream.answerCreates(7);
    assert.equal(watches.created("line"), true);
    // One answer of etcd's: both deletions at revision 12.
    stream.emit("data", { watch_id: "7", events: [{ type: "Delete", kv: rawKv("/e/1", "", 0, 12) }, { type: "Delete", kv: rawKv("/e/3", "", 0, 12) }] });
    stream.emit("data", { watch_id: "8", events: [{ type: "Put", kv: rawKv("/e/9", "z", 13) }] });
    const first = await watches.next();
    assert.ok(first.type === "delete");
    assert.deepEqual([first.watch, first.kv.key, first.kv.modRevision], ["line", "/e/1", 12]);
    assert.equal(watches.anyQueued((e) => e.type === "delete" && e.kv.key === "/e/3"), true);
    watches.add("line", { key: "/e/3" }, 12);
    assert.equal(watches.anyQueued((e) => e.watch === "line"), false, "the replaced watch's events are gone");
    assert.deepEqual(stream.cancels(), [], "a cancel is written after the turn it was asked for in");
    await new Promise((resolve) => setImmediate(resolve));
    assert.deepEqual(stream.cancels(), ["7"]);
    const put = await watches.next();
    assert.ok(put.type === "put");
    assert.deepEqual([put.watch, put.kv.key, put.kv.value, put.kv.createRevision], ["leader", "/e/9", "z", 13]);
    watches.close();
  });

  it("writes every create at once and gives etcd's answers to them in order; one cancelled before its answer is cancelled at etcd then", async () => {
    const { client: fake, streams } = client({});
    const port = new Etcd3Port(fake);
    const sets = Array.from({ length: 5 }, () => port.watches<"w">(AbortSignal.timeout(5_000)));
    sets.forEach((set, i) => set.add("w", { key: `/e/${i}` }, 3));
    await untilOpen(streams);
    const stream = streams[0]!;
    assert.equal(streams.length, 1, "one stream for every set on the client");
    assert.equal(stream.written.length, 5, "no create waits for the answer to the one before");
    sets[1]!.close();
    stream.answerCreates(20);
    assert.deepEqual(stream.cancels(), ["21"]);
    assert.deepEqual(sets.map((set) => set.created("w")), [true, false, true, true, true]);
    stream.emit("data", { watch_id: "23", events: [{ type: "Delete", kv: rawKv("/e/3", "", 0, 9) }] });
    const event = await sets[3]!.next();
    assert.ok(event.type === "delete" && event.kv.key === "/e/3");
    assert.equal(sets[2]!.anyQueued(() => true), false);
    // etcd's answer to the cancel, for an ID nobody holds: dropped.
    stream.emit("data", { watch_id: "21", canceled: true, events: [] });
    for (const set of sets) set.close();
  });

  it("fails every set on the stream when it fails, and the next watch opens another stream", async () => {
    const { client: fake, streams } = client({});
    const port = new Etcd3Port(fake);
    const a = port.watches<"w">(AbortSignal.timeout(5_000));
    const b = port.watches<"w">(AbortSignal.timeout(5_000));
    a.add("w", { key: "/e/1" }, 3);
    await untilOpen(streams);
    streams[0]!.answerCreates(1);
    b.add("w", { key: "/e/2" }, 3);
    const broken = new Error("14 UNAVAILABLE: connection reset");
    streams[0]!.emit("error", broken);
    await assert.rejects(a.next(), (err) => err === broken);
    await assert.rejects(b.next(), (err) => err === broken);
    const c = port.watches<"w">(AbortSignal.timeout(5_000));
    c.add("w", { key: "/e/3" }, 3);
    await waitUntil(() => streams.length === 2);
    assert.equal(streams[1]!.written[0]!.create_request!.key.toString(), "/e/3");
    c.close();
  });

  it("reports a watch etcd cancelled as a WatchCancelledError: an event with reportCancel, else the set's failure", async () => {
    const { client: fake, streams } = client({});
    const port = new Etcd3Port(fake);
    const reported = port.watches<"line">(AbortSignal.timeout(5_000));
    reported.add("line", { key: "/e/1", reportCancel: true }, 5);
    const failing = port.watches<"ours">(AbortSignal.timeout(5_000));
    failing.add("ours", { key: "/e/1" }, 5);
    await untilOpen(streams);
    streams[0]!.answerCreates(1);
    streams[0]!.emit("data", { watch_id: "1", canceled: true, compact_revision: "4", cancel_reason: "", events: [] });
    const event = await reported.next();
    assert.ok(event.type === "cancelled" && event.error instanceof WatchCancelledError);
    assert.match(event.error.message, /compacted \(at revision 4\)/);
    reported.close();

    streams[0]!.emit("data", { watch_id: "2", canceled: true, compact_revision: "4", cancel_reason: "", events: [] });
    await assert.rejects(failing.next(), WatchCancelledError);
    failing.close();
  });

  it("closes soon: a watch added in the same turn shares the stream, and the set's watches are cancelled after it", async () => {
    const { client: fake, streams } = client({});
    const port = new Etcd3Port(fake);
    const watches = port.watches<"line">(AbortSignal.timeout(5_000));
    watches.add("line", { key: "/e/1" }, 5);
    await untilOpen(streams);
    streams[0]!.answerCreates(1);
    watches.closeSoon();
    const next = port.watches<"ours">(AbortSignal.timeout(5_000));
    next.add("ours", { key: "/e/2" }, 5);
    assert.deepEqual(streams[0]!.cancels(), []);
    await new Promise((resolve) => process.nextTick(resolve));
    await new Promise((resolve) => setImmediate(resolve));
    assert.deepEqual(streams[0]!.cancels(), ["1"]);
    assert.equal(streams[0]!.ended, false, "the stream still carries a watch");
    next.close();
    await new Promise((resolve) => setImmediate(resolve));
    assert.equal(streams[0]!.ended, true, "no watch left: the stream is closed");
  });

  it("cancels of every watch asked for in one turn close the stream instead of being written", async () => {
    const { client: fake, streams } = client({});
    const port = new Etcd3Port(fake);
    const sets = [1, 2, 3].map((i) => {
      const set = port.watches<"ours">(AbortSignal.timeout(5_000));
      set.add("ours", { key: `/e/${i}` }, 5);
      return set;
    });
    await untilOpen(streams);
    streams[0]!.answerCreates(1);
    sets[0]!.close();
    await new Promise((resolve) => setImmediate(resolve));
    assert.deepEqual(streams[0]!.cancels(), ["1"], "with watches left, the cancel is written");
    sets[1]!.close();
    sets[2]!.close();
    await new Promise((resolve) => setImmediate(resolve));
    assert.deepEqual(streams[0]!.cancels(), ["1"], "the last two cancels were not written");
    assert.equal(streams[0]!.ended, true, "the stream was closed instead");
  });

  it("answers a keep-alive with the TTL left, and etcd's lease-not-found as a LeaseNotFoundError whose cause is etcd's answer", async () => {
    const notFound = new Error("5 NOT_FOUND: etcdserver: requested lease not found");
    let answer: unknown = { ID: "7587869834", TTL: "4" };
    const port = new Etcd3Port(client({ keepAlive: () => answer }).client);
    assert.equal(await port.keepAlive("7587869834", AbortSignal.timeout(5_000)), 4);
    answer = notFound;
    await assert.rejects(port.keepAlive("7587869834", AbortSignal.timeout(5_000)), (err) => err instanceof LeaseNotFoundError && err.cause === notFound);
    port.abandonLease("7587869834");
  });
});
