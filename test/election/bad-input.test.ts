// Misconfiguration and bad input, against a real etcd: each mistake is named
// at once (at creation, or in the first `error` event) with what to do about
// it, instead of failing later in a way that hides the cause.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { join } from "node:path";
import { after, afterEach, before, describe, it } from "node:test";
import { Etcd3 } from "etcd3";
import etcdLeader = require("../../src/index");
import { startEtcd, type EtcdCluster } from "../kit/etcd-server";
import { EventRecorder } from "../kit/event-recorder";
import { exitOrFail, sleep, waitFor, withDeadline } from "../kit/waiting";
import { REPO_ROOT } from "../kit/paths";

// eslint-disable-next-line @typescript-eslint/no-require-imports
const Etcd = require("node-etcd");

/** etcd with the v2 API on (keys on both APIs). */
let etcd: EtcdCluster;
/** etcd 3.4 as it starts by default: no v2 API. */
let v3Only: EtcdCluster;
let v3Client: Etcd3;

before(async () => {
  [etcd, v3Only] = await Promise.all([startEtcd(), startEtcd({ enableV2: false })]);
  v3Client = new Etcd3({ hosts: etcd.hostPorts });
});

after(async () => {
  v3Client?.close();
  await Promise.all([etcd?.close(), v3Only?.close()]);
  exitOrFail();
});

const running: Array<{ leave?: () => Promise<void>; stop: () => unknown }> = [];
afterEach(async () => {
  const started = running.splice(0);
  await withDeadline(Promise.all(started.map((e) => (e.leave ? e.leave() : e.stop()))), 8_000, "stopping members");
});

let keys = 0;
function uniqueKey(label: string): string {
  return `/bad-input/${++keys}-${label}`;
}

function v2Client(cluster: EtcdCluster = etcd): unknown {
  return new Etcd(cluster.hostPorts);
}

/** A member started on `key`, recorded; `next` waits up to 10 s for an event by default. */
function member(client: unknown, key: string, name: string) {
  const election = etcdLeader(client, key, name, 2);
  const recorder = new EventRecorder(election, name);
  running.push(election);
  election.start();
  const next = <N extends "elected" | "leader" | "error">(event: N, ms = 10_000) => recorder.next(event, ms);
  return { election, recorder, next };
}

function throwsNaming(fn: () => unknown, kind: ErrorConstructor, ...parts: Array<string | RegExp>): void {
  assert.throws(fn, (err: Error) => {
    assert.ok(err instanceof kind, `expected a ${kind.name}, got ${err.name}: ${err.message}`);
    for (const part of parts) {
      if (typeof part === "string") assert.ok(err.message.includes(part), `"${err.message}" should name ${part}`);
      else assert.match(err.message, part);
    }
    return true;
  });
}

const V2_DISABLED = "the v2 API is disabled: start etcd with --enable-v2=true, or pass an etcd3 client for the v3 API";

describe("a v2 client against an etcd without the v2 API", () => {
  it("a member's error events give etcd's HTTP status and say that the v2 API is disabled", async () => {
    const m = member(v2Client(v3Only), uniqueKey("v2-off"), "m");
    const { value } = await m.next("error");
    const error = value as etcdLeader.ElectionError;
    assert.equal(error.phase, "join");
    assert.ok(error.message.includes("HTTP 404"), error.message);
    assert.ok(error.message.includes(V2_DISABLED), error.message);
  });

  it("an observer's error events say the same", async () => {
    const observer = etcdLeader.observe(v2Client(v3Only), uniqueKey("v2-off-observer"));
    running.push(observer);
    const errors: etcdLeader.ElectionError[] = [];
    observer.on("error", (err) => errors.push(err));
    observer.start();
    const error = await waitFor("an observer error", 10_000, () => errors[0]);
    assert.equal(error.phase, "observe");
    assert.ok(error.message.includes("HTTP 404"), error.message);
    assert.ok(error.message.includes(V2_DISABLED), error.message);
  });
});

