// The facts of etcd's v2 API that the v2 recipe relies on (etcd-v2-facts.ts),
// held by a real etcd 3.4 started with --enable-v2=true, through node-etcd 7
// and the port's adapter, and by the simulated etcd v2 the simulation runs on
// (test/sim/stores/etcd-v2.ts): one set of cases, two targets.
//
// Below them, on the real server only, the facts of the raw HTTP API and of
// the node-etcd client that the adapter is written to: HTTP statuses, the
// `expiration` and `prevNode` the port does not carry, node-etcd's error
// shapes, aborts and retries. The simulated store sits behind the port, with
// no HTTP and no client: there is nothing of these for it to hold. What the
// adapter makes of them is unit-tested (test/unit/etcd-v2-adapter.test.ts).
import { after, before, describe, it, test } from "node:test";
import assert from "node:assert/strict";
import { NodeEtcdAdapter } from "../../../src/stores/etcd-v2/node-etcd/adapter";
import type { NodeEtcdClient } from "../../../src/stores/etcd-v2/node-etcd/client";
import { startEtcd, type EtcdCluster } from "../../kit/etcd-server";
import { freePort } from "../../kit/free-port";
import { sleep } from "../../kit/waiting";
import { EtcdV2Store, schedulerClock } from "../../sim/stores/etcd-v2";
import { Scheduler } from "../../sim/world";
import { V2_FACTS, type FactsTarget, type Operator, type Written } from "./etcd-v2-facts";

// ---------------------------------------------------------------------------
// Shapes of v2 answers and of the node-etcd client (it ships no types).

interface V2Node {
  key: string;
  value?: string;
  dir?: boolean;
  expiration?: string;
  ttl?: number;
  modifiedIndex: number;
  createdIndex: number;
  nodes?: V2Node[];
}

interface V2Body {
  action?: string;
  node?: V2Node;
  prevNode?: V2Node;
  errorCode?: number;
  message?: string;
  cause?: string;
  index?: number;
}

interface V2Answer {
  status: number;
  etcdIndex: number;
  body: V2Body;
}

type NodeEtcdCallback = (err: NodeEtcdError | null, body: V2Body | "" | undefined, headers?: Record<string, string>) => void;

interface NodeEtcdToken {
  abort(): void;
  retries: number;
  errors: unknown[];
}

interface NodeEtcdError extends Error {
  errorCode?: number;
  error?: V2Body;
  retries?: number;
  errors?: Array<{
    server: string;
    httperror?: (Error & { code?: string }) | null;
    httpstatus?: number;
    httpbody?: unknown;
    timestamp: Date;
  }>;
}

type Opts = Record<string, string | number | boolean>;

interface NodeEtcd {
  create(dir: string, value: string, opts: Opts, cb: NodeEtcdCallback): NodeEtcdToken;
  get(key: string, opts: Opts, cb: NodeEtcdCallback): NodeEtcdToken;
  set(key: string, value: string | null, opts: Opts, cb: NodeEtcdCallback): NodeEtcdToken;
  del(key: string, opts: Opts, cb: NodeEtcdCallback): NodeEtcdToken;
}

// eslint-disable-next-line @typescript-eslint/no-require-imports
const Etcd: new (hosts: string[]) => NodeEtcd = require("node-etcd");

interface NodeEtcdResult {
  err: NodeEtcdError | null;
  body: V2Body | "" | undefined;
  headers: Record<string, string> | undefined;
  ms: number;
}

/** Runs one node-etcd call and resolves with whatever its callback gets. */
function nodeEtcd(start: (cb: NodeEtcdCallback) => NodeEtcdToken): Promise<NodeEtcdResult> {
  const t0 = performance.now();
  return new Promise((resolve) => {
    start((err, body, headers) => resolve({ err, body, headers, ms: performance.now() - t0 }));
  });
}

// ---------------------------------------------------------------------------
// Plain HTTP.

