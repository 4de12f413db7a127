// Checks, against a real etcd 3.4 started with --enable-v2=true, the behaviours
// of the v2 keys API (and of the node-etcd 7 client) that the v2 backend's
// design depends on. Each test names the fact it checks; if etcd or node-etcd
// ever behaves differently, the test for that fact fails.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { startEtcd, type EtcdCluster } from "../../kit/etcd-server";
import { freePort } from "../../kit/free-port";

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
// Plain HTTP helpers.

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
  readonly startedAt = performance.now();
  settledAt = 0;

  constructor(key: string, query: Record<string, string | number | boolean>) {
    openWatches.add(this);
    this.result = fetch(url(key, { wait: true, ...query }), { signal: this.controller.signal })
      .then(answer)
      .finally(() => {
        this.settled = true;
        this.settledAt = performance.now();
        openWatches.delete(this);
      });
    // A watch that is aborted at clean-up must not count as an unhandled rejection.
    this.result.catch(() => undefined);
  }

  abort(): void {
    this.controller.abort();
  }

  /** Fails if the watch answered within `ms`. */
  async assertPending(ms: number, what: string): Promise<void> {
    await sleep(ms);
    if (this.settled) {
      const got = await this.result.catch((e: unknown) => e);
      assert.fail(`${what}: the watch answered although nothing it watches changed: ${JSON.stringify(got)}`);
    }
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

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

before(async () => {
  cluster = await startEtcd();
  base = cluster.members[0].clientUrl;
  client = new Etcd(cluster.hostPorts);
});

after(async () => {
  for (const w of openWatches) w.abort();
  await Promise.all([cluster?.close(), ...extraClusters.map((c) => c.close())]);
});

// ---------------------------------------------------------------------------

describe("etcd 3.4 v2 API facts the v2 backend relies on", () => {
  test("fact 1: POST <dir> with ttl creates <dir>/<20-digit createdIndex>; GET ?sorted=true lists in creation order; X-Etcd-Index is sent", async () => {
    const dir = "/f1/election";
    const created: V2Node[] = [];
    for (const value of ["a", "b", "c"]) {
      const a = await createInOrder(dir, value, 30);
      assert.ok(Number.isInteger(a.etcdIndex) && a.etcdIndex > 0, "X-Etcd-Index header present");
      assert.equal(a.node.createdIndex, a.node.modifiedIndex);
      assert.equal(a.node.key, `${dir}/${String(a.node.createdIndex).padStart(20, "0")}`);
      assert.match(a.node.key, /\/\d{20}$/);
      assert.equal(a.node.ttl, 30);
      assert.ok(a.node.expiration, "a ttl key has an expiration");
      assert.ok(a.etcdIndex >= a.node.createdIndex);
      created.push(a.node);
    }
    // The same through node-etcd: the body and the headers.
    const viaClient = await nodeEtcd((cb) => client.create(dir, "d", { ttl: 30, maxRetries: 0 }, cb));
    assert.equal(viaClient.err, null);
    const clientBody = viaClient.body as V2Body;
    assert.equal(clientBody.action, "create");
    assert.equal(clientBody.node!.key, `${dir}/${String(clientBody.node!.createdIndex).padStart(20, "0")}`);
    assert.equal(Number(viaClient.headers!["x-etcd-index"]), clientBody.node!.createdIndex);
    created.push(clientBody.node!);

    const list = await v2("GET", dir, { sorted: true });
    assert.equal(list.status, 200);
    assert.ok(list.etcdIndex >= created[created.length - 1].createdIndex);
    assert.equal(list.body.node!.dir, true);
    const keys = list.body.node!.nodes!.map((n) => n.key);
    assert.deepEqual(keys, created.map((n) => n.key));
    assert.deepEqual(list.body.node!.nodes!.map((n) => n.value), ["a", "b", "c", "d"]);
    // Zero padding makes lexical order equal numeric order.
    assert.deepEqual([...keys].sort(), keys);
    // No ttl keys left to expire during later tests (fact 6 counts events).
    assert.equal((await v2("DELETE", dir, { recursive: true })).body.action, "delete");
  });

  test("fact 2: PUT ?ttl&refresh=true&prevExist=true without a value renews the TTL and notifies neither a key watch nor a recursive dir watch; refreshes are not in the event history", async () => {
    const dir = "/f2/election";
    const c = await createInOrder(dir, "me", 20);
    const key = c.node.key;
    const keyWatch = new Watch(key, { waitIndex: c.etcdIndex + 1 });
    const dirWatch = new Watch(dir, { recursive: true, waitIndex: c.etcdIndex + 1 });
    await sleep(100); // let both watches register before the refresh

    const r = await v2("PUT", key, { ttl: 60, refresh: true, prevExist: true });
    assert.equal(r.status, 200, JSON.stringify(r.body));
    assert.equal(r.body.action, "update");
    assert.equal(r.body.node!.value, "me", "value unchanged");
    assert.equal(r.body.node!.ttl, 60);
    assert.equal(r.body.node!.createdIndex, c.node.createdIndex);
    assert.ok(r.body.node!.modifiedIndex > c.node.modifiedIndex, "modifiedIndex increases");
    assert.ok(r.etcdIndex >= r.body.node!.modifiedIndex, "the refresh advances X-Etcd-Index");
    assert.ok(
      Date.parse(r.body.node!.expiration!) > Date.parse(c.node.expiration!),
      `expiration moves later: ${c.node.expiration} -> ${r.body.node!.expiration}`,
    );
    const read = await v2("GET", key);
    assert.equal(read.body.node!.value, "me");
    assert.equal(read.body.node!.modifiedIndex, r.body.node!.modifiedIndex);

    await keyWatch.assertPending(500, "key watch after refresh");
    assert.equal(dirWatch.settled, false, "recursive dir watch after refresh: still pending");

    // Watches started after the refresh from indexes at or before it: the
    // refresh is not in the history, so they wait for the next real event.
    const fromRefresh = new Watch(key, { waitIndex: r.body.node!.modifiedIndex });
    const dirFromCreate = new Watch(dir, { recursive: true, waitIndex: c.node.createdIndex + 1 });
    // Control: a waitIndex at the create does return the create from history.
    const fromCreate = await new Watch(key, { waitIndex: c.node.createdIndex }).event(2_000);
    assert.equal(fromCreate.body.action, "create");
    await fromRefresh.assertPending(300, "key watch from the refresh's index");
    assert.equal(dirFromCreate.settled, false, "dir watch from before the refresh: still pending");

    // All four do fire on a later delete, with the delete.
    const d = await v2("DELETE", key);
    assert.equal(d.body.action, "delete");
    for (const [name, w] of [["key", keyWatch], ["dir", dirWatch], ["key from refresh", fromRefresh], ["dir from create", dirFromCreate]] as const) {
      const e = await w.event();
      assert.equal(e.body.action, "delete", `${name} watch sees the delete`);
      assert.equal(e.body.node!.key, key);
      assert.equal(e.body.node!.modifiedIndex, d.body.node!.modifiedIndex);
    }
  });

  test("fact 3: refresh with a value gives errorCode 211; refresh of a missing key with prevExist=true gives errorCode 100 (HTTP and node-etcd)", async () => {
    const c = await createInOrder("/f3", "v", 30);
    const withValue = await v2("PUT", c.node.key, { ttl: 30, refresh: true, prevExist: true }, { value: "v" });
    assert.equal(withValue.body.errorCode, 211, JSON.stringify(withValue.body));
    assert.equal(withValue.status, 400);
    const missing = await v2("PUT", "/f3/00000000000000000001", { ttl: 30, refresh: true, prevExist: true });
    assert.equal(missing.body.errorCode, 100, JSON.stringify(missing.body));
    assert.equal(missing.status, 404);
    console.log("refresh with value:", JSON.stringify(withValue.body));
    console.log("refresh of missing key:", JSON.stringify(missing.body));

    // node-etcd: set(key, null, {refresh}) sends no value and succeeds; its
    // errors carry errorCode and the etcd body.
    const ok = await nodeEtcd((cb) => client.set(c.node.key, null, { ttl: 30, refresh: true, prevExist: true, maxRetries: 0 }, cb));
    assert.equal(ok.err, null);
    assert.equal((ok.body as V2Body).action, "update");
    assert.equal((ok.body as V2Body).node!.value, "v");
    const e211 = await nodeEtcd((cb) => client.set(c.node.key, "v", { ttl: 30, refresh: true, prevExist: true, maxRetries: 0 }, cb));
    assert.ok(e211.err);
    assert.equal(e211.err.errorCode, 211);
    assert.equal(e211.err.error!.errorCode, 211);
    assert.equal(e211.body, "");
    const e100 = await nodeEtcd((cb) => client.set("/f3/00000000000000000001", null, { ttl: 30, refresh: true, prevExist: true, maxRetries: 0 }, cb));
    assert.ok(e100.err);
    assert.equal(e100.err.errorCode, 100);
    assert.equal(e100.err.message, "Key not found");
    assert.equal(Number(e100.headers!["x-etcd-index"]) > 0, true, "error answers carry X-Etcd-Index too");
    assert.equal((await v2("DELETE", c.node.key)).body.action, "delete");
  });

  test("fact 4: set(key, sameValue, {ttl, prevIndex}) (etcd-leader 0.0.1's refresh) DOES notify a key watch, as compareAndSwap", async () => {
    const dir = "/f4/election";
    const c = await createInOrder(dir, "me", 30);
    const keyWatch = new Watch(c.node.key, { waitIndex: c.etcdIndex + 1 });
    const dirWatch = new Watch(dir, { recursive: true, waitIndex: c.etcdIndex + 1 });
    await sleep(100);
    const s = await nodeEtcd((cb) => client.set(c.node.key, "me", { ttl: 30, prevIndex: c.node.modifiedIndex, maxRetries: 0 }, cb));
    assert.equal(s.err, null, String(s.err));
    assert.equal((s.body as V2Body).action, "compareAndSwap");
    for (const [name, w] of [["key", keyWatch], ["dir", dirWatch]] as const) {
      const e = await w.event(2_000);
      assert.equal(e.body.action, "compareAndSwap", `${name} watch fires`);
      assert.equal(e.body.node!.key, c.node.key);
      assert.equal(e.body.node!.value, "me");
      assert.equal(e.body.prevNode!.value, "me");
    }
    await v2("DELETE", c.node.key);
  });

  test("fact 5: deletes and expiries reach a key watch and a recursive dir watch (actions delete / expire; an expire event's node has no value)", async () => {
    // Delete.
    const del = await createInOrder("/f5/del", "x", 30);
    const delKey = new Watch(del.node.key, { waitIndex: del.etcdIndex + 1 });
    const delDir = new Watch("/f5/del", { recursive: true, waitIndex: del.etcdIndex + 1 });
    await sleep(100);
    await v2("DELETE", del.node.key);
    for (const w of [delKey, delDir]) {
      const e = await w.event(2_000);
      assert.equal(e.body.action, "delete");
      assert.equal(e.body.node!.key, del.node.key);
      assert.equal(e.body.node!.value, undefined);
      assert.equal(e.body.prevNode!.value, "x");
    }
    // Expiry.
    const exp = await createInOrder("/f5/exp", "y", 1);
    const expKey = new Watch(exp.node.key, { waitIndex: exp.etcdIndex + 1 });
    const expDir = new Watch("/f5/exp", { recursive: true, waitIndex: exp.etcdIndex + 1 });
    for (const w of [expKey, expDir]) {
      const e = await w.event(6_000);
      assert.equal(e.body.action, "expire", JSON.stringify(e.body));
      assert.equal(e.body.node!.key, exp.node.key);
      assert.ok(!("value" in e.body.node!), `expire node has no value: ${JSON.stringify(e.body.node)}`);
      assert.equal(e.body.prevNode!.value, "y");
      assert.equal(e.body.node!.createdIndex, exp.node.createdIndex);
    }
    console.log("expire event:", JSON.stringify((await expKey.result).body));
  });

  test("fact 6: only the last 1000 events are kept: an older waitIndex answers errorCode 401, a watch already pending keeps waiting and fires on the key's delete", async () => {
    const c = await createInOrder("/f6/election", "me", 60);
    const pending = new Watch(c.node.key, { waitIndex: c.etcdIndex + 1 });
    const pendingDir = new Watch("/f6/election", { recursive: true, waitIndex: c.etcdIndex + 1 });
    await sleep(100);

    // More than 1000 writes to unrelated keys.
    const writes = 1_100;
    let next = 0;
    const t0 = performance.now();
    await Promise.all(
      Array.from({ length: 16 }, async () => {
        while (next < writes) {
          const n = next++;
          const a = await v2("PUT", `/f6/noise/k${n % 50}`, {}, { value: String(n) });
          assert.ok(a.status === 200 || a.status === 201, JSON.stringify(a.body));
        }
      }),
    );
    console.log(`${writes} writes took ${Math.round(performance.now() - t0)} ms`);
    assert.equal(pending.settled, false, "key watch still pending after the unrelated writes");
    assert.equal(pendingDir.settled, false, "dir watch still pending after the unrelated writes");

    const now = await v2("GET", "/f6/noise/k0");
    const current = now.etcdIndex;
    assert.ok(current - c.etcdIndex > 1_000);

    // An old waitIndex: 401 over HTTP ...
    const old = await new Watch(c.node.key, { waitIndex: c.etcdIndex + 1 }).event(2_000);
    assert.equal(old.body.errorCode, 401, JSON.stringify(old.body));
    assert.equal(old.status, 400);
    console.log("outdated waitIndex:", JSON.stringify(old.body));
    // ... the boundary: the oldest kept event is current - 999 ...
    const tooOld = await new Watch("/f6/noise", { recursive: true, waitIndex: current - 1_000 }).event(2_000);
    assert.equal(tooOld.body.errorCode, 401, JSON.stringify(tooOld.body));
    const oldest = await new Watch("/f6/noise", { recursive: true, waitIndex: current - 999 }).event(2_000);
    assert.equal(oldest.body.action, "set", JSON.stringify(oldest.body));
    assert.equal(oldest.body.node!.modifiedIndex, current - 999);
    // ... and through node-etcd: an error with errorCode 401, not retried.
    const viaClient = await nodeEtcd((cb) => client.get(c.node.key, { wait: true, waitIndex: c.etcdIndex + 1 }, cb));
    assert.ok(viaClient.err);
    assert.equal(viaClient.err.errorCode, 401);
    assert.equal(viaClient.err.message, "The event in requested index is outdated and cleared");
    // The cause names the oldest index the history still holds, and the index asked for.
    const cause = (viaClient.err as { error?: { cause?: string } }).error?.cause ?? "";
    const named = /\[(\d+)\/(\d+)\]/.exec(cause);
    assert.ok(named, `cause: ${cause}`);
    assert.equal(Number(named[2]), c.etcdIndex + 1);
    assert.ok(Number(named[1]) > c.etcdIndex + 1 && Number(named[1]) <= current - 999, `oldest kept ${named[1]}, current ${current}`);
    assert.ok(viaClient.ms < 1_000);

    // The watches pending from before still fire on the delete.
    const d = await v2("DELETE", c.node.key);
    for (const w of [pending, pendingDir]) {
      const e = await w.event(2_000);
      assert.equal(e.body.action, "delete");
      assert.equal(e.body.node!.key, c.node.key);
      assert.equal(e.body.node!.modifiedIndex, d.body.node!.modifiedIndex);
    }
  });

  test("fact 7: a ttl 1 key is gone no earlier than 1 s after creation; a watcher sees the expire within about TTL + 1 s", async () => {
    const t0 = performance.now(); // before the create is sent: a lower bound of the creation time
    const c = await createInOrder("/f7", "v", 1);
    const w = new Watch(c.node.key, { waitIndex: c.etcdIndex + 1 });
    let goneAfter = 0;
    for (;;) {
      const g = await v2("GET", c.node.key);
      if (g.status === 404) {
        goneAfter = performance.now() - t0;
        assert.equal(g.body.errorCode, 100);
        break;
      }
      assert.equal(g.status, 200);
      assert.ok(performance.now() - t0 < 10_000, "key never expired");
      await sleep(25);
    }
    const e = await w.event(10_000);
    const watchAfter = w.settledAt - t0;
    assert.equal(e.body.action, "expire");
    console.log(`ttl 1: GET 404 after ${Math.round(goneAfter)} ms, watch saw expire after ${Math.round(watchAfter)} ms`);
    assert.ok(goneAfter >= 1_000, `expired before its TTL: ${goneAfter} ms`);
    assert.ok(watchAfter >= 1_000, `expire event before the TTL: ${watchAfter} ms`);
    assert.ok(goneAfter < 5_000, `expiry took ${goneAfter} ms`);
    assert.ok(watchAfter < 5_000, `expire event took ${watchAfter} ms`);
  });

  describe("fact 8: node-etcd 7 behaviour", () => {
    test("an aborted request never calls back (a plain get and a long-poll watch)", async () => {
      const c = await createInOrder("/f8/abort", "v", 30);
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
      assert.equal(r.err.errors![0].httperror!.code, "ECONNREFUSED");
      assert.equal(r.err.errorCode, undefined);
      assert.ok(r.ms < 1_000, `took ${r.ms} ms`);
      console.log(`unreachable, maxRetries 0: callback after ${Math.round(r.ms)} ms:`, r.err.message, r.err.errors!.map((e) => e.httperror?.code));

      // Default retries: 3, waiting 100 ms, 1.6 s, 25.6 s between rounds. The
      // token counts a retry when it schedules it and records each failed
      // attempt in token.errors: wait for the second attempt, then abort.
      let called = false;
      const t0 = performance.now();
      const token = dead.get("/x", {}, () => (called = true));
      let secondAttemptAfter: number;
      try {
        while (token.errors.length < 2 && performance.now() - t0 < 2_000) await sleep(5);
        secondAttemptAfter = performance.now() - t0;
        assert.equal(token.errors.length, 2, "a second attempt within 2 s");
        assert.ok(secondAttemptAfter >= 100, `second attempt after ${secondAttemptAfter} ms`);
        assert.equal(called, false, "with retries left it has not called back");
      } finally {
        token.abort();
      }
      console.log(`unreachable, default maxRetries: second attempt failed ${Math.round(secondAttemptAfter)} ms after the call, no callback yet; aborted`);
    });

    test("a long-poll watch when the etcd server is stopped mid-poll: error shape", async () => {
      const own = await startEtcd();
      extraClusters.push(own);
      const e = new Etcd(own.hostPorts);
      const c = await nodeEtcd((cb) => e.create("/f8/stop", "v", { ttl: 30, maxRetries: 0 }, cb));
      const key = (c.body as V2Body).node!.key;
      const index = Number(c.headers!["x-etcd-index"]);

      const noRetry = nodeEtcd((cb) => e.get(key, { wait: true, waitIndex: index + 1, maxRetries: 0 }, cb));
      let defaultCalled = false;
      const withRetry = e.get(key, { wait: true, waitIndex: index + 1 }, () => (defaultCalled = true));
      try {
        await sleep(300);
        const stopAt = performance.now();
        await own.members[0].stop();
        const r = await noRetry;
        const afterStop = performance.now() - stopAt;
        assert.ok(r.err);
        const err = r.err;
        console.log(`watch, server stopped mid-poll (maxRetries 0), callback ${Math.round(afterStop)} ms after stop began:`, {
          message: err.message,
          errorCode: err.errorCode,
          retries: err.retries,
          body: r.body,
          headers: r.headers,
          errors: err.errors!.map((x) => ({
            server: x.server,
            code: x.httperror?.code,
            message: x.httperror?.message,
            httpstatus: x.httpstatus,
            httpbody: x.httpbody,
          })),
        });
        assert.equal(err.message, "All servers returned error");
        assert.equal(err.errorCode, undefined, "no etcd errorCode: a transport error");
        assert.equal(err.retries, 0);
        assert.equal(r.body, undefined);
        assert.equal(err.errors!.length, 1);
        const first = err.errors![0];
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

  test("fact 9: DELETE with prevIndex=<createdIndex> is a compareAndDelete; a plain DELETE works; prevIndex compares modifiedIndex", async () => {
    const dir = "/f9/election";
    const a = await createInOrder(dir, "a", 30);
    const wrong = await v2("DELETE", a.node.key, { prevIndex: a.node.createdIndex + 1000 });
    assert.equal(wrong.body.errorCode, 101, JSON.stringify(wrong.body));
    const cad = await v2("DELETE", a.node.key, { prevIndex: a.node.createdIndex });
    assert.equal(cad.status, 200, JSON.stringify(cad.body));
    assert.equal(cad.body.action, "compareAndDelete");
    assert.equal(cad.body.prevNode!.value, "a");
    assert.equal((await v2("GET", a.node.key)).body.errorCode, 100);

    const b = await createInOrder(dir, "b", 30);
    const plain = await v2("DELETE", b.node.key);
    assert.equal(plain.status, 200);
    assert.equal(plain.body.action, "delete");
    assert.equal((await v2("GET", b.node.key)).body.errorCode, 100);

    // Through node-etcd, the same compareAndDelete.
    const c = await createInOrder(dir, "c", 30);
    const viaClient = await nodeEtcd((cb) => client.del(c.node.key, { prevIndex: c.node.createdIndex, maxRetries: 0 }, cb));
    assert.equal(viaClient.err, null);
    assert.equal((viaClient.body as V2Body).action, "compareAndDelete");

    // prevIndex is checked against modifiedIndex: once a key was refreshed,
    // prevIndex=<createdIndex> no longer matches (errorCode 101).
    const d = await createInOrder(dir, "d", 30);
    const r = await v2("PUT", d.node.key, { ttl: 30, refresh: true, prevExist: true });
    assert.equal(r.body.action, "update");
    const stale = await v2("DELETE", d.node.key, { prevIndex: d.node.createdIndex });
    assert.equal(stale.body.errorCode, 101, JSON.stringify(stale.body));
    console.log("prevIndex=createdIndex after a refresh:", JSON.stringify(stale.body));
    const fresh = await v2("DELETE", d.node.key, { prevIndex: r.body.node!.modifiedIndex });
    assert.equal(fresh.body.action, "compareAndDelete");
  });

  test("fact 10: a write of a value with prevExist=true reaches a key watch as an `update`; 0.0.1's renewal (a write with prevIndex) as a `compareAndSwap`", async () => {
    const dir = "/f10/election";
    const c = await createInOrder(dir, "me", 30);
    const key = c.node.key;
    const announcement = new Watch(key, { waitIndex: c.etcdIndex + 1 });
    await sleep(100);
    const u = await v2("PUT", key, { value: "me", ttl: 30, prevExist: true });
    assert.equal(u.status, 200, JSON.stringify(u.body));
    const seen = await announcement.event();
    assert.equal(seen.body.action, "update");
    assert.equal(seen.body.node!.value, "me");
    assert.equal(seen.body.node!.createdIndex, c.node.createdIndex, "the same key: its createdIndex stays");

    const renewal = new Watch(key, { waitIndex: u.body.node!.modifiedIndex + 1 });
    await sleep(100);
    const cas = await v2("PUT", key, { value: "me", ttl: 30, prevIndex: u.body.node!.modifiedIndex });
    assert.equal(cas.status, 200, JSON.stringify(cas.body));
    assert.equal((await renewal.event()).body.action, "compareAndSwap");

    // Through node-etcd as the backend sends it.
    const viaClient = new Watch(key, { waitIndex: cas.body.node!.modifiedIndex + 1 });
    await sleep(100);
    const sent = await nodeEtcd((cb) => client.set(key, "me", { ttl: 30, prevExist: true, maxRetries: 0 }, cb));
    assert.equal(sent.err, null);
    assert.equal((await viaClient.event()).body.action, "update");
  });
});