describe("v2 keys are cleaned as etcd cleans them", () => {
  it("a key with a doubled slash names the directory etcd makes of it: its members are elected", async () => {
    const base = uniqueKey("double");
    const first = member(v2Client(), `${base}//election`, "first");
    await first.next("elected");
    const second = member(v2Client(), `${base}/election`, "second");
    assert.equal((await second.next("leader")).value, "first");
    assert.deepEqual(first.recorder.errors, []);
  });

  it("refuses the root of the keyspace, and keys that clean to it, for members and observers", () => {
    for (const key of ["/", "//", "/./", "a/..", "/a/b/../.."]) {
      throwsNaming(() => etcdLeader(v2Client(), key, "n"), RangeError, JSON.stringify(key), "root");
      throwsNaming(() => etcdLeader.observe(v2Client(), key), RangeError, JSON.stringify(key), "root");
    }
  });

  it("keeps 0.0.1's spellings: 'k', '/k' and 'k/' are one election", async () => {
    const base = uniqueKey("spellings").slice(1);
    const first = member(v2Client(), base, "first");
    await first.next("elected");
    const second = member(v2Client(), `/${base}`, "second");
    const third = member(v2Client(), `${base}/`, "third");
    assert.equal((await second.next("leader")).value, "first");
    assert.equal((await third.next("leader")).value, "first");
  });
});

describe("v3 keys are used verbatim", () => {
  it("a key with a doubled slash is kept as it is, as etcdctl elect keeps it", async () => {
    const key = `${uniqueKey("v3-verbatim")}//election`;
    const m = member(v3Client, key, "m");
    await m.next("elected");
    const keysUnder = await v3Client.getAll().prefix(`${key}/`).keys();
    assert.equal(keysUnder.length, 1, `one member key under ${key}/`);
  });

  it("refuses an empty key", () => {
    throwsNaming(() => etcdLeader(v3Client, "", "n"), Error, "node key not specified");
    throwsNaming(() => etcdLeader.observe(v3Client, ""), Error, "node key not specified");
  });
});

describe("durations a timer cannot hold", () => {
  const limit = "2147483647 ms";

  it("refuses a TTL whose milliseconds do not fit a Node timer, and accepts the largest that does", () => {
    for (const ttl of [2_147_484, 2_678_400, 1e9]) {
      throwsNaming(() => etcdLeader(v2Client(), "/k", "n", ttl), RangeError, "ttl", String(ttl), limit);
      throwsNaming(() => etcdLeader(v3Client, "/k", "n", { ttl }), RangeError, "ttl", String(ttl), limit);
      throwsNaming(() => etcdLeader.observe(v3Client, "/k", { ttl }), RangeError, "ttl", limit);
    }
    assert.ok(etcdLeader(v2Client(), "/k", "n", 2_147_483) instanceof etcdLeader.Election);
  });

  it("refuses any other duration that does not fit a Node timer, naming the option", () => {
    const tooLong = 2 ** 31;
    for (const name of ["refreshInterval", "stepDownMargin", "requestTimeout", "retryInitialDelay", "retryMaxDelay"] as const) {
      throwsNaming(() => etcdLeader(v3Client, "/k", "n", 2_000_000, { [name]: tooLong }), RangeError, name, String(tooLong), limit);
    }
  });
});

describe("options and names that would be ignored or coerced", () => {
  it("refuses an unknown option, naming it", () => {
    throwsNaming(() => etcdLeader(v3Client, "/k", "n", 5, { refreshIntervall: 100 } as etcdLeader.ElectionOptions), TypeError, '"refreshIntervall"', "refreshInterval");
    throwsNaming(() => etcdLeader(v3Client, "/k", "n", { ttl: 5, stepdownMargin: 1 } as etcdLeader.ElectionOptions), TypeError, '"stepdownMargin"');
    throwsNaming(() => etcdLeader.observe(v3Client, "/k", { tll: 5 } as etcdLeader.ElectionOptions), TypeError, '"tll"');
  });

  it("says which of the values in a message are defaults, so that it never blames an option the user did not set", () => {
    assert.throws(() => etcdLeader(v3Client, "/k", "n", { retryMaxDelay: 50 }), {
      message: "retryMaxDelay (50 ms) must not be shorter than retryInitialDelay (100 ms, the default)",
    });
    assert.throws(() => etcdLeader(v3Client, "/k", "n", { ttl: 2, stepDownMargin: 1_000 }), {
      message: /^refreshInterval \(1000 ms, the default\) must be shorter than the ttl less the stepDownMargin \(2000 - 1000 ms\)/,
    });
  });

  it("refuses options given twice", () => {
    const twice = etcdLeader as unknown as (...args: unknown[]) => unknown;
    throwsNaming(() => twice(v3Client, "/k", "n", { ttl: 5 }, { refreshInterval: 100 }), TypeError, "twice");
    throwsNaming(() => etcdLeader(v3Client, "/k", "n", 5, { ttl: 10 }), TypeError, "ttl", "5", "10");
    // The same TTL in both places says one thing: accepted.
    assert.ok(etcdLeader(v3Client, "/k", "n", 5, { ttl: 5 }) instanceof etcdLeader.Election);
  });

  it("refuses names and keys that are neither strings nor numbers; numbers stay accepted", () => {
    for (const name of [{}, true, ["a"], () => "f"]) {
      throwsNaming(() => etcdLeader(v3Client, "/k", name as unknown as string), TypeError, "name", typeof name);
    }
    for (const key of [{}, true]) {
      throwsNaming(() => etcdLeader(v3Client, key as unknown as string, "n"), TypeError, "key", typeof key);
      throwsNaming(() => etcdLeader.observe(v3Client, key as unknown as string), TypeError, "key", typeof key);
    }
    assert.ok(etcdLeader(v3Client, "/k", 42 as unknown as string) instanceof etcdLeader.Election);
  });

  it("keeps 0.0.1's messages for missing arguments", () => {
    throwsNaming(() => etcdLeader(undefined, "/k", "n"), Error, "etcd is required");
    throwsNaming(() => etcdLeader(v3Client, "", "n"), Error, "node key not specified");
    throwsNaming(() => etcdLeader(v3Client, "/k", " "), Error, "node name not specified");
  });
});

