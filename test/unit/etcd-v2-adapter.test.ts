// The etcd v2 port on node-etcd (src/stores/etcd-v2/node-etcd/adapter.ts),
// against a client double that answers as node-etcd 7 does: the request in
// node-etcd's terms, and its answers, headers and refusals in the port's.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { RequestTimeoutError } from "../../src/contract/errors";
import { NodeEtcdAdapter } from "../../src/stores/etcd-v2/node-etcd/adapter";
import type { NodeEtcdCallback, NodeEtcdClient } from "../../src/stores/etcd-v2/node-etcd/client";

interface Request {
  method: "create" | "get" | "set" | "del";
  key: string;
  value?: string | null;
  options: Record<string, unknown>;
  aborted: boolean;
  /** Answers as node-etcd does: etcd's JSON body and the response headers. */
  answer(body: unknown, headers?: Record<string, string>): void;
  /** Refuses as node-etcd does: an Error with etcd's errorCode and its body in `error`. */
  refuse(body: { errorCode: number; message: string; cause?: string; index?: number }): void;
}

class NodeEtcdDouble implements NodeEtcdClient {
  readonly requests: Request[] = [];

  create(key: string, value: string, options: object, callback: NodeEtcdCallback) {
    return this.request("create", key, value, options, callback);
  }
  get(key: string, options: object, callback: NodeEtcdCallback) {
    return this.request("get", key, undefined, options, callback);
  }
  set(key: string, value: string | null, options: object, callback: NodeEtcdCallback) {
    return this.request("set", key, value, options, callback);
  }
  del(key: string, options: object, callback: NodeEtcdCallback) {
    return this.request("del", key, undefined, options, callback);
  }

  last(): Request {
    const request = this.requests.at(-1);
    if (!request) throw new Error("no request sent");
    return request;
  }

  private request(method: Request["method"], key: string, value: string | null | undefined, options: object, callback: NodeEtcdCallback) {
    const request: Request = {
      method,
      key,
      ...(value === undefined ? {} : { value }),
      options: options as Record<string, unknown>,
      aborted: false,
      answer: (body, headers = {}) => callback(null, body, headers),
      refuse: (body) => callback(Object.assign(new Error(body.message), { errorCode: body.errorCode, error: body }), "", {}),
    };
    this.requests.push(request);
    return { abort: () => (request.aborted = true) };
  }
}

const KEY = "/election/00000000000000000042";
const keyNode = (modifiedIndex = 42) => ({ key: KEY, value: "me", ttl: 10, createdIndex: 42, modifiedIndex });

/**
 * Runs `work` with a timer that holds the event loop open: the adapter's
 * deadlines, like a timeout signal's, keep no process alive by themselves.
 */
async function keepingLoopOpen<T>(work: () => Promise<T>): Promise<T> {
  const open = setInterval(() => undefined, 1_000);
  try {
    return await work();
  } finally {
    clearInterval(open);
  }
}

function adapter() {
  const client = new NodeEtcdDouble();
  return { client, port: new NodeEtcdAdapter(client) };
}