let cluster: EtcdCluster;
let base: string;
let client: NodeEtcd;
const extraClusters: EtcdCluster[] = [];
const openWatches = new Set<Watch>();

function url(key: string, query: Record<string, string | number | boolean> = {}): string {
  const qs = new URLSearchParams(Object.entries(query).map(([k, v]): [string, string] => [k, String(v)])).toString();
  return `${base}/v2/keys${key.startsWith("/") ? key : `/${key}`}${qs ? `?${qs}` : ""}`;
}

async function answer(res: Response): Promise<V2Answer> {
  const text = await res.text();
  return { status: res.status, etcdIndex: Number(res.headers.get("x-etcd-index")), body: JSON.parse(text) as V2Body };
}

async function v2(
  method: "GET" | "PUT" | "POST" | "DELETE",
  key: string,
  query: Record<string, string | number | boolean> = {},
  form?: Record<string, string>,
): Promise<V2Answer> {
  const res = await fetch(url(key, query), {
    method,
    ...(form ? { body: new URLSearchParams(form) } : {}),
    signal: AbortSignal.timeout(10_000),
  });
  return answer(res);
}

/** POST an in-order key under dir; returns the create answer. */
async function createInOrder(dir: string, value: string, ttl: number): Promise<V2Answer & { node: V2Node }> {
  const a = await v2("POST", dir, {}, { value, ttl: String(ttl) });
  assert.equal(a.status, 201, JSON.stringify(a.body));
  assert.equal(a.body.action, "create");
  return { ...a, node: a.body.node! };
}

/** A long-poll watch over plain HTTP: settles when etcd sends the event. */
class Watch {
  private readonly controller = new AbortController();
  settled = false;
  readonly result: Promise<V2Answer>;

  constructor(key: string, query: Record<string, string | number | boolean>) {
    openWatches.add(this);
    this.result = fetch(url(key, { wait: true, ...query }), { signal: this.controller.signal })
      .then(answer)
      .finally(() => {
        this.settled = true;
        openWatches.delete(this);
      });
    // A watch that is aborted at clean-up must not count as an unhandled rejection.
    this.result.catch(() => undefined);
  }

  abort(): void {
    this.controller.abort();
  }

  /** Resolves with the event, failing if none comes within `ms`. */
  async event(ms = 5_000): Promise<V2Answer> {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`watch got no event within ${ms} ms`)), ms);
    });
    try {
      return await Promise.race([this.result, timeout]);
    } finally {
      clearTimeout(timer);
    }
  }
}

/** An etcd refusal, as the operator's etcdctl would report it: its errorCode, and etcd's body. */
function refusal(body: V2Body): Error & { errorCode?: number } {
  return Object.assign(new Error(`${body.message ?? "etcd refused"} (${body.errorCode}): ${body.cause ?? ""}`), { errorCode: body.errorCode, error: body });
}

/** The operator of a real etcd: its v2 HTTP API, as etcdctl speaks it. */
const httpOperator: Operator = {
  async put(key, value, options = {}) {
    const query: Record<string, string | number | boolean> = {};
    if (options.ttl !== undefined) query.ttl = options.ttl;
    if (options.prevExist !== undefined) query.prevExist = options.prevExist;
    if (options.prevIndex !== undefined) query.prevIndex = options.prevIndex;
    if (options.refresh) query.refresh = true;
    const a = await v2("PUT", key, query, value === undefined ? undefined : { value });
    if (a.body.errorCode !== undefined) throw refusal(a.body);
    return { action: a.body.action!, node: a.body.node!, etcdIndex: a.etcdIndex } satisfies Written;
  },
  async remove(key, options = {}) {
    const query: Record<string, string | number | boolean> = {};
    if (options.recursive) query.recursive = true;
    if (options.prevIndex !== undefined) query.prevIndex = options.prevIndex;
    const a = await v2("DELETE", key, query);
    if (a.body.errorCode !== undefined) throw refusal(a.body);
    return { action: a.body.action!, node: a.body.node!, etcdIndex: a.etcdIndex } satisfies Written;
  },
  elapse: (ms) => sleep(ms),
};