describe("v3 watches cancelled by etcd", () => {
  it("a follower whose watch etcd cancels after a compaction reads the keys it followed and waits on, with no error", async () => {
    const key = uniqueKey("compaction");
    const leader = member(v3Client, key, "leader");
    await leader.next("elected");
    const middle = member(v3Client, key, "middle");
    await middle.next("leader");
    const follower = member(v3Client, key, "follower");
    await follower.next("leader");
    // Move the store on and compact away every revision the follower has read at.
    for (let i = 0; i < 3; i++) await v3Client.put(`${key}-filler`).value(String(i));
    const { header } = await v3Client.get(`${key}-filler`).exec();
    await v3Client.kv.compact({ revision: header.revision, physical: true });
    // The follower now follows the leader from what it read on joining: etcd
    // cancels that watch, and the follower reads its own key and the leader's
    // instead of failing its wait (which cost an error and a new listing).
    running.splice(running.indexOf(middle.election), 1);
    await middle.election.leave();
    await sleep(500);
    // When the leader goes, it leads.
    await leader.election.leave();
    await follower.next("elected");
    assert.deepEqual(follower.recorder.errors.map(String), []);
    // Also proven by this test passing at all: closing a watch etcd cancelled
    // once made etcd3 throw "Failed to find watcher for IWatchResponse" as an
    // unhandled rejection, which fails this file (and ends a user's process).
  });
});

describe("a listener that throws", () => {
  // The claim README.md makes about emitSafely, checked in a process of its own
  // (an uncaught exception ends it): the exception surfaces on the next tick as
  // an uncaught exception, later listeners of that event are skipped, and the
  // election itself goes on.
  const script = `
    const etcdLeader = require(${JSON.stringify(join(REPO_ROOT, "src", "index.ts"))});
    const Etcd = require("node-etcd");
    const election = etcdLeader(new Etcd("127.0.0.1:9"), "/k", "n", 5, { retryInitialDelay: 10, retryMaxDelay: 20 });
    let attempts = 0;
    election.on("error", (err) => { console.log("first listener, attempt " + err.attempt); throw new Error("listener threw"); });
    election.on("error", () => console.log("second listener"));
    if (process.env.CATCH) process.on("uncaughtException", (err) => {
      console.log("uncaught: " + err.message);
      if (++attempts === 2) { election.stop(); }
    });
    election.start();
  `;
  const run = (env: Record<string, string>) =>
    new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) => {
      const child = spawn(process.execPath, ["--import", "tsx", "-e", script], {
        cwd: REPO_ROOT,
        env: { ...process.env, ...env },
      });
      let stdout = "";
      let stderr = "";
      child.stdout.on("data", (chunk) => (stdout += chunk));
      child.stderr.on("data", (chunk) => (stderr += chunk));
      child.on("exit", (code) => resolve({ code, stdout, stderr }));
    });

  it("is rethrown as an uncaught exception, skips later listeners, and does not stop the election", async () => {
    const crashed = await withDeadline(run({}), 20_000, "the child process");
    assert.notEqual(crashed.code, 0);
    assert.match(crashed.stderr, /listener threw/);
    assert.doesNotMatch(crashed.stdout, /second listener/);

    const caught = await withDeadline(run({ CATCH: "1" }), 20_000, "the child process");
    assert.equal(caught.code, 0, caught.stderr);
    assert.equal(
      caught.stdout,
      "first listener, attempt 1\nuncaught: listener threw\nfirst listener, attempt 2\nuncaught: listener threw\n",
    );
  });
});