describe("the node-etcd adapter of the etcd v2 port", () => {
  it("creates an in-order key with node-etcd's own retries off, and answers its node with X-Etcd-Index", async () => {
    const { client, port } = adapter();
    const creating = port.createInOrder("create membership", "/election", "me", 10, undefined);
    assert.deepEqual(client.last().options, { ttl: 10, maxRetries: 0 });
    client.last().answer({ action: "create", node: keyNode() }, { "x-etcd-index": "57" });
    assert.deepEqual(await creating, { node: keyNode(), etcdIndex: 57 });
  });

  it("refreshes with no value, and a conditional write keeps the value; a key etcd does not hold is an answer", async () => {
    const { client, port } = adapter();
    const refreshing = port.setIfExists("refresh membership", KEY, null, 10, undefined);
    assert.equal(client.last().value, null);
    assert.deepEqual(client.last().options, { ttl: 10, refresh: true, prevExist: true, maxRetries: 0 });
    client.last().refuse({ errorCode: 100, message: "Key not found", index: 88 });
    assert.deepEqual(await refreshing, { node: undefined, etcdIndex: 88 });
    const announcing = port.setIfExists("announce leadership", KEY, "me", 10, undefined);
    assert.deepEqual(client.last().options, { ttl: 10, prevExist: true, maxRetries: 0 });
    client.last().answer({ action: "update", node: keyNode(90) }, { "x-etcd-index": "90" });
    assert.deepEqual(await announcing, { node: keyNode(90), etcdIndex: 90 });
  });

  it("passes any other refusal on as node-etcd gave it, its errorCode with it", async () => {
    const { client, port } = adapter();
    const reading = port.get("read member", KEY, {}, new AbortController().signal);
    client.last().refuse({ errorCode: 110, message: "The request requires user authentication" });
    await assert.rejects(reading, (err: { errorCode?: number; message: string }) => err.errorCode === 110 && /authentication/.test(err.message));
  });

  it("gives up a read with no answer within the bound it was given, and aborts its request", async () => {
    const { client, port } = adapter();
    const reading = keepingLoopOpen(() => port.get("list members", "/election", { sorted: true }, new AbortController().signal, 20));
    await assert.rejects(reading, (err: Error) => err.name === "UnansweredError" && /no answer to list members within 20 ms/.test(err.message));
    assert.equal(client.last().aborted, true);
  });

  it("lists sorted and reads by quorum as asked, and without X-Etcd-Index goes by the newest index the answer shows", async () => {
    const { client, port } = adapter();
    const listing = port.get("list members", "/election", { sorted: true }, new AbortController().signal);
    assert.deepEqual(client.last().options, { maxRetries: 0, sorted: true });
    const dir = { key: "/election", dir: true, createdIndex: 5, modifiedIndex: 5, nodes: [keyNode(60), { ...keyNode(70), key: `${KEY}1` }] };
    client.last().answer({ action: "get", node: dir });
    assert.equal((await listing).etcdIndex, 70);
    const reading = port.get("read member", KEY, { quorum: true }, new AbortController().signal);
    assert.deepEqual(client.last().options, { maxRetries: 0, quorum: true });
    client.last().answer({ action: "get", node: keyNode(61) });
    assert.equal((await reading).etcdIndex, 61);
  });

  it("reads a key past its TTL that etcd's sync has not removed yet, which etcd answers with its expiration and no ttl, as a key with 0 s left, alone and in a listing", async () => {
    const { client, port } = adapter();
    const expired = { key: KEY, value: "gone", expiration: "2026-01-01T00:00:10Z", createdIndex: 42, modifiedIndex: 42 };
    const byHand = { key: `${KEY}1`, value: "by hand", createdIndex: 43, modifiedIndex: 43 };
    const reading = port.get("read member", KEY, {}, new AbortController().signal);
    client.last().answer({ action: "get", node: expired }, { "x-etcd-index": "50" });
    assert.deepEqual(await reading, { node: { ...expired, ttl: 0 }, etcdIndex: 50 });
    const listing = port.get("list members", "/election", { sorted: true }, new AbortController().signal);
    const dir = { key: "/election", dir: true, createdIndex: 5, modifiedIndex: 5, nodes: [expired, keyNode(), byHand] };
    client.last().answer({ action: "get", node: dir }, { "x-etcd-index": "50" });
    const { node } = await listing;
    assert.deepEqual(
      node?.nodes?.map((n) => n.ttl),
      [0, 10, undefined],
      "a key written without a TTL, and only such a key, has none",
    );
  });

  it("answers a wait with the event, or with where etcd's history starts when it has forgotten the index asked for", async () => {
    const { client, port } = adapter();
    const signal = new AbortController().signal;
    const waiting = port.wait("/election", 43, true, signal, 30_000);
    assert.deepEqual(client.last().options, { wait: true, waitIndex: 43, recursive: true, maxRetries: 0 });
    client.last().answer({ action: "expire", node: { key: KEY, createdIndex: 42, modifiedIndex: 99 }, prevNode: keyNode() });
    assert.deepEqual(await waiting, { kind: "event", action: "expire", node: { key: KEY, createdIndex: 42, modifiedIndex: 99 } });
    const forgotten = port.wait(KEY, 43, false, signal, 30_000);
    client.last().refuse({ errorCode: 401, message: "The event in requested index is outdated and cleared", cause: "the requested history has been cleared [1200/43]", index: 2199 });
    assert.deepEqual(await forgotten, { kind: "history-gone", historyStart: 1200 });
    const unnamed = port.wait(KEY, 43, false, signal, 30_000);
    client.last().refuse({ errorCode: 401, message: "The event in requested index is outdated and cleared" });
    assert.deepEqual(await unnamed, { kind: "history-gone", historyStart: undefined });
  });

  it("abandons a wait with no answer within its bound: the request is aborted and the wait answers unanswered", async () => {
    const { client, port } = adapter();
    const answer = await keepingLoopOpen(() => port.wait(KEY, 43, false, new AbortController().signal, 20));
    assert.deepEqual(answer, { kind: "unanswered" });
    assert.equal(client.last().aborted, true);
  });

  it("rejects with the signal's reason when it aborts, a RequestTimeoutError for a timeout, and aborts the request", async () => {
    const { client, port } = adapter();
    const controller = new AbortController();
    const reason = new Error("stopped");
    const reading = port.get("read member", KEY, {}, controller.signal);
    controller.abort(reason);
    await assert.rejects(reading, (err) => err === reason);
    assert.equal(client.last().aborted, true);
    const timedOut = port.setIfExists("refresh membership", KEY, null, 10, AbortSignal.timeout(10));
    await keepingLoopOpen(() => assert.rejects(timedOut, (err) => err instanceof RequestTimeoutError && err.operation === "refresh membership"));
    assert.equal(client.last().aborted, true);
  });

  it("answers a delete of a key etcd does not hold with false", async () => {
    const { client, port } = adapter();
    const deleting = port.delete("delete membership", KEY, undefined);
    assert.deepEqual(client.last().options, { maxRetries: 0 });
    client.last().refuse({ errorCode: 100, message: "Key not found", index: 7 });
    assert.equal(await deleting, false);
    const deleted = port.delete("delete membership", KEY, undefined);
    client.last().answer({ action: "delete", node: { key: KEY, createdIndex: 42, modifiedIndex: 8 } });
    assert.equal(await deleted, true);
  });

  it("names a v2 API that is switched off, from the plain-text answer etcd 3.4 gives without --enable-v2", async () => {
    const { client, port } = adapter();
    const listing = port.get("list members", "/election", { sorted: true }, new AbortController().signal);
    client.last().answer("404 page not found\n");
    await assert.rejects(listing, /etcd answered list members with .*the v2 API is disabled/);
  });
});
