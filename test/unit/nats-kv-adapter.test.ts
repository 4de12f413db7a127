// The @nats-io/kv adapter of the NATS KV port (src/stores/nats-kv/nats/adapter.ts),
// on a stand-in for the client's bucket handle: how it classifies the
// client's errors (the shapes test/stores/nats-kv/nats-kv-facts.test.ts
// checks against a real server), and how it reads a watch's iterator into the
// port's listener.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { NatsKvBucket, NatsKvEntry, NatsKvWatch } from "../../src/stores/nats-kv/nats/client";
import { NatsKvAdapter } from "../../src/stores/nats-kv/nats/adapter";
import type { KvWatchListener } from "../../src/stores/nats-kv/port";

const entry = (operation: string, revision: number, value = ""): NatsKvEntry => ({ operation, revision, string: () => value });

/** A watch iterator fed by hand: push() entries, end() or fail() it. */
class ScriptedWatch implements NatsKvWatch {
  stopped = false;
  consumerDeleted = false;
  readonly _data = { delete: async () => void (this.consumerDeleted = true) };
  private readonly queue: Array<IteratorResult<NatsKvEntry> | Error> = [];
  private waiting: (() => void) | undefined;

  push(item: NatsKvEntry | Error | "end"): void {
    this.queue.push(item === "end" ? { done: true, value: undefined } : item instanceof Error ? item : { done: false, value: item });
    this.waiting?.();
  }

  stop(): void {
    this.stopped = true;
    this.push("end");
  }

  [Symbol.asyncIterator](): AsyncIterator<NatsKvEntry> {
    return {
      next: async () => {
        while (this.queue.length === 0) await new Promise<void>((resolve) => (this.waiting = resolve));
        const item = this.queue.shift()!;
        if (item instanceof Error) throw item;
        return item;
      },
    };
  }
}

function bucketWith(overrides: Partial<NatsKvBucket>): NatsKvBucket {
  const unused = () => Promise.reject(new Error("not used here"));
  return { create: unused, update: unused, delete: unused, get: unused, watch: unused, status: unused, ...overrides };
}

interface Heard {
  entries: Array<[string | undefined, number]>;
  ends: string[];
}

async function listening(iterator: ScriptedWatch): Promise<{ heard: Heard; stop: () => void }> {
  const adapter = new NatsKvAdapter(bucketWith({ watch: async () => iterator }));
  const watch = await adapter.watch("leader");
  const heard: Heard = { entries: [], ends: [] };
  const listener: KvWatchListener = {
    onEntry: (value, revision) => heard.entries.push([value, revision]),
    onEnd: (error) => heard.ends.push(error.message),
  };
  watch.listen(listener);
  return { heard, stop: () => watch.stop() };
}

const flush = () => new Promise((resolve) => setImmediate(resolve));

describe("the @nats-io/kv adapter", () => {
  it("reads a failed revision check's current revision from the JetStream error, and nothing from other errors", () => {
    const adapter = new NatsKvAdapter(bucketWith({}));
    assert.equal(adapter.wrongLastSequence({ code: 10071, message: "wrong last sequence: 42" }), 42);
    assert.equal(adapter.wrongLastSequence({ code: 10071, message: "wrong last sequence" }), 0);
    assert.equal(adapter.wrongLastSequence({ code: 10059, message: "stream not found" }), undefined);
    assert.equal(adapter.wrongLastSequence(new Error("wrong last sequence: 42")), undefined);
    assert.equal(adapter.wrongLastSequence(undefined), undefined);
  });

  it("recognises a missing bucket as reads and creates report it, and as updates and deletes do (no responders)", () => {
    const adapter = new NatsKvAdapter(bucketWith({}));
    assert.equal(adapter.isBucketMissing({ code: 10059 }), true);
    assert.equal(adapter.isBucketMissing({ name: "StreamNotFoundError" }), true);
    assert.equal(adapter.isBucketMissing({ name: "JetStreamNotEnabled", cause: { message: "no responders: 'kv.x'" } }), true);
    assert.equal(adapter.isBucketMissing({ name: "JetStreamNotEnabled", cause: { message: "jetstream not enabled" } }), false);
    assert.equal(adapter.isBucketMissing({ name: "TimeoutError" }), false);
  });

  it("hands a read's value, a marker as no value, and no entry as undefined", async () => {
    const entries = new Map<string, NatsKvEntry | null>([
      ["put", entry("PUT", 7, "a")],
      ["del", entry("DEL", 8)],
      ["purge", entry("PURGE", 9)],
      ["none", null],
    ]);
    const adapter = new NatsKvAdapter(bucketWith({ get: async (key) => entries.get(key) ?? null }));
    assert.deepEqual(await adapter.get("put"), { value: "a", revision: 7 });
    assert.deepEqual(await adapter.get("del"), { value: undefined, revision: 8 });
    assert.deepEqual(await adapter.get("purge"), { value: undefined, revision: 9 });
    assert.equal(await adapter.get("none"), undefined);
  });

  it("conditions a delete on the revision, and passes a write's answer through as the client gave it", async () => {
    const deletes: unknown[] = [];
    const created = Promise.resolve(5);
    const adapter = new NatsKvAdapter(
      bucketWith({
        create: () => created,
        delete: async (_key, options) => void deletes.push(options),
      }),
    );
    assert.equal(adapter.create("leader", "a"), created, "a create's promise is the client's own: no hop added");
    await adapter.delete("leader", 12);
    assert.deepEqual(deletes, [{ previousSeq: 12 }]);
  });

  it("tells the listener each entry in order, markers without a value, and that the watch ended by itself", async () => {
    const iterator = new ScriptedWatch();
    const { heard } = await listening(iterator);
    iterator.push(entry("PUT", 3, "a"));
    iterator.push(entry("DEL", 4));
    iterator.push(entry("PURGE", 5));
    iterator.push(entry("PUT", 6, "b"));
    await flush();
    assert.deepEqual(heard.entries, [["a", 3], [undefined, 4], [undefined, 5], ["b", 6]]);
    assert.deepEqual(heard.ends, []);
    iterator.push("end");
    await flush();
    assert.deepEqual(heard.ends, ["the watch of the election key ended (connection closed?)"]);
  });

  it("reports a watch that failed with its error", async () => {
    const iterator = new ScriptedWatch();
    const { heard } = await listening(iterator);
    iterator.push(new Error("consumer deleted"));
    await flush();
    assert.deepEqual(heard.ends, ["consumer deleted"]);
  });

  it("stops the client's watch and deletes its consumer on stop(), and reports no end for it", async () => {
    const iterator = new ScriptedWatch();
    const { heard, stop } = await listening(iterator);
    stop();
    await flush();
    assert.equal(iterator.stopped, true);
    assert.equal(iterator.consumerDeleted, true, "the consumer would stay on the server for five minutes");
    assert.deepEqual(heard.ends, []);
  });
});