let cases = 0;
const dirFor = () => `/facts/${++cases}`;

before(async () => {
  cluster = await startEtcd();
  base = cluster.members[0]!.clientUrl;
  client = new Etcd(cluster.hostPorts);
});

after(async () => {
  for (const w of openWatches) w.abort();
  await Promise.all([cluster?.close(), ...extraClusters.map((c) => c.close())]);
});

describe("etcd v2 facts, on a real etcd, through node-etcd and the port's adapter", () => {
  let target: FactsTarget;
  before(() => {
    target = { name: "etcd", port: new NodeEtcdAdapter(client as unknown as NodeEtcdClient), operator: httpOperator };
  });

  for (const fact of V2_FACTS) {
    it(fact.title, async () => {
      const dir = dirFor();
      try {
        await fact.run(target, dir);
      } finally {
        // No key left to expire during a later case: some count etcd's events.
        await v2("DELETE", dir, { recursive: true });
      }
    });
  }
});

describe("etcd v2 facts, on the simulated etcd", () => {
  for (const fact of V2_FACTS) {
    it(fact.title, async () => {
      const scheduler = new Scheduler();
      const store = new EtcdV2Store(schedulerClock(scheduler));
      const target: FactsTarget = {
        name: "simulated etcd",
        port: store,
        operator: {
          put: async (key, value, options) => store.put(key, value, options),
          remove: async (key, options) => store.deleteNow(key, options),
          elapse: (ms) => scheduler.runUntil(scheduler.now + ms),
        },
      };
      await fact.run(target, dirFor());
    });
  }
});

// ---------------------------------------------------------------------------

