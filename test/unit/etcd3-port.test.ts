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

class FakeWatcher extends EventEmitter {
  cancelled = false;
  async cancel(): Promise<void> {
    this.cancelled = true;
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

function client(answers: { txn?: unknown; keepAlive?: (id: string) => unknown }): { client: Etcd3Client; watchers: FakeWatcher[] } {
  const watchers: FakeWatcher[] = [];
  const fake = {
    get: () => builder(async () => ({ kvs: [], header: { revision: "1" } })),
    getAll: () => builder(async () => ({ kvs: [], header: { revision: "1" } })),
    put: () => builder(async () => ({})),
    if: () => {
      const txn = { then: () => txn, else: () => txn, commit: async () => answers.txn };
      return txn;
    },
    watch: () => {
      const watch = {
        prefix: () => watch,
        key: () => watch,
        inRange: () => watch,
        only: () => watch,
        startRevision: () => watch,
        watcher: () => {
          const watcher = new FakeWatcher();
          watchers.push(watcher);
          return watcher;
        },
      };
      return watch;
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
  return { client: fake as unknown as Etcd3Client, watchers };
}

describe("the v3 port on an etcd3 client", () => {
  it("answers a campaign that found the key with the key as it stood", async () => {
    const txn = { succeeded: false, header: { revision: "50" }, responses: [{ response_range: { kvs: [rawKv("/e/2b", "old", 30, 31)] } }] };
    const answer = await new Etcd3Port(client({ txn }).client).campaign({ key: "/e/2b", value: "new", leaseId: "43" });
    assert.deepEqual([answer.succeeded, answer.revision, answer.existing?.createRevision, answer.existing?.value], [false, 50, 30, "old"]);
  });

  it("delivers a watcher's events as the port's, the rest of one answer queued with the first; a replaced watcher's are dropped", async () => {
    const { client: fake, watchers } = client({});
    const watches = new Etcd3Port(fake).watches<"line" | "leader">(AbortSignal.timeout(5_000));
    watches.add("line", { range: { start: "/e/1", end: "/e/3\0" }, deletesOnly: true }, 11);
    watches.add("leader", { prefix: "/e/" }, 11);
    const [line, leader] = watchers as [FakeWatcher, FakeWatcher];
    // One answer of etcd's: both deletions at revision 12.
    line.emit("delete", rawKv("/e/1", "", 0, 12));
    line.emit("delete", rawKv("/e/3", "", 0, 12));
    leader.emit("put", rawKv("/e/9", "z", 13));
    const first = await watches.next();
    assert.ok(first.type === "delete");
    assert.deepEqual([first.watch, first.kv.key, first.kv.modRevision], ["line", "/e/1", 12]);
    assert.equal(watches.anyQueued((e) => e.type === "delete" && e.kv.key === "/e/3"), true);
    watches.add("line", { key: "/e/3" }, 12);
    assert.equal(line.cancelled, true);
    assert.equal(watches.anyQueued((e) => e.watch === "line"), false, "the replaced watcher's events are gone");
    const put = await watches.next();
    assert.ok(put.type === "put");
    assert.deepEqual([put.watch, put.kv.key, put.kv.value, put.kv.createRevision], ["leader", "/e/9", "z", 13]);
    watches.close();
  });

  it("reports a watch etcd cancelled as a WatchCancelledError: an event with reportCancel, else the set's failure", async () => {
    const { client: fake, watchers } = client({});
    const port = new Etcd3Port(fake);
    const reported = port.watches<"line">(AbortSignal.timeout(5_000));
    reported.add("line", { key: "/e/1", reportCancel: true }, 5);
    watchers[0]!.emit("error", new Error("Watcher canceled: "));
    const event = await reported.next();
    assert.ok(event.type === "cancelled" && event.error instanceof WatchCancelledError);
    reported.close();

    const failing = port.watches<"ours">(AbortSignal.timeout(5_000));
    failing.add("ours", { key: "/e/1" }, 5);
    watchers[1]!.emit("error", new Error("Watcher canceled: "));
    await assert.rejects(failing.next(), WatchCancelledError);
    failing.close();
  });

  it("closes soon: a watch added in the same turn shares the stream, and the set's watchers are cancelled after it", async () => {
    const { client: fake, watchers } = client({});
    const watches = new Etcd3Port(fake).watches<"line">(AbortSignal.timeout(5_000));
    watches.add("line", { key: "/e/1" }, 5);
    watches.closeSoon();
    assert.equal(watchers[0]!.cancelled, false);
    await new Promise((resolve) => process.nextTick(resolve));
    assert.equal(watchers[0]!.cancelled, true);
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
