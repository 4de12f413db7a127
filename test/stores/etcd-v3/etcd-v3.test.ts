// What is etcd v3's own in the v3 backend, against a real etcd: the key
// layout of etcd's recipe, Proclaim, namespaces, leases, compacted history,
// and one election shared with `etcdctl elect`. What every backend must do
// (one leader, hand-overs, outside deletes, expiry, stop() at any moment) is
// checked by the conformance suite (test/contract/conformance-etcd-v3.test.ts).
import assert from "node:assert/strict";
import { spawn, type ChildProcess } from "node:child_process";
import { after, afterEach, before, describe, it } from "node:test";
import { Etcd3, type Namespace } from "etcd3";
import type { Claim } from "../../../src/contract/backend";
import { EtcdV3Backend, LINE_END_MEMBERS, type V3Membership } from "../../../src/stores/etcd-v3/recipe";
import { etcd3Port } from "../../../src/stores/etcd-v3/etcd3/port";
import etcdLeader from "../../../src/index";
import { startEtcd, type EtcdCluster } from "../../kit/etcd-server";
import { etcdMetrics } from "../../kit/store-clients";
import { sleep, waitFor as pollUntil } from "../../kit/waiting";
import { REPO_ROOT } from "../../kit/paths";

type Election = ReturnType<typeof etcdLeader>;
type Recorded = { at: number; type: "elected" | "unelected" | "leader" | "error"; value?: unknown };

interface Member {
  name: string;
  election: Election;
  events: Recorded[];
}

let cluster: EtcdCluster;
let client: Etcd3;
const clients = new Set<Etcd3>();
const elections = new Set<Election>();
const processes = new Set<ChildProcess>();
let keys = 0;

before(async () => {
  cluster = await startEtcd({ enableV2: false });
  client = newClient();
});

afterEach(async () => {
  await Promise.all([...elections].map((e) => e.leave()));
  elections.clear();
  await Promise.all([...processes].map((p) => stopProcess(p, "SIGKILL")));
});

after(async () => {
  for (const c of clients) c.close();
  await cluster?.close();
});

function newClient(): Etcd3 {
  const c = new Etcd3({ hosts: cluster.hostPorts });
  clients.add(c);
  return c;
}

function uniqueKey(label: string): string {
  return `/etcd-leader-v3/${label}-${++keys}`;
}

function startMember(name: string, key: string, options: { ttl?: number; via?: Namespace } = {}): Member {
  const election = etcdLeader(options.via ?? client, key, name, options.ttl ?? 2);
  const member: Member = { name, election, events: [] };
  const record = (type: Recorded["type"]) => (value?: unknown) =>
    member.events.push({ at: performance.now(), type, value });
  election.on("elected", record("elected"));
  election.on("unelected", record("unelected"));
  election.on("leader", record("leader"));
  election.on("error", record("error"));
  elections.add(election);
  election.start();
  return member;
}

function eventsOf(member: Member, type: Recorded["type"]): Recorded[] {
  return member.events.filter((e) => e.type === type);
}

function leaderNames(member: Member): unknown[] {
  return eventsOf(member, "leader").map((e) => e.value);
}

function lastEvent(member: Member, type: Recorded["type"]): Recorded {
  const found = eventsOf(member, type).at(-1);
  assert.ok(found, `${member.name} has no ${type} event`);
  return found;
}

/** The kit's waitFor, with this file's argument order and default bound. */
async function waitFor(condition: () => boolean | Promise<boolean>, what: string, timeoutMs = 5_000): Promise<void> {
  await pollUntil(what, timeoutMs, condition);
}


/** The members' keys under `<key>/`, oldest first. */
async function line(key: string): Promise<Array<{ key: string; name: string; createRevision: number; lease: string }>> {
  const response = await client.getAll().prefix(`${key}/`).sort("Create", "Ascend").exec();
  return response.kvs.map((kv) => ({
    key: kv.key.toString(),
    name: kv.value.toString(),
    createRevision: Number(kv.create_revision),
    lease: kv.lease,
  }));
}

