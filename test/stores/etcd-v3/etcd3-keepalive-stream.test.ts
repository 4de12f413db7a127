// v3 renewals on one LeaseKeepAlive stream per etcd3 client, against a real
// etcd: shared by every election on the client, re-opened when it breaks,
// answers matched to the request they answer, closed when no election is left.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { after, afterEach, before, describe, it } from "node:test";
import { Etcd3 } from "etcd3";
import { EtcdV3Backend, type V3Membership } from "../../../src/stores/etcd-v3/recipe";
import { etcd3Port } from "../../../src/stores/etcd-v3/etcd3/port";
import { RequestTimeoutError } from "../../../src/contract/errors";
import etcdLeader from "../../../src/index";
import { startEtcd, type EtcdCluster } from "../../kit/etcd-server";
import { FaultProxy } from "../../kit/fault-proxy";
import { etcdMetrics } from "../../kit/store-clients";
import { sleep, waitFor as pollUntil } from "../../kit/waiting";
import { REPO_ROOT } from "../../kit/paths";

type Election = ReturnType<typeof etcdLeader>;

let cluster: EtcdCluster;
const clients = new Set<Etcd3>();
const proxies = new Set<FaultProxy>();
const elections = new Set<Election>();
const memberships = new Set<{ backend: EtcdV3Backend; membership: V3Membership }>();
let keys = 0;

before(async () => {
  cluster = await startEtcd({ enableV2: false });
});

afterEach(async () => {
  // Leaving goes through the proxies: let them pass first.
  for (const p of proxies) p.setMode("pass");
  await Promise.all([...elections].map((e) => e.leave()));
  elections.clear();
  await Promise.all([...memberships].map(({ backend, membership }) => backend.leave(membership, AbortSignal.timeout(2_000))));
  memberships.clear();
  for (const c of clients) c.close();
  clients.clear();
  await Promise.all([...proxies].map((p) => p.close()));
  proxies.clear();
});

after(async () => {
  await cluster?.close();
});

function newClient(hosts: string[] = cluster.hostPorts): Etcd3 {
  const c = new Etcd3(etcdLeader.etcd3Options({ hosts }));
  clients.add(c);
  return c;
}

async function newProxy(): Promise<FaultProxy> {
  const proxy = await FaultProxy.start({ upstream: cluster.hostPorts });
  proxies.add(proxy);
  return proxy;
}

function uniqueKey(label: string): string {
  return `/etcd-leader-keepalive/${label}-${++keys}`;
}

function startElection(client: Etcd3, key: string, name: string, ttl: number): Election {
  const election = etcdLeader(client, key, name, ttl);
  elections.add(election);
  election.start();
  return election;
}

async function joined(client: Etcd3, key: string): Promise<{ backend: EtcdV3Backend; membership: V3Membership }> {
  const backend = new EtcdV3Backend(etcd3Port(client), key, "a", 5);
  const { membership } = await backend.join(AbortSignal.timeout(2_000));
  const entry = { backend, membership };
  memberships.add(entry);
  return entry;
}

/** The kit's waitFor, with this file's argument order and default bound. */
async function waitFor(condition: () => boolean | Promise<boolean>, what: string, timeoutMs = 10_000): Promise<void> {
  await pollUntil(what, timeoutMs, condition);
}


/** LeaseKeepAlive streams etcd started, ended and has open, and keep-alive messages it received, from its metrics. */
async function keepAliveMetrics(): Promise<{ started: number; open: number; received: number }> {
  const sum = await etcdMetrics(cluster.clientUrls[0]!);
  const started = sum(/^grpc_server_started_total\{[^}]*grpc_method="LeaseKeepAlive"/);
  const handled = sum(/^grpc_server_handled_total\{[^}]*grpc_method="LeaseKeepAlive"/);
  return { started, open: started - handled, received: sum(/^grpc_server_msg_received_total\{[^}]*grpc_method="LeaseKeepAlive"/) };
}

const limit = { timeout: 30_000 };