describe("etcd 3.4's raw v2 API and node-etcd 7, which the adapter is written to (real server only: the simulation has neither HTTP nor a client)", () => {
  test("POST answers 201; a key with a TTL carries its `expiration`, which a refresh moves later, and which stays when the TTL is up and etcd leaves `ttl` out", async () => {
    const c = await createInOrder("/raw1/election", "me", 20);
    assert.ok(c.node.expiration, "a ttl key has an expiration");
    const r = await v2("PUT", c.node.key, { ttl: 60, refresh: true, prevExist: true });
    assert.equal(r.status, 200, JSON.stringify(r.body));
    assert.equal(r.body.action, "update");
    assert.ok(Date.parse(r.body.node!.expiration!) > Date.parse(c.node.expiration!), `expiration moves later: ${c.node.expiration} -> ${r.body.node!.expiration}`);
    // A key whose time is up, before the sync removes it.
    const short = await createInOrder("/raw1/short", "v", 1);
    await sleep(1_000);
    let seen: V2Node | undefined;
    for (let i = 0; i < 50 && !seen; i++) {
      const g = await v2("GET", short.node.key);
      if (g.status === 404) break;
      if (g.body.node!.ttl === undefined) seen = g.body.node;
      else await sleep(10);
    }
    if (seen) assert.ok(seen.expiration, `left without a ttl, it keeps its expiration: ${JSON.stringify(seen)}`);
    await v2("DELETE", "/raw1", { recursive: true });
  });

  test("a refresh with a value is HTTP 400 / 211, a refresh of a missing key HTTP 404 / 100; node-etcd refuses with errorCode, etcd's body in `error`, no body, and X-Etcd-Index in the headers", async () => {
    const c = await createInOrder("/raw2", "v", 30);
    const withValue = await v2("PUT", c.node.key, { ttl: 30, refresh: true, prevExist: true }, { value: "v" });
    assert.deepEqual([withValue.status, withValue.body.errorCode], [400, 211]);
    const missing = await v2("PUT", "/raw2/00000000000000000001", { ttl: 30, refresh: true, prevExist: true });
    assert.deepEqual([missing.status, missing.body.errorCode], [404, 100]);
    // node-etcd: set(key, null, {refresh}) sends no value and succeeds.
    const ok = await nodeEtcd((cb) => client.set(c.node.key, null, { ttl: 30, refresh: true, prevExist: true, maxRetries: 0 }, cb));
    assert.equal(ok.err, null);
    assert.equal((ok.body as V2Body).node!.value, "v");
    const e211 = await nodeEtcd((cb) => client.set(c.node.key, "v", { ttl: 30, refresh: true, prevExist: true, maxRetries: 0 }, cb));
    assert.equal(e211.err?.errorCode, 211);
    assert.equal(e211.err?.error!.errorCode, 211);
    assert.equal(e211.body, "");
    const e100 = await nodeEtcd((cb) => client.set("/raw2/00000000000000000001", null, { ttl: 30, refresh: true, prevExist: true, maxRetries: 0 }, cb));
    assert.equal(e100.err?.errorCode, 100);
    assert.equal(e100.err?.message, "Key not found");
    assert.ok(Number(e100.headers!["x-etcd-index"]) > 0, "error answers carry X-Etcd-Index too");
    await v2("DELETE", "/raw2", { recursive: true });
  });

  test("answers carry the `prevNode` (a compareAndSwap's, a delete's, an expiry's), which the port leaves out", async () => {
    const c = await createInOrder("/raw3", "me", 30);
    const cas = await v2("PUT", c.node.key, { ttl: 30, prevIndex: c.node.modifiedIndex }, { value: "me" });
    assert.deepEqual([cas.body.action, cas.body.prevNode?.value], ["compareAndSwap", "me"]);
    const d = await v2("DELETE", c.node.key);
    assert.deepEqual([d.body.action, d.body.prevNode?.value], ["delete", "me"]);
    const exp = await createInOrder("/raw3", "y", 1);
    const e = await new Watch(exp.node.key, { waitIndex: exp.etcdIndex + 1 }).event(6_000);
    assert.deepEqual([e.body.action, e.body.prevNode?.value], ["expire", "y"]);
    await v2("DELETE", "/raw3", { recursive: true, dir: true });
  });

  test("a wait from a forgotten index is HTTP 400 / 401; node-etcd refuses it at once, not retried, as 'The event in requested index is outdated and cleared', its cause '[<oldest kept>/<asked>]'", async () => {
    const c = await createInOrder("/raw4/election", "me", 60);
    for (let i = 0; i < 1_001; i++) await v2("PUT", `/raw4/noise/k${i % 50}`, {}, { value: String(i) });
    const old = await new Watch(c.node.key, { waitIndex: c.etcdIndex + 1 }).event(2_000);
    assert.deepEqual([old.status, old.body.errorCode], [400, 401]);
    const viaClient = await nodeEtcd((cb) => client.get(c.node.key, { wait: true, waitIndex: c.etcdIndex + 1 }, cb));
    assert.equal(viaClient.err?.errorCode, 401);
    assert.equal(viaClient.err?.message, "The event in requested index is outdated and cleared");
    const named = /\[(\d+)\/(\d+)\]/.exec(viaClient.err?.error?.cause ?? "");
    assert.ok(named, `cause: ${viaClient.err?.error?.cause}`);
    assert.equal(Number(named[2]), c.etcdIndex + 1);
    assert.ok(viaClient.ms < 1_000);
    await v2("DELETE", "/raw4", { recursive: true });
  });

  describe("node-etcd 7", () => {
    test("an aborted request never calls back (a plain get and a long-poll watch)", async () => {
      const c = await createInOrder("/raw5/abort", "v", 30);
      let calls = 0;
      const watchToken = client.get(c.node.key, { wait: true, waitIndex: c.etcdIndex + 1, maxRetries: 0 }, () => calls++);
      const getToken = client.get(c.node.key, { maxRetries: 0 }, () => calls++);
      getToken.abort();
      await sleep(100);
      watchToken.abort();
      // The event the watch was waiting for happens after the abort.
      const d = await v2("DELETE", c.node.key);
      assert.equal(d.body.action, "delete");
      await sleep(300);
      assert.equal(calls, 0, "an aborted request called back");
      // Control: the same watch, not aborted, does call back.
      const control = await nodeEtcd((cb) => client.get(c.node.key, { wait: true, waitIndex: c.etcdIndex + 1, maxRetries: 0 }, cb));
      assert.equal(control.err, null);
      assert.equal((control.body as V2Body).action, "delete");
    });

    test("unreachable server: maxRetries 0 fails promptly with 'All servers returned error'; the default retries (>= 100 ms)", async () => {
      const port = await freePort();
      const dead = new Etcd([`127.0.0.1:${port}`]);
      const r = await nodeEtcd((cb) => dead.get("/x", { maxRetries: 0 }, cb));
      assert.ok(r.err);
      assert.equal(r.err.message, "All servers returned error");
      assert.equal(r.err.retries, 0);
      assert.equal(r.err.errors!.length, 1);
      assert.equal(r.err.errors![0]!.httperror!.code, "ECONNREFUSED");
      assert.equal(r.err.errorCode, undefined);
      assert.ok(r.ms < 1_000, `took ${r.ms} ms`);

      // Default retries: 3, waiting 100 ms, 1.6 s, 25.6 s between rounds. The
      // token counts a retry when it schedules it and records each failed
      // attempt in token.errors: wait for the second attempt, then abort.
      let called = false;
      const t0 = performance.now();
      const token = dead.get("/x", {}, () => (called = true));
      try {
        while (token.errors.length < 2 && performance.now() - t0 < 2_000) await sleep(5);
        const secondAttemptAfter = performance.now() - t0;
        assert.equal(token.errors.length, 2, "a second attempt within 2 s");
        assert.ok(secondAttemptAfter >= 100, `second attempt after ${secondAttemptAfter} ms`);
        assert.equal(called, false, "with retries left it has not called back");
      } finally {
        token.abort();
      }
    });

    test("a long-poll watch when the etcd server is stopped mid-poll: error shape", async () => {
      const own = await startEtcd();
      extraClusters.push(own);
      const e = new Etcd(own.hostPorts);
      const c = await nodeEtcd((cb) => e.create("/raw6/stop", "v", { ttl: 30, maxRetries: 0 }, cb));
      const key = (c.body as V2Body).node!.key;
      const index = Number(c.headers!["x-etcd-index"]);

      const noRetry = nodeEtcd((cb) => e.get(key, { wait: true, waitIndex: index + 1, maxRetries: 0 }, cb));
      let defaultCalled = false;
      const withRetry = e.get(key, { wait: true, waitIndex: index + 1 }, () => (defaultCalled = true));
      try {
        await sleep(300);
        const stopAt = performance.now();
        await own.members[0]!.stop();
        const r = await noRetry;
        const afterStop = performance.now() - stopAt;
        assert.ok(r.err);
        const err = r.err;
        assert.equal(err.message, "All servers returned error");
        assert.equal(err.errorCode, undefined, "no etcd errorCode: a transport error");
        assert.equal(err.retries, 0);
        assert.equal(r.body, undefined);
        assert.equal(err.errors!.length, 1);
        const first = err.errors![0]!;
        assert.ok(first.httperror instanceof Error);
        assert.ok(["ECONNRESET", "EPIPE", "ECONNREFUSED"].includes(first.httperror.code ?? ""), `code ${first.httperror.code}`);
        assert.equal(first.httpstatus, undefined);
        assert.ok(afterStop < 5_000);

        // With the default maxRetries the same loss is retried (ECONNRESET and
        // ECONNREFUSED count as a "possible leader election"), so no callback yet.
        const t0 = performance.now();
        while (withRetry.errors.length < 2 && performance.now() - t0 < 2_000) await sleep(5);
        assert.equal(withRetry.errors.length, 2, "the default watch tried again");
        assert.equal(defaultCalled, false, "the default watch has not called back yet");
      } finally {
        withRetry.abort();
      }
    });
  });
});