async function joinInOrder(key: string, names: string[]): Promise<Member[]> {
  const members: Member[] = [];
  for (const name of names) {
    members.push(startMember(name, key));
    await waitFor(async () => (await line(key)).length === members.length, `${name} to join`);
  }
  return members;
}

/** An etcdctl process; `output()` is what it printed to stdout, `errors()` to stderr. */
function etcdctl(args: string[]): ChildProcess & { output: () => string; errors: () => string } {
  const child = spawn("etcdctl", [`--endpoints=${cluster.clientUrls[0]}`, ...args], {
    env: { ...process.env, ETCDCTL_API: "3" },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let output = "";
  let errors = "";
  child.stdout!.on("data", (chunk) => (output += String(chunk)));
  child.stderr!.on("data", (chunk) => (errors += String(chunk)));
  processes.add(child);
  child.once("exit", () => processes.delete(child));
  return Object.assign(child, { output: () => output, errors: () => errors });
}

async function stopProcess(child: ChildProcess, signal: NodeJS.Signals): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  child.kill(signal);
  await exited;
}

async function etcdctlRun(args: string[]): Promise<string> {
  const child = etcdctl(args);
  const code = await new Promise<number | null>((resolve) => child.once("exit", resolve));
  assert.equal(code, 0, `etcdctl ${args.join(" ")} failed: ${child.errors()}`);
  return child.output();
}

/** Watchers and LeaseKeepAlive streams open on the etcd server, from its metrics. */
async function serverStreams(): Promise<{ watchers: number; keepAlives: number }> {
  const sum = await etcdMetrics(cluster.clientUrls[0]!);
  return {
    watchers: sum(/^etcd_debugging_mvcc_watcher_total /),
    keepAlives:
      sum(/^grpc_server_started_total\{grpc_method="LeaseKeepAlive"/) -
      sum(/^grpc_server_handled_total\{[^}]*grpc_method="LeaseKeepAlive"/),
  };
}

function noLeader(): void {}

/** A test that hangs fails on its own instead of holding up the file. */
const limit = { timeout: 15_000 };

describe("etcd v3 backend", () => {
  // One leader among members, tokens, hand-overs and outside deletes are the
  // conformance suite's (test/contract/conformance-etcd-v3.test.ts); here, what is etcd's own.
  it("keys members like etcd's recipe, <key>/<lease id in hex>, with the leader's create revision as its token", limit, async () => {
    const key = uniqueKey("three");
    const [a] = await joinInOrder(key, ["a", "b", "c"]);
    await waitFor(() => a!.election.isLeader(), "a to lead");

    const members = await line(key);
    assert.deepEqual(members.map((m) => m.name), ["a", "b", "c"]);
    for (const m of members) assert.equal(m.key, `${key}/${BigInt(m.lease).toString(16)}`);
    assert.deepEqual(eventsOf(a!, "elected").map((e) => e.value), [members[0]!.createRevision]);
    assert.equal(a!.election.fencingToken(), members[0]!.createRevision);
  });

  it("a new value put on the leader's key (etcd's Proclaim) reaches every follower", limit, async () => {
    const key = uniqueKey("proclaim");
    const [a, b, c] = await joinInOrder(key, ["a", "b", "c"]);
    await waitFor(() => [b!, c!].every((m) => leaderNames(m).length === 1), "followers to know a");
    const [aKey] = await line(key);

    await client.put(aKey!.key).value("a-renamed").ignoreLease().exec();

    await waitFor(() => [b!, c!].every((m) => leaderNames(m).length === 2), "followers to learn the new name");
    for (const follower of [b!, c!]) assert.deepEqual(leaderNames(follower), ["a", "a-renamed"]);
    assert.ok(a!.election.isLeader());
  });

  it("after a change of leader, a Proclaim reaches the member that became next in line, and those behind it", limit, async () => {
    // c waited behind b with a watch that took deletions only; once b leads
    // it must see b's puts too.
    const key = uniqueKey("proclaim-after-change");
    const [a, b, c, d] = await joinInOrder(key, ["a", "b", "c", "d"]);
    await waitFor(() => [b!, c!, d!].every((m) => leaderNames(m).length === 1), "followers to know a");
    await a!.election.leave();
    await waitFor(() => b!.election.isLeader() && [c!, d!].every((m) => leaderNames(m).at(-1) === "b"), "b to lead, named by c and d");
    const [bKey] = await line(key);
    assert.equal(bKey!.name, "b");

    await client.put(bKey!.key).value("b-renamed").ignoreLease().exec();

    await waitFor(() => [c!, d!].every((m) => leaderNames(m).at(-1) === "b-renamed"), "c and d to learn the new name");
    for (const follower of [c!, d!]) assert.deepEqual(leaderNames(follower), ["a", "b", "b-renamed"]);
  });

  it("a member seen going while others led is passed over when its turn to lead comes, never named", limit, async () => {
    // d watches the leader and the members behind it in one range of keys,
    // so it sees b go while a still leads.
    const key = uniqueKey("passed-over");
    const [a, b, c, d] = await joinInOrder(key, ["a", "b", "c", "d"]);
    await waitFor(() => [b!, c!, d!].every((m) => leaderNames(m).length === 1), "followers to know a");
    const [, bKey] = await line(key);
    assert.equal(bKey!.name, "b");
    await client.delete().key(bKey!.key).exec();
    // b takes a new membership, at the back of the line.
    await waitFor(async () => (await line(key)).at(-1)?.name === "b", "b to join again");
    await a!.election.leave();
    await waitFor(() => c!.election.isLeader() && leaderNames(d!).at(-1) === "c", "c to lead, named by d");
    assert.deepEqual(leaderNames(d!), ["a", "c"]);
    assert.deepEqual(eventsOf(d!, "error"), []);
  });

  it("a member renamed in place before it leads is named by its new name when it comes to lead", limit, async () => {
    const key = uniqueKey("renamed-before-leading");
    const [a, , c, d] = await joinInOrder(key, ["a", "b", "c", "d"]);
    await waitFor(() => [c!, d!].every((m) => leaderNames(m).length === 1), "followers to know a");
    const [, bKey] = await line(key);
    await client.put(bKey!.key).value("b-renamed").ignoreLease().exec();
    await sleep(200);
    await a!.election.leave();
    await waitFor(() => [c!, d!].every((m) => leaderNames(m).at(-1) === "b-renamed"), "c and d to name b by its new name");
    for (const follower of [c!, d!]) assert.deepEqual(leaderNames(follower), ["a", "b-renamed"]);
  });

  describe("a line longer than its two listed ends", () => {
    // Long enough that the line, listed again after the front ran out, still has a gap.
    const LONG = 3 * LINE_END_MEMBERS + 6;
    const names = Array.from({ length: LONG }, (_, i) => `m${i}`);

    /** A client whose reads of many keys are counted, and the keys they returned. */
    function countingClient(): { client: Etcd3; reads: () => { calls: number; keys: number } } {
      const counted = newClient();
      let calls = 0;
      let returned = 0;
      const getAll = counted.getAll.bind(counted);
      counted.getAll = () => {
        const builder = getAll();
        const exec = builder.exec.bind(builder);
        builder.exec = async () => {
          const response = await exec();
          calls++;
          returned += response.kvs.length;
          return response;
        };
        return builder;
      };
      return { client: counted, reads: () => ({ calls, keys: returned }) };
    }

    it("a member far back reads only the oldest members and the newest before it", { timeout: 60_000 }, async () => {
      const key = uniqueKey("long-line-ends");
      await joinInOrder(key, names);
      const { client: counted, reads } = countingClient();
      const last = startMember("last", key, { via: counted });
      await waitFor(() => leaderNames(last).includes("m0"), "the last member to name m0");
      const { calls, keys } = reads();
      assert.equal(calls, 2, "one read from each end");
      assert.ok(keys <= 2 * (LINE_END_MEMBERS + 1), `${keys} keys read of a line of ${LONG + 1}`);
    });

    it("once every member listed at an end has gone, a follower lists again: it names each leader in turn, and leads last", { timeout: 60_000 }, async () => {
      const key = uniqueKey("long-line-relist");
      const members = await joinInOrder(key, names);
      const { client: counted, reads } = countingClient();
      const last = startMember("last", key, { via: counted });
      await waitFor(() => leaderNames(last).includes("m0"), "the last member to name m0");
      // The front: more changes of leader than it listed.
      for (let i = 0; i <= LINE_END_MEMBERS + 1; i++) {
        await members[i]!.election.leave();
        await waitFor(() => leaderNames(last).at(-1) === `m${i + 1}`, `the last member to name m${i + 1}`);
      }
      const afterFront = reads().calls;
      assert.ok(afterFront > 2, "it listed the line again");
      // The back: more members just before it leave than it listed.
      for (let i = LONG - 1; i >= LONG - 1 - (LINE_END_MEMBERS + 1); i--) await members[i]!.election.leave();
      const rest = members.slice(LINE_END_MEMBERS + 2, LONG - 1 - (LINE_END_MEMBERS + 1));
      assert.ok(rest.length > 0);
      await sleep(300);
      assert.equal(leaderNames(last).at(-1), rest[0]!.name);
      assert.equal(last.election.isLeader(), false);
      for (const member of rest) await member.election.leave();
      await waitFor(() => last.election.isLeader(), "the last member to lead");
      assert.ok(reads().calls > afterFront, "it listed the line again from its own end");
      assert.deepEqual(eventsOf(last, "error"), []);
      assert.equal(eventsOf(last, "elected").length, 1);
    });

    it("a follower reads the oldest end again before it runs out: one read of that end, and each leader named in turn", { timeout: 60_000 }, async (t) => {
      // The least random draw: the follower reads again with one member left at that end.
      t.mock.method(Math, "random", () => 0);
      const key = uniqueKey("long-line-refill");
      const members = await joinInOrder(key, names);
      const { client: counted, reads } = countingClient();
      const last = startMember("last", key, { via: counted });
      await waitFor(() => leaderNames(last).includes("m0"), "the last member to name m0");
      assert.equal(reads().calls, 2, "the first wait's reads of both ends");
      for (let i = 0; i <= LINE_END_MEMBERS + 1; i++) {
        await members[i]!.election.leave();
        await waitFor(() => leaderNames(last).at(-1) === `m${i + 1}`, `the last member to name m${i + 1}`);
      }
      const { calls, keys } = reads();
      assert.equal(calls, 3, "one more read, of the oldest end");
      assert.ok(keys <= 3 * (LINE_END_MEMBERS + 1), `${keys} keys read`);
      assert.deepEqual(leaderNames(last), names.slice(0, LINE_END_MEMBERS + 3));
    });

    it("a member that left the newest end before the oldest end was read again is passed over, and the follower leads last", { timeout: 60_000 }, async (t) => {
      t.mock.method(Math, "random", () => 0);
      const key = uniqueKey("long-line-refill-newest");
      const members = await joinInOrder(key, names);
      const last = startMember("last", key);
      await waitFor(() => leaderNames(last).includes("m0"), "the last member to name m0");
      // Not the member just before "last": nobody tells it of this one until
      // its turn to be watched.
      await members[LONG - 2]!.election.leave();
      for (let i = 0; i < LINE_END_MEMBERS; i++) await members[i]!.election.leave();
      await waitFor(() => leaderNames(last).at(-1) === `m${LINE_END_MEMBERS}`, "the last member to name the leader after the oldest end was read again");
      await members[LONG - 1]!.election.leave();
      for (const member of members.slice(LINE_END_MEMBERS, LONG - 2)) await member.election.leave();
      await waitFor(() => last.election.isLeader(), "the last member to lead", 10_000);
      assert.deepEqual(eventsOf(last, "error"), []);
    });
  });

  it("works through an etcd3 namespace, whose prefix comes before the election key", limit, async () => {
    const key = uniqueKey("namespace");
    const namespaced = client.namespace("app/");
    const a = startMember("a", key, { via: namespaced });
    await waitFor(() => a.election.isLeader(), "a to lead");
    const b = startMember("b", key, { via: namespaced });
    await waitFor(() => leaderNames(b).includes("a"), "b to follow a");

    assert.deepEqual((await line(`app/${key}`)).map((m) => m.name), ["a", "b"]);
    await a.election.leave();
    await waitFor(() => b.election.isLeader(), "b to lead");
    assert.deepEqual(eventsOf(b, "error"), []);
  });

  it("leave() revokes the lease, which deletes the key", limit, async () => {
    const key = uniqueKey("leave");
    const a = startMember("a", key);
    await waitFor(() => a.election.isLeader(), "a to lead");
    const [aKey] = await line(key);
    const granted = await client.leaseClient.leaseTimeToLive({ ID: aKey!.lease });
    assert.equal(granted.grantedTTL, "2");

    await a.election.leave();

    assert.deepEqual(await line(key), []);
    const leases = await client.leaseClient.leaseLeases();
    assert.ok(!leases.leases.some((l) => l.ID === aKey!.lease), "the lease is revoked");
    assert.equal(eventsOf(a, "unelected").length, 1);
  });

  it("leaves nothing running: a process exits by itself after leave() and client.close()", limit, async () => {
    const key = uniqueKey("exit");
    const script = `
      const etcdLeader = require("./src/index.ts");
      const { Etcd3 } = require("etcd3");
      const client = new Etcd3({ hosts: ${JSON.stringify(cluster.hostPorts)} });
      const a = etcdLeader(client, ${JSON.stringify(key)}, "a", 2).start();
      const b = etcdLeader(client, ${JSON.stringify(key)}, "b", 2).start();
      const observer = etcdLeader.observe(client, ${JSON.stringify(key)}).start();
      let elected = false;
      const finish = () => {
        if (elected) return;
        elected = true;
        setTimeout(async () => {
          observer.stop();
          await Promise.all([a.leave(), b.leave()]);
          client.close();
          console.log("closed");
        }, 300);
      };
      a.on("elected", finish);
      b.on("elected", finish);
    `;
    const child = spawn(process.execPath, ["--import", "tsx", "-e", script], {
      cwd: REPO_ROOT,
      env: { ...process.env, DEBUG: "etcd-leader:*" },
      stdio: ["ignore", "pipe", "pipe"],
    });
    processes.add(child);
    let output = "";
    child.stdout.on("data", (chunk) => (output += String(chunk)));
    child.stderr.on("data", (chunk) => (output += String(chunk)));
    let timer: NodeJS.Timeout | undefined;
    const code = await Promise.race([
      new Promise<number | null>((resolve) => child.once("exit", resolve)),
      new Promise<string>((resolve) => (timer = setTimeout(resolve, 10_000, "still running"))),
    ]);
    clearTimeout(timer);
    assert.equal(code, 0, `child: ${code}\n${output}`);
    assert.match(output, /closed/);
    assert.deepEqual(await line(key), []);
  });

  describe("with etcdctl elect", () => {
    it("etcdctl waits behind a Node leader, takes over when it leaves, and never leads at the same time", limit, async (t) => {
      const key = uniqueKey("interop");
      const a = startMember("a", key);
      await waitFor(() => a.election.isLeader(), "a to lead");
      const ctl = etcdctl(["elect", key, "ctl"]);
      await waitFor(async () => (await line(key)).length === 2, "etcdctl to campaign");
      const b = startMember("b", key);
      await waitFor(async () => (await line(key)).length === 3, "b to join");
      await sleep(500);
      assert.equal(ctl.output(), "", "etcdctl does not lead while a does");
      assert.deepEqual(leaderNames(b), ["a"]);

      await a.election.leave();
      const aStoppedLeading = lastEvent(a, "unelected").at;
      await waitFor(() => ctl.output().includes("ctl"), "etcdctl to be elected");
      const ctlElected = performance.now();
      const [ctlKey] = await line(key);
      assert.equal(ctl.output(), `${ctlKey!.key}\nctl\n`);
      assert.ok(aStoppedLeading < ctlElected);
      t.diagnostic(`etcdctl printed its election ${(ctlElected - aStoppedLeading).toFixed(0)} ms after a stepped down`);
      await waitFor(() => leaderNames(b).includes("ctl"), "b to follow etcdctl");
      await sleep(300);
      assert.equal(b.election.isLeader(), false);
      assert.deepEqual(eventsOf(b, "elected"), []);

      const resignAsked = performance.now();
      await stopProcess(ctl, "SIGINT");
      await waitFor(() => b.election.isLeader(), "b to lead after etcdctl resigned");
      assert.ok(lastEvent(b, "elected").at > resignAsked, "b was elected only after etcdctl resigned");
      t.diagnostic(`b was elected ${(lastEvent(b, "elected").at - resignAsked).toFixed(0)} ms after etcdctl got SIGINT`);
      assert.deepEqual(leaderNames(b), ["a", "ctl"]);
      assert.deepEqual(eventsOf(b, "error"), []);
    });

    it("etcdctl elect -l prints the name of each Node leader", limit, async () => {
      const key = uniqueKey("interop-observe");
      const [a] = await joinInOrder(key, ["a", "b"]);
      await waitFor(() => a!.election.isLeader(), "a to lead");
      const [aKey, bKey] = await line(key);
      const observer = etcdctl(["elect", "-l", key]);
      await waitFor(() => observer.output().includes("\na\n"), "etcdctl to print a", 3_000);

      await a!.election.leave();
      await waitFor(() => observer.output().includes("\nb\n"), "etcdctl to print b", 3_000);
      assert.equal(observer.output(), `${aKey!.key}\na\n${bKey!.key}\nb\n`);
    });
    it("etcdctl elect -l names an inner election's member as the outer leader; Node members and observers of the outer election do not", limit, async () => {
      const key = uniqueKey("nested-observe");
      const inner = startMember("inner", `${key}/cleanup`);
      await waitFor(() => inner.election.isLeader(), "inner to lead");
      const [innerKey] = await line(`${key}/cleanup`);
      const ctlObserver = etcdctl(["elect", "-l", key]);
      await waitFor(() => ctlObserver.output().includes("\ninner\n"), "etcdctl to print the inner member", 3_000);
      const observer = etcdLeader.observe(client, key);
      const seen: Array<string | undefined> = [];
      observer.on("leader", (name) => seen.push(name));
      observer.start();
      try {
        await waitFor(() => seen.length === 1, "the observer's first answer");
        const outer = startMember("outer", key);
        await waitFor(() => outer.election.isLeader(), "outer to lead");
        await waitFor(() => seen.length === 2, "the observer to see outer");
        const [outerKey] = (await line(key)).filter((m) => m.name === "outer");

        await inner.election.leave();
        await waitFor(() => ctlObserver.output().includes("\nouter\n"), "etcdctl to print outer", 3_000);
        assert.equal(ctlObserver.output(), `${innerKey!.key}\ninner\n${outerKey!.key}\nouter\n`);
        assert.deepEqual(seen, [undefined, "outer"]);
        assert.deepEqual(leaderNames(outer), []);
      } finally {
        observer.stop();
      }
    });

    it("an etcdctl member of the outer election waits behind an inner member, and Node members follow it meanwhile", limit, async () => {
      const key = uniqueKey("nested-campaign");
      const inner = startMember("inner", `${key}/cleanup`);
      await waitFor(() => inner.election.isLeader(), "inner to lead");
      const ctl = etcdctl(["elect", key, "ctl"]);
      await waitFor(async () => (await line(key)).length === 2, "etcdctl to campaign");
      const outer = startMember("outer", key);
      await waitFor(() => leaderNames(outer).includes("ctl"), "outer to follow etcdctl");
      await sleep(500);
      assert.equal(ctl.output(), "", "etcdctl counts the inner member as older than itself");
      assert.equal(outer.election.isLeader(), false);

      await inner.election.leave();
      await waitFor(() => ctl.output().includes("ctl"), "etcdctl to be elected");
      await stopProcess(ctl, "SIGINT");
      await waitFor(() => outer.election.isLeader(), "outer to lead after etcdctl resigned");
      assert.deepEqual(leaderNames(outer), ["ctl"]);
      assert.deepEqual(eventsOf(outer, "error"), []);
    });
  });

  describe("the backend on its own", () => {
    const backends: Array<{ backend: EtcdV3Backend; membership: V3Membership }> = [];
    const timeout = () => AbortSignal.timeout(5_000);

    async function joined(key: string, name: string): Promise<{ backend: EtcdV3Backend; membership: V3Membership; claim: Claim<V3Membership> }> {
      const backend = new EtcdV3Backend(etcd3Port(client), key, name, 2);
      const claim = await backend.join(timeout());
      const entry = { backend, membership: claim.membership, claim };
      backends.push(entry);
      return entry;
    }

    afterEach(async () => {
      await Promise.all(backends.splice(0).map(({ backend, membership }) => backend.leave(membership, timeout())));
    });

    /** Renews these memberships every 500 ms (TTL 2 s, and nothing else renews them) until the returned function is called. */
    function keepRenewing(members: Array<{ backend: EtcdV3Backend; membership: V3Membership }>): () => void {
      const renewing = setInterval(() => {
        for (const m of members) m.backend.renew(m.membership, timeout()).catch(() => undefined);
      }, 500);
      return () => clearInterval(renewing);
    }

    /** Moves etcd's history on and compacts it there: a watch from any revision before now is refused. */
    async function compactPast(key: string): Promise<void> {
      await client.put(`${key}-other`).value("x").exec();
      const { header } = await client.put(`${key}-other`).value("y").exec();
      await etcdctlRun(["compact", header.revision]);
      await client.delete().key(`${key}-other`).exec();
    }

    /** Starts a member's wait for its turn, once it named its first leader: the names it gives, in order, and the wait. */
    async function waitingForTurn(member: { backend: EtcdV3Backend; claim: Claim<V3Membership> }): Promise<{ named: Array<string | undefined>; turn: Promise<unknown> }> {
      const named: Array<string | undefined> = [];
      const turn = member.backend.awaitTurn(member.claim, (leader) => void named.push(leader?.name), AbortSignal.timeout(15_000));
      turn.catch(() => undefined);
      await waitFor(() => named.length > 0, "a leader named", 5_000);
      return { named, turn };
    }

    it("a follower goes on naming each leader in turn after etcd compacted the history since its listing", limit, async () => {
      const key = uniqueKey("turn-compacted");
      const [a, b, c, d] = [await joined(key, "a"), await joined(key, "b"), await joined(key, "c"), await joined(key, "d")];
      const stopRenewing = keepRenewing([a, b, c, d]);
      try {
        const { named, turn } = await waitingForTurn(d);
        assert.deepEqual(named, ["a"]);
        // Compact away the history since d's listing: b's watch from where d
        // saw it cannot start there.
        await compactPast(key);
        await a.backend.leave(a.membership, timeout());
        await waitFor(() => named.at(-1) === "b", "d to name b", 5_000);
        await b.backend.leave(b.membership, timeout());
        await waitFor(() => named.at(-1) === "c", "d to name c", 5_000);
        await c.backend.leave(c.membership, timeout());
        await turn;
        assert.deepEqual(named, ["a", "b", "c"]);
      } finally {
        stopRenewing();
      }
    });

    it("a leader whose lease another etcd member granted is watched on its own; with that history compacted, the line is listed again", limit, async () => {
      // etcd puts the granting member's ID in a lease ID's top 16 bits: x's
      // key, from a lease with an ID of another shape, sorts away from the
      // others, outside the range d watches the leader and its heirs in.
      const key = uniqueKey("other-etcd-member");
      const a = await joined(key, "a");
      const xLease = "0x10000000000001";
      await client.leaseClient.leaseGrant({ TTL: 30, ID: xLease });
      const xKey = `${key}/${BigInt(xLease).toString(16)}`;
      await client.put(xKey).value("x").lease(xLease).exec();
      const [c, d] = [await joined(key, "c"), await joined(key, "d")];
      const stopRenewing = keepRenewing([a, c, d]);
      try {
        const { named, turn } = await waitingForTurn(d);
        assert.deepEqual(named, ["a"]);
        await compactPast(key);
        const reads = async () => (await etcdMetrics(cluster.clientUrls[0]!))(/^grpc_server_handled_total\{.*grpc_method="Range"/);
        const readsBefore = await reads();
        await a.backend.leave(a.membership, timeout());
        await waitFor(() => named.at(-1) === "x", "d to name x", 5_000);
        await sleep(200);
        // The watch of x from d's listing is refused: d lists the line again
        // (one read), and names x once.
        const listings = (await reads()) - readsBefore;
        assert.ok(listings >= 1 && listings <= 2, `reads after a left: ${listings}`);
        await client.leaseClient.leaseRevoke({ ID: xLease });
        await waitFor(() => named.at(-1) === "c", "d to name c", 5_000);
        await c.backend.leave(c.membership, timeout());
        await turn;
        assert.deepEqual(named, ["a", "x", "c"]);
      } finally {
        stopRenewing();
        await client.leaseClient.leaseRevoke({ ID: xLease }).catch(() => undefined);
      }
    });

    it("awaitLoss reads the key itself when etcd has compacted the history it would watch from", limit, async () => {
      const { backend, membership, claim } = await joined(uniqueKey("loss-compacted"), "a");
      await backend.awaitTurn(claim, noLeader, timeout());
      await client.delete().key(membership.id).exec();
      await compactPast(membership.id);

      await backend.awaitLoss(membership, AbortSignal.timeout(2_000));
    });

    // That every wait ends at its signal and leaves no watch is the conformance
    // suite's; here, the keep-alive stream.
    it("a renewal etcd does not answer (the server is frozen) is abandoned at once when its signal aborts; the keep-alive stream closes once the membership is left", limit, async () => {
      const before = await serverStreams();
      const first = await joined(uniqueKey("abort"), "a");
      await first.backend.awaitTurn(first.claim, noLeader, timeout());
      const reason = new Error("given up");
      const renewal = new AbortController();
      cluster.members[0]!.pause();
      try {
        const renewing = first.backend.renew(first.membership, renewal.signal);
        await sleep(100);
        const renewalAbortedAt = performance.now();
        renewal.abort(reason);
        await assert.rejects(renewing, (err) => err === reason);
        assert.ok(performance.now() - renewalAbortedAt < 50, "the renewal ended at once");
      } finally {
        cluster.members[0]!.resume();
      }
      await first.backend.leave(first.membership, timeout());
      await waitFor(async () => (await serverStreams()).keepAlives === before.keepAlives, "the keep-alive stream to close", 2_000);
    });
  });
});