describe("v3 renewals on one keep-alive stream per client", () => {
  it("renewals of every election on one client share one LeaseKeepAlive stream, closed once they all left", limit, async () => {
    const client = newClient();
    const key = uniqueKey("shared");
    const before = await keepAliveMetrics();
    const members = ["a", "b", "c", "d", "e"].map((name) => startElection(client, key, name, 1));
    await waitFor(() => members.some((m) => m.isLeader()), "a leader");
    // A leader may be elected before the last member has joined (and has a
    // renewal time to compare).
    await waitFor(() => members.every((m) => m.lastRenewedAt !== undefined), "every member to join");
    const renewedBefore = members.map((m) => m.lastRenewedAt!);
    // TTL 1 s: a renewal every 500 ms, so each member renews at least twice in 1.5 s.
    await waitFor(
      () => members.every((m, i) => m.lastRenewedAt! > renewedBefore[i]! + 600),
      "every member to renew twice",
    );
    const during = await keepAliveMetrics();
    assert.ok(during.received - before.received >= 10, `at least 10 renewals sent, got ${during.received - before.received}`);
    assert.equal(during.started - before.started, 1, "one LeaseKeepAlive stream for every renewal of every member");
    assert.equal(during.open - before.open, 1, "and it is open");

    await Promise.all(members.map((m) => m.leave()));
    await waitFor(async () => (await keepAliveMetrics()).open === before.open, "the stream to close after the last member left");
  });

  it("the stream opens after the grant, while the member joins and lists, and before its first renewal", limit, async () => {
    const client = newClient();
    const before = await keepAliveMetrics();
    // TTL 40 s: the stream opens within 5 s of the grant; the first renewal
    // comes 10 s after it at the soonest.
    const member = startElection(client, uniqueKey("deferred"), "a", 40);
    await waitFor(() => member.isLeader(), "the member to lead");
    const renewedAt = member.lastRenewedAt;
    assert.equal((await keepAliveMetrics()).started - before.started, 0, "no stream opened at the grant");
    await waitFor(async () => (await keepAliveMetrics()).open - before.open === 1, "the stream to open", 7_000);
    assert.equal(member.lastRenewedAt, renewedAt, "opened before any renewal");
    assert.equal((await keepAliveMetrics()).received - before.received, 0, "and nothing sent on it yet");
  });

  it("a renewal due before the stream was to open opens it at once", limit, async () => {
    const client = newClient();
    const before = await keepAliveMetrics();
    // TTL 40 s, but a renewal every 300 ms: the first comes long before the 5 s
    // the opening waits for.
    const member = etcdLeader(client, uniqueKey("early-renewal"), "a", 40, { refreshInterval: 300 });
    elections.add(member);
    member.start();
    await waitFor(() => member.isLeader(), "the member to lead");
    const renewedAt = member.lastRenewedAt!;
    await waitFor(() => member.lastRenewedAt! > renewedAt + 500, "two renewals", 3_000);
    const during = await keepAliveMetrics();
    assert.equal(during.started - before.started, 1, "one stream, opened by the first renewal");
    assert.ok(during.received - before.received >= 2, `renewals sent on it, got ${during.received - before.received}`);
  });

  it("a stream torn down mid-way is re-opened and renewals resume, with no member losing its place", limit, async () => {
    const proxy = await newProxy();
    const client = newClient([proxy.hostPort]);
    const key = uniqueKey("reset");
    const members = ["a", "b", "c"].map((name) => startElection(client, key, name, 2));
    const errors: Error[] = [];
    const unelected: string[] = [];
    members.forEach((m, i) => {
      m.on("error", (err) => errors.push(err));
      m.on("unelected", () => unelected.push(`member ${i}`));
    });
    await waitFor(() => members.some((m) => m.isLeader()), "a leader");
    await waitFor(() => members.every((m) => m.lastRenewedAt !== undefined), "every member to join");
    const leader = members.find((m) => m.isLeader())!;
    const started = (await keepAliveMetrics()).started;
    const renewedBefore = members.map((m) => m.lastRenewedAt!);

    for (let reset = 0; reset < 3; reset++) {
      proxy.resetConnections();
      await sleep(400);
    }
    // TTL 2 s: a renewal every second; two more rounds after the resets.
    await waitFor(() => members.every((m, i) => m.lastRenewedAt! > renewedBefore[i]! + 2_000), "every member to renew again");

    assert.ok((await keepAliveMetrics()).started > started, "a new stream was opened");
    assert.ok(leader.isLeader(), "the leader still leads");
    assert.deepEqual(unelected, [], "nobody stepped down");
    assert.deepEqual(
      errors.filter((e) => e.name === "MembershipRemovedError").map((e) => e.message),
      [],
      "no membership was taken for lost",
    );
  });

  it("a renewal whose answer does not come fails at its timeout, and its late answer is not taken for a newer renewal's", limit, async () => {
    const proxy = await newProxy();
    const client = newClient([proxy.hostPort]);
    const { backend, membership } = await joined(client, uniqueKey("late"));
    await backend.renew(membership, AbortSignal.timeout(2_000)); // the stream is open

    const delayMs = 400;
    proxy.setMode({ delayMs });
    const firstSentAt = performance.now();
    await assert.rejects(backend.renew(membership, AbortSignal.timeout(200)), RequestTimeoutError);
    const timedOutAfter = performance.now() - firstSentAt;
    assert.ok(timedOutAfter < 2 * delayMs, `the renewal failed at its timeout (${Math.round(timedOutAfter)} ms), not when the answer came`);

    // The first request's answer comes back after ~2 × delayMs; this one's only
    // 2 × delayMs after it was sent.
    const secondSentAt = performance.now();
    await backend.renew(membership, AbortSignal.timeout(5_000));
    const secondTook = performance.now() - secondSentAt;
    assert.ok(
      secondTook >= 2 * delayMs - 20,
      `the renewal was answered after ${Math.round(secondTook)} ms, sooner than its request could make the round trip: it was given the older request's answer`,
    );
  });

  it("a stream on which two renewals in a row time out unanswered is dropped, and the next renewal opens another", limit, async () => {
    const proxy = await newProxy();
    const client = newClient([proxy.hostPort]);
    const { backend, membership } = await joined(client, uniqueKey("silent-stream"));
    await backend.renew(membership, AbortSignal.timeout(2_000)); // the stream is open
    const started = (await keepAliveMetrics()).started;

    proxy.setMode({ delayMs: 1_000 });
    await assert.rejects(backend.renew(membership, AbortSignal.timeout(200)), RequestTimeoutError);
    await assert.rejects(backend.renew(membership, AbortSignal.timeout(200)), RequestTimeoutError);
    await backend.renew(membership, AbortSignal.timeout(10_000));
    assert.equal((await keepAliveMetrics()).started - started, 1, "the silent stream was replaced by a new one");
  });

  it("a stream that breaks fails every renewal waiting on it at once, not at their timeouts", limit, async () => {
    const proxy = await newProxy();
    const client = newClient([proxy.hostPort]);
    const first = await joined(client, uniqueKey("break-a"));
    const second = await joined(client, uniqueKey("break-b"));
    await first.backend.renew(first.membership, AbortSignal.timeout(2_000)); // the stream is open

    proxy.setMode({ delayMs: 2_000 });
    const sentAt = performance.now();
    const renewals = [
      first.backend.renew(first.membership, AbortSignal.timeout(10_000)),
      second.backend.renew(second.membership, AbortSignal.timeout(10_000)),
    ].map((renewal) => renewal.then(() => "answered", (err: Error) => `failed: ${err.message}`));
    await sleep(200);
    proxy.resetConnections();
    const outcomes = await Promise.all(renewals);
    const tookMs = performance.now() - sentAt;
    for (const outcome of outcomes) assert.match(outcome, /^failed: /);
    assert.ok(tookMs < 5_000, `both failed when the stream broke, after ${Math.round(tookMs)} ms, not at their 10 s timeout`);

    proxy.setMode("pass");
    await waitFor(async () => {
      try {
        await Promise.all([first, second].map(({ backend, membership }) => backend.renew(membership, AbortSignal.timeout(1_000))));
        return true;
      } catch {
        return false;
      }
    }, "renewals to succeed on a new stream");
  });

  it("a renewal etcd cannot answer (the connection is silent) fails at its timeout, and renewals work again after the heal", limit, async () => {
    const proxy = await newProxy();
    const client = newClient([proxy.hostPort]);
    const { backend, membership } = await joined(client, uniqueKey("silent"));
    await backend.renew(membership, AbortSignal.timeout(2_000));

    proxy.setMode("blackhole");
    const sentAt = performance.now();
    await assert.rejects(backend.renew(membership, AbortSignal.timeout(300)), RequestTimeoutError);
    assert.ok(performance.now() - sentAt < 2_000, "the renewal failed at its timeout");
    proxy.heal();
    await waitFor(async () => {
      try {
        await backend.renew(membership, AbortSignal.timeout(1_000));
        return true;
      } catch {
        return false;
      }
    }, "a renewal to succeed after the heal");
  });

  it("a process whose elections all stopped exits by itself, with its etcd3 client still open", limit, async () => {
    const key = uniqueKey("exit");
    const script = `
      const etcdLeader = require("./src/index.ts");
      const { Etcd3 } = require("etcd3");
      const client = new Etcd3({ hosts: ${JSON.stringify(cluster.hostPorts)} });
      const members = ["a", "b", "c"].map((name) => etcdLeader(client, ${JSON.stringify(key)}, name, 1).start());
      let elected = false;
      const stopLater = () => {
        if (elected) return;
        elected = true;
        // Two rounds of renewals on the shared stream, then stop without closing the client.
        setTimeout(() => {
          for (const m of members) m.stop();
          console.log("stopped");
        }, 1_200);
      };
      for (const m of members) m.once("elected", stopLater);
    `;
    const child = spawn(process.execPath, ["--import", "tsx", "-e", script], {
      cwd: REPO_ROOT,
      stdio: ["ignore", "pipe", "pipe"],
    });
    let output = "";
    child.stdout.on("data", (chunk) => (output += String(chunk)));
    child.stderr.on("data", (chunk) => (output += String(chunk)));
    let timer: NodeJS.Timeout | undefined;
    try {
      const code = await Promise.race([
        new Promise<number | null>((resolve) => child.once("exit", resolve)),
        new Promise<string>((resolve) => (timer = setTimeout(resolve, 15_000, "still running"))),
      ]);
      assert.equal(code, 0, `child: ${code}\n${output}`);
      assert.match(output, /stopped/);
    } finally {
      clearTimeout(timer);
      if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
    }
  });
});
