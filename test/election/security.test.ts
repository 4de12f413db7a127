// Elections on secured etcd servers, and elections fed untrusted values.
//
// - TLS with client certificates (v2 through node-etcd, v3 through etcd3): a
//   member with a certificate the server trusts is elected; a member with no
//   certificate, with one from a CA the server does not know, or that does not
//   trust the server's CA, reports `error` events that carry the TLS failure,
//   is never elected, keeps retrying, and neither piles up sockets to etcd
//   as it retries nor leaves any half-closed behind.
// - Authentication (etcd's v2 auth, and v3 auth): right credentials are
//   elected; wrong or missing ones give errors (v2: HTTP 401, errorCode 110),
//   never an election, and retries.
// - Untrusted values: member names with quotes, backslashes, slashes, line
//   breaks, NUL, emoji, right-to-left text and 64 KB reach followers' `leader`
//   events unchanged; keys written under the election key by someone else
//   neither crash nor wedge the members.
//
// Each secured setup runs its own etcd; every member, client, etcd and
// certificate made here is removed after its test or suite, and the process
// must exit by itself afterwards.
import assert from "node:assert/strict";
import { createHook } from "node:async_hooks";
import { execFile } from "node:child_process";
import { readdirSync, readFileSync, readlinkSync } from "node:fs";
import { after, afterEach, before, describe, it, type TestContext } from "node:test";
import { Etcd3, GRPCUnavailableError } from "etcd3";
import etcdLeader from "../../src/index";
import { EventRecorder } from "../kit/event-recorder";
import { useEtcd } from "../kit/hooks";
import { makeTestPki, type TestPki } from "../kit/tls";
import { holdsFor, sleep, waitFor, withDeadline } from "../kit/waiting";

// eslint-disable-next-line @typescript-eslint/no-require-imports
const Etcd = require("node-etcd");

type Election = etcdLeader.Election;
type ElectionError = etcdLeader.ElectionError;

// ---------------------------------------------------------------------------
// Bookkeeping: everything started here is stopped here.

const elections = new Set<Election>();
const etcd3Clients = new Set<Etcd3>();

afterEach(async () => {
  await withDeadline(Promise.all([...elections].map((e) => e.leave())), 8_000, "members leaving");
  elections.clear();
  for (const c of etcd3Clients) c.close();
  etcd3Clients.clear();
});

// Where each pending timer was set, so that a process that does not exit can say what holds it.
const pendingTimers = new Map<number, { timer: { hasRef?: () => boolean }; where: string }>();
createHook({
  init(id, type, _trigger, resource) {
    if (type !== "Timeout") return;
    const where = (new Error().stack ?? "").split("\n").slice(2).filter((l) => !l.includes("(node:")).slice(0, 4);
    pendingTimers.set(id, { timer: resource as { hasRef?: () => boolean }, where: where.join(" | ") });
  },
  destroy(id) {
    pendingTimers.delete(id);
  },
}).enable();

after(() => {
  // Once every test has finished the process must exit by itself.
  setTimeout(() => {
    const timers = [...pendingTimers.values()].filter((t) => t.timer.hasRef?.() !== false).map((t) => `timer set at ${t.where}`);
    console.error(
      `still running 5 s after the last test; open handles: ${process.getActiveResourcesInfo().join(", ")}\n${timers.join("\n")}`,
    );
    process.exit(1);
  }, 5_000).unref();
});

// ---------------------------------------------------------------------------
// Helpers

/** Fast retries, so that a refused member retries many times in a few seconds. */
const QUICK = { ttl: 2, retryInitialDelay: 50, retryMaxDelay: 200 } as const;

class Member extends EventRecorder {
  readonly election: Election;

  constructor(client: unknown, key: string, readonly name: string, options: etcdLeader.ElectionOptions = QUICK) {
    const election = etcdLeader(client, key, name, options);
    super(election, name);
    this.election = election;
    elections.add(this.election);
    this.election.start();
  }

  override get errors(): ElectionError[] {
    return super.errors as ElectionError[];
  }
}

/** Which of `members` believe they lead right now. */
const leading = (members: Member[]) => members.filter((m) => m.election.isLeader());

/** Watches `members` for `ms` and fails if any moment had other than exactly `expected` leading. */
function holdsSteady(members: Member[], expected: Member, ms: number): Promise<void> {
  return holdsFor(ms, () => assert.deepEqual(leading(members).map((m) => m.name), [expected.name]));
}

/** One TCP socket of this process: its inode and its state as the kernel shows it. */
interface OpenSocket {
  inode: string;
  /** "01" ESTABLISHED, "08" CLOSE_WAIT (etcd closed it, we never did), ... */
  state: string;
}

const CLOSE_WAIT = "08";

/**
 * The TCP sockets this process holds open to `port` on this machine: those
 * in the kernel's tables whose inode is one of our file descriptors. etcd's
 * own end of each connection belongs to the etcd process, not to us.
 */
function socketsTo(port: number): OpenSocket[] {
  const ours = new Set<string>();
  for (const fd of readdirSync("/proc/self/fd")) {
    try {
      const match = /^socket:\[(\d+)\]$/.exec(readlinkSync(`/proc/self/fd/${fd}`));
      if (match) ours.add(match[1]!);
    } catch {
      // closed between listing and reading
    }
  }
  const found: OpenSocket[] = [];
  for (const table of ["/proc/self/net/tcp", "/proc/self/net/tcp6"]) {
    let text: string;
    try {
      text = readFileSync(table, "utf8");
    } catch {
      continue;
    }
    for (const line of text.split("\n").slice(1)) {
      const fields = line.trim().split(/\s+/);
      if (fields.length < 10) continue;
      const remotePort = parseInt(fields[2]!.split(":")[1]!, 16);
      if (remotePort === port && ours.has(fields[9]!)) found.push({ inode: fields[9]!, state: fields[3]! });
    }
  }
  return found;
}

function portOf(url: string): number {
  return Number(new URL(url).port);
}

/** Every message and code in an error's cause chain, node-etcd's per-server errors included. */
function causeTrail(err: unknown): string {
  const parts: string[] = [];
  const visit = (e: unknown, depth: number) => {
    if (depth > 5 || typeof e !== "object" || e === null) return;
    const x = e as { message?: unknown; code?: unknown; errorCode?: unknown; cause?: unknown; errors?: unknown };
    parts.push([x.code, x.errorCode, x.message].filter((v) => v !== undefined).join(" "));
    if (Array.isArray(x.errors)) for (const sub of x.errors) visit((sub as { httperror?: unknown }).httperror, depth + 1);
    visit(x.cause, depth + 1);
  };
  visit(err, 0);
  return parts.join(" <- ");
}

/**
 * Runs one member that etcd refuses, for at least `minErrors` failed
 * attempts, and checks that it never leads, that its attempts count up 1, 2,
 * 3, ..., and that it leaks no socket: no more than a few of its own
 * sockets to etcd are open at any time however often it retries, and none it
 * opened is left half-closed (CLOSE_WAIT) 2 s after it left. Sockets open
 * before it started (idle keep-alive connections, grpc-js connections that
 * outlive their channel by a few seconds) are told apart by inode and not
 * counted.
 *
 * `knownLeak`: the half-closed check fails for a reason outside this
 * library; the test is then reported as TODO with that reason, after every
 * other check has passed.
 */
async function expectRefused(
  t: TestContext,
  client: unknown,
  key: string,
  port: number,
  options: {
    /** Checks on the errors themselves (their causes), run before the socket checks. */
    causes: (errors: ElectionError[]) => void;
    close?: () => void;
    knownLeak?: string;
    minErrors?: number;
  },
): Promise<void> {
  const { causes, close, knownLeak, minErrors = 15 } = options;
  const before = new Set(socketsTo(port).map((s) => s.inode));
  const fresh = () => socketsTo(port).filter((s) => !before.has(s.inode));
  // A long request timeout, so that on a busy machine refusals are not reported as timeouts instead.
  const member = new Member(client, key, "refused", { ...QUICK, requestTimeout: 4_000 });
  /** Its own open sockets to etcd (half-closed ones aside), every 25 ms while it retries. */
  const live: number[] = [];
  const started = performance.now();
  const deadline = started + 12_000;
  while (member.errors.length < minErrors) {
    assert.ok(performance.now() < deadline, `only ${member.errors.length} errors in 12 s`);
    assert.equal(member.election.isLeader(), false, "a refused member believes it leads");
    live.push(fresh().filter((s) => s.state !== CLOSE_WAIT).length);
    await sleep(25);
  }
  const errors = [...member.errors];
  const retried = Math.round(performance.now() - started);
  await withDeadline(member.election.leave(), 5_000, "refused member leaving");
  close?.();
  const halfClosedNow = () => fresh().filter((s) => s.state === CLOSE_WAIT).length;
  const settleBy = performance.now() + 2_000;
  while (halfClosedNow() > 0 && performance.now() < settleBy) await sleep(50);
  const halfClosed = halfClosedNow();
  t.diagnostic(
    `${errors.length} errors in ${retried} ms; own sockets to etcd while retrying: max ${Math.max(...live)} ` +
      `(${summarise(live)}); half-closed 2 s after leaving: ${halfClosed}; first error: ${causeTrail(errors[0]).slice(0, 300)}`,
  );

  assert.deepEqual(member.elected, [], "a refused member was elected");
  assert.equal(member.election.isLeader(), false);
  assert.deepEqual(errors.map((e) => e.attempt), errors.map((_, i) => i + 1), "attempt counts up by one per failure");
  for (const e of errors) {
    assert.ok(e instanceof etcdLeader.ElectionError);
    assert.equal(e.phase, "join");
  }
  causes(errors);
  // A socket leaked per attempt would reach 15; a busy machine has been seen to hold up to 4 briefly.
  assert.ok(Math.max(...live) <= 4, `own sockets to etcd while retrying: ${live.join(",")}`);
  if (halfClosed > 0 && knownLeak) t.todo(`${knownLeak} (${halfClosed} left half-closed here)`);
  assert.equal(halfClosed, 0, "sockets etcd closed that this process never closed (CLOSE_WAIT)");
}

/** "0x3, 1x40": how often each socket count was seen. */
function summarise(samples: number[]): string {
  const seen = new Map<number, number>();
  for (const s of samples) seen.set(s, (seen.get(s) ?? 0) + 1);
  return [...seen].sort((a, b) => a[0] - b[0]).map(([count, times]) => `${count}x${times}`).join(", ");
}

/** Starts `names` in order (each joins after the previous one is in line) and waits until the first leads. */
async function joinInOrder(client: unknown, key: string, names: string[]): Promise<Member[]> {
  const members: Member[] = [];
  for (const name of names) {
    const m = new Member(client, key, name);
    members.push(m);
    if (members.length === 1) await waitFor(`${JSON.stringify(name.slice(0, 40))} elected`, 5_000, () => m.elected.length > 0);
    else await waitFor(`${JSON.stringify(name.slice(0, 40))} to follow`, 5_000, () => m.leaders.length > 0);
  }
  return members;
}

let keyCounter = 0;
const electionKey = (label: string) => `/security/${++keyCounter}-${label}`;

function newEtcd3(options: ConstructorParameters<typeof Etcd3>[0]): Etcd3 {
  const client = new Etcd3(options);
  etcd3Clients.add(client);
  return client;
}

function etcdctl(endpoint: string, args: string[]): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile("etcdctl", [`--endpoints=${endpoint}`, ...args], { env: { ...process.env, ETCDCTL_API: "3" }, timeout: 10_000 },
      (err, stdout, stderr) => (err ? reject(new Error(`etcdctl ${args.join(" ")}: ${stderr || err.message}`)) : resolve(stdout)));
  });
}

/** A plain HTTP request to etcd's v2 API; `body` is sent as a form, already encoded. */
async function v2Http(
  base: string,
  method: string,
  path: string,
  body?: string,
  auth?: string,
): Promise<{ status: number; json: any }> {
  const res = await fetch(`${base}${path}`, {
    method,
    headers: {
      ...(body !== undefined ? { "content-type": "application/x-www-form-urlencoded" } : {}),
      ...(auth ? { authorization: `Basic ${Buffer.from(auth).toString("base64")}` } : {}),
    },
    body,
    signal: AbortSignal.timeout(5_000),
  });
  const text = await res.text();
  return { status: res.status, json: text ? JSON.parse(text) : undefined };
}

// ---------------------------------------------------------------------------
// TLS

describe("TLS with client certificates", { timeout: 60_000 }, () => {
  let pki: TestPki;
  let url: string;
  let port: number;

  before(() => {
    pki = makeTestPki();
  });
  const etcd = useEtcd(() => ({
    tls: { certFile: pki.server.certFile, keyFile: pki.server.keyFile, caFile: pki.caFile, clientCertAuth: true },
  }));
  after(() => pki?.cleanup());

  before(() => {
    url = etcd.clientUrls[0]!;
    port = portOf(url);
    assert.match(url, /^https:\/\/127\.0\.0\.1:\d+$/);
  });

  describe("v2 (node-etcd)", () => {
    const v2 = (tls: { ca?: string; cert?: string; key?: string }) => new Etcd([url], tls);

    it("members with a trusted client certificate elect one leader; followers name it", { timeout: 15_000 }, async () => {
      const client = v2({ ca: pki.ca, cert: pki.client.cert, key: pki.client.key });
      const key = electionKey("v2-tls");
      const [a, b, c] = await joinInOrder(client, key, ["a", "b", "c"]);
      assert.equal(b!.lastLeader, "a");
      assert.equal(c!.lastLeader, "a");
      await holdsSteady([a!, b!, c!], a!, 300);
      // The leader watches its own key and each follower two keys: the socket
      // count sees those long polls (so the refused members' counts mean something).
      assert.ok(socketsTo(port).length >= 3, `sockets while three members wait: ${socketsTo(port).length}`);
      await a!.election.leave();
      await waitFor("b elected after a left", 5_000, () => b!.elected.length === 1);
      await waitFor("c follows b", 5_000, () => c!.lastLeader === "b");
      for (const m of [a!, b!, c!]) assert.deepEqual(m.errors, [], `${m.name} saw no error`);
    });

    it("a member with no client certificate is refused at the handshake, retries, never leads, leaks no socket", { timeout: 20_000 }, async (t) => {
      await expectRefused(t, v2({ ca: pki.ca }), electionKey("v2-no-cert"), port, {
        causes: (errors) => {
          for (const e of errors) {
            // node-etcd says "All servers returned error"; the message names each server's reason.
            assert.match(e.message, /^join failed \(attempt \d+\): All servers returned error \(https:\/\/127\.0\.0\.1:\d+: \S+\)$/);
            assert.match(causeTrail(e), /ALERT_BAD_CERTIFICATE|ALERT_CERTIFICATE_REQUIRED|ECONNRESET|EPIPE/, causeTrail(e));
            assert.equal(e.errorCode, undefined);
          }
        },
      });
    });

    it("a member with a certificate from an unknown CA is refused likewise", { timeout: 20_000 }, async (t) => {
      const client = v2({ ca: pki.ca, cert: pki.otherClient.cert, key: pki.otherClient.key });
      await expectRefused(t, client, electionKey("v2-other-cert"), port, {
        causes: (errors) => {
          for (const e of errors) assert.match(causeTrail(e), /ALERT_BAD_CERTIFICATE|ECONNRESET|EPIPE/, causeTrail(e));
        },
      });
    });

    it("a member that does not trust the server's CA refuses the server, retries, never leads, leaks no socket", { timeout: 20_000 }, async (t) => {
      // Node's own CA list, and no test CA: the server's certificate cannot be verified.
      const client = v2({ cert: pki.client.cert, key: pki.client.key });
      await expectRefused(t, client, electionKey("v2-no-ca"), port, {
        causes: (errors) => {
          for (const e of errors) assert.match(causeTrail(e), /UNABLE_TO_VERIFY_LEAF_SIGNATURE/, causeTrail(e));
        },
      });
    });
  });

  describe("v3 (etcd3)", () => {
    const v3 = (credentials: { rootCertificate: string; certChain?: string; privateKey?: string }) =>
      newEtcd3({
        hosts: [url],
        credentials: {
          rootCertificate: Buffer.from(credentials.rootCertificate),
          ...(credentials.certChain ? { certChain: Buffer.from(credentials.certChain) } : {}),
          ...(credentials.privateKey ? { privateKey: Buffer.from(credentials.privateKey) } : {}),
        },
      });

    it("members with a trusted client certificate elect one leader; followers name it", { timeout: 15_000 }, async () => {
      const client = v3({ rootCertificate: pki.ca, certChain: pki.client.cert, privateKey: pki.client.key });
      const key = electionKey("v3-tls");
      const [a, b, c] = await joinInOrder(client, key, ["a", "b", "c"]);
      assert.equal(b!.lastLeader, "a");
      assert.equal(c!.lastLeader, "a");
      await holdsSteady([a!, b!, c!], a!, 300);
      assert.ok(socketsTo(port).length >= 1, "the client's connection is counted");
      await a!.election.leave();
      await waitFor("b elected after a left", 5_000, () => b!.elected.length === 1);
      await waitFor("c follows b", 5_000, () => c!.lastLeader === "b");
      for (const m of [a!, b!, c!]) assert.deepEqual(m.errors, [], `${m.name} saw no error`);
    });

    // Seen with @grpc/grpc-js 1.14.7: when etcd rejects the client's
    // certificate (a TLS 1.3 alert after the handshake), the connection is
    // left in CLOSE_WAIT, one per connection attempt, even after the client is
    // closed. Plain grpc-js clients do the same; node-etcd (above) does not.
    const GRPC_LEAK = "@grpc/grpc-js leaves a socket in CLOSE_WAIT for each handshake etcd refuses";

    // etcd3 opens its circuit breaker after the first failures: later errors
    // say so ("circuit breaker is open") instead of repeating the TLS reason.
    const tlsOrBreaker = (reason: RegExp) => (errors: ElectionError[]) => {
      assert.match(causeTrail(errors[0]), reason, causeTrail(errors[0]));
      assert.ok(errors[0]!.cause instanceof GRPCUnavailableError, causeTrail(errors[0]));
      for (const e of errors) assert.match(causeTrail(e), new RegExp(`${reason.source}|circuit breaker is open`), causeTrail(e));
    };

    it("a member with no client certificate is refused, retries, never leads, leaks no socket", { timeout: 20_000 }, async (t) => {
      const client = v3({ rootCertificate: pki.ca });
      await expectRefused(t, client, electionKey("v3-no-cert"), port, {
        causes: tlsOrBreaker(/alert bad certificate|certificate required|ECONNRESET/),
        close: () => client.close(),
        knownLeak: GRPC_LEAK,
      });
    });

    it("a member with a certificate from an unknown CA is refused likewise", { timeout: 20_000 }, async (t) => {
      const client = v3({ rootCertificate: pki.ca, certChain: pki.otherClient.cert, privateKey: pki.otherClient.key });
      await expectRefused(t, client, electionKey("v3-other-cert"), port, {
        causes: tlsOrBreaker(/alert bad certificate|ECONNRESET/),
        close: () => client.close(),
        knownLeak: GRPC_LEAK,
      });
    });

    it("a member that does not trust the server's CA refuses the server likewise", { timeout: 20_000 }, async (t) => {
      const client = v3({ rootCertificate: pki.otherCa, certChain: pki.client.cert, privateKey: pki.client.key });
      await expectRefused(t, client, electionKey("v3-no-ca"), port, {
        causes: tlsOrBreaker(/unable to verify the first certificate/),
        close: () => client.close(),
      });
    });
  });
});

// ---------------------------------------------------------------------------
// Authentication

describe("etcd v2 authentication (node-etcd)", { timeout: 60_000 }, () => {
  const etcd = useEtcd();
  let url: string;
  let port: number;

  before(async () => {
    url = etcd.clientUrls[0]!;
    port = portOf(url);
    // etcd's v2 auth: a root user, auth on, and the guest role (anyone
    // without credentials) stripped of its read and write rights.
    const root = await v2Http(url, "PUT", "/v2/auth/users/root", JSON.stringify({ user: "root", password: "right-pw" }));
    assert.equal(root.status, 201, JSON.stringify(root.json));
    assert.equal((await v2Http(url, "PUT", "/v2/auth/enable")).status, 200);
    const guest = await v2Http(
      url, "PUT", "/v2/auth/roles/guest",
      JSON.stringify({ role: "guest", revoke: { kv: { read: ["/*"], write: ["/*"] } } }),
      "root:right-pw",
    );
    assert.equal(guest.status, 200, JSON.stringify(guest.json));
    assert.deepEqual(guest.json.permissions.kv, { read: [], write: [] });
    // Without credentials, nothing can be written any more.
    const anonymous = await v2Http(url, "POST", "/v2/keys/probe", "value=x");
    assert.equal(anonymous.status, 401);
    assert.equal(anonymous.json.errorCode, 110);
  });

  it("members with the right credentials elect one leader; followers name it", { timeout: 15_000 }, async () => {
    const client = new Etcd([url], { auth: { user: "root", pass: "right-pw" } });
    const key = electionKey("v2-auth");
    const [a, b] = await joinInOrder(client, key, ["a", "b"]);
    assert.equal(b!.lastLeader, "a");
    await holdsSteady([a!, b!], a!, 300);
    await a!.election.leave();
    await waitFor("b elected after a left", 5_000, () => b!.elected.length === 1);
    for (const m of [a!, b!]) assert.deepEqual(m.errors, [], `${m.name} saw no error`);
  });

  const refusedWith = (label: string, options: object) =>
    it(`a member with ${label} gets errorCode 110 errors, retries, never leads`, { timeout: 20_000 }, async (t) => {
      const key = electionKey(`v2-auth-${label.replace(/\W+/g, "-")}`);
      await expectRefused(t, new Etcd([url], options), key, port, {
        causes: (errors) => {
          for (const e of errors) {
            assert.equal(e.errorCode, 110, e.message);
            assert.match(e.message, /^join failed \(attempt \d+\): The request requires user authentication$/);
            assert.equal((e.cause as { error?: { cause?: string } }).error?.cause, "Insufficient credentials");
          }
        },
      });
      // The refused member wrote nothing.
      const listed = await v2Http(url, "GET", `/v2/keys${key}`, undefined, "root:right-pw");
      assert.equal(listed.status, 404, JSON.stringify(listed.json));
    });

  refusedWith("a wrong password", { auth: { user: "root", pass: "wrong-pw" } });
  refusedWith("an unknown user", { auth: { user: "mallory", pass: "right-pw" } });
  refusedWith("no credentials", {});
});

describe("etcd v3 authentication (etcd3)", { timeout: 60_000 }, () => {
  const etcd = useEtcd({ enableV2: false });
  let url: string;
  let port: number;

  before(async () => {
    url = etcd.clientUrls[0]!;
    port = portOf(url);
    await etcdctl(url, ["user", "add", "root:right-pw", "--interactive=false"]);
    await etcdctl(url, ["auth", "enable"]);
  });

  it("members with the right credentials elect one leader; followers name it", { timeout: 15_000 }, async () => {
    const client = newEtcd3({ hosts: [url], auth: { username: "root", password: "right-pw" } });
    const key = electionKey("v3-auth");
    const [a, b] = await joinInOrder(client, key, ["a", "b"]);
    assert.equal(b!.lastLeader, "a");
    await holdsSteady([a!, b!], a!, 300);
    await a!.election.leave();
    await waitFor("b elected after a left", 5_000, () => b!.elected.length === 1);
    for (const m of [a!, b!]) assert.deepEqual(m.errors, [], `${m.name} saw no error`);
  });

  const refusedWith = (label: string, auth: { username: string; password: string } | undefined, reason: RegExp) =>
    it(`a member with ${label} gets errors, retries, never leads`, { timeout: 20_000 }, async (t) => {
      const client = newEtcd3({ hosts: [url], ...(auth ? { auth } : {}) });
      const key = electionKey(`v3-auth-${label.replace(/\W+/g, "-")}`);
      await expectRefused(t, client, key, port, {
        causes: (errors) => {
          for (const e of errors) {
            assert.match(e.message, reason);
            // gRPC status 3, INVALID_ARGUMENT, is how etcd refuses credentials.
            assert.equal(e.errorCode, 3, e.message);
          }
        },
        close: () => client.close(),
      });
      const root = newEtcd3({ hosts: [url], auth: { username: "root", password: "right-pw" } });
      assert.equal((await root.getAll().prefix(`${key}/`).keys()).length, 0, "the refused member wrote nothing");
      root.close();
    });

  refusedWith("a wrong password", { username: "root", password: "wrong-pw" }, /authentication failed, invalid user ID or password/);
  refusedWith("an unknown user", { username: "mallory", password: "right-pw" }, /authentication failed, invalid user ID or password/);
  refusedWith("no credentials", undefined, /user name is empty/);
});

// ---------------------------------------------------------------------------
// Untrusted values

/** Names a member might be given by whoever deploys it. Each is unique. */
const ODD_NAMES = [
  'say "hello" \'there\'',
  "back\\slash\\\\ and \\u0041 and \\n",
  "/slash/../es/ and %2F",
  "line one\nline two\r\n\ttabbed",
  "nul\u0000byte",
  "🦊👩‍💻🏳️‍🌈 emoji",
  "שלום עולם \u202Ereversed\u202C مرحبا",
  "  spaced  & value=x+y=z;%zz",
  // 64 KB in UTF-8, mixing everything above.
  "é🦊\"\\/\n".repeat(6554),
];

describe("untrusted values", { timeout: 90_000 }, () => {
  const etcd = useEtcd();
  let url: string;
  let v3: Etcd3;

  before(() => {
    url = etcd.clientUrls[0]!;
  });

  after(() => v3?.close());

  const v2 = () => new Etcd([url]);
  const v3Client = () => (v3 ??= new Etcd3({ hosts: etcd.hostPorts }));

  /**
   * Members named ODD_NAMES join in order; then each leader in turn leaves.
   * Every follower must hear every leader's name, exactly, in order, and
   * exactly one member must lead at each step.
   */
  async function oddNamesTakeTurns(client: unknown, key: string): Promise<void> {
    assert.equal(Buffer.byteLength(ODD_NAMES.at(-1)!), 65_540);
    const members = await joinInOrder(client, key, ODD_NAMES);
    for (let k = 0; k < members.length; k++) {
      const leader = members[k]!;
      await waitFor(`member ${k} elected`, 5_000, () => leader.elected.length === 1);
      await waitFor(`followers of member ${k}`, 5_000, () =>
        members.slice(k + 1).every((m) => m.lastLeader === leader.name),
      );
      await holdsSteady(members.slice(k), leader, 60);
      assert.equal(leader.election.currentLeader(), leader.name);
      await leader.election.leave();
    }
    for (const [j, m] of members.entries()) {
      assert.ok(m.leaders.length === j, `member ${j} heard ${m.leaders.length} leaders, not ${j}`);
      // Compared one by one so that a 64 KB mismatch does not print a 64 KB diff.
      m.leaders.forEach((heard, i) => assert.ok(heard === ODD_NAMES[i], `member ${j} heard leader ${i} altered`));
      assert.deepEqual(m.errors.map((e) => e.message), []);
      assert.equal(m.elected.length, 1);
    }
  }

  it("v2: odd and 64 KB names reach every follower's leader events exactly", { timeout: 25_000 }, async () => {
    const key = electionKey("v2-names");
    await oddNamesTakeTurns(v2(), key);
  });

  it("v3: odd and 64 KB names reach every follower's leader events exactly", { timeout: 25_000 }, async () => {
    const key = electionKey("v3-names");
    await oddNamesTakeTurns(v3Client(), key);
  });

  // A value that is not UTF-8: bytes FF FE 00 80 then "(".
  const BINARY_FORM = "%FF%FE%00%80%28";
  const BINARY = Buffer.from([0xff, 0xfe, 0x00, 0x80, 0x28]);

  it("v2: plain keys, a subdirectory, a binary value and a hand-made in-order key at the back do not disturb the election", { timeout: 20_000 }, async () => {
    const key = electionKey("v2-foreign");
    const put = async (path: string, body: string) => {
      const res = await v2Http(url, "PUT", `/v2/keys${key}/${path}`, body);
      assert.ok(res.status === 200 || res.status === 201, JSON.stringify(res.json));
    };
    await put("junk", "value=x");
    await put("sub/inner", "value=y");
    await put("bin", `value=${BINARY_FORM}`);
    const [a, b, c] = await joinInOrder(v2(), key, ["a", "b", "c"]);
    // Someone else's in-order key with no TTL, behind our members, and more junk while they wait.
    const late = await v2Http(url, "POST", `/v2/keys${key}`, "value=intruder");
    assert.equal(late.status, 201);
    await put("junk2", `value=${BINARY_FORM}`);
    await put("sub/inner", "value=changed");
    await holdsSteady([a!, b!, c!], a!, 300);
    assert.equal(b!.lastLeader, "a");
    assert.equal(c!.lastLeader, "a");

    await a!.election.leave();
    await waitFor("b elected", 5_000, () => b!.elected.length === 1);
    await waitFor("c follows b", 5_000, () => c!.lastLeader === "b");
    await holdsSteady([b!, c!], b!, 200);
    await b!.election.leave();
    await waitFor("c elected", 5_000, () => c!.elected.length === 1);
    await holdsSteady([c!], c!, 200);
    for (const m of [a!, b!, c!]) assert.deepEqual(m.errors.map((e) => e.message), [], `${m.name} saw no error`);
    assert.deepEqual(c!.leaders, ["a", "b"], "the intruder behind c never led");

    // Every foreign key is still there, untouched.
    const listed = await v2Http(url, "GET", `/v2/keys${key}?recursive=true&sorted=true`);
    const keys = (listed.json.node.nodes as Array<{ key: string; value?: string; dir?: boolean }>).map((n) => n.key.slice(key.length + 1));
    assert.deepEqual(keys.filter((k) => !/^\d{20}$/.test(k)).sort(), ["bin", "junk", "junk2", "sub"]);
    assert.equal(keys.filter((k) => /^\d{20}$/.test(k)).length, 2, "the intruder and c");
  });

  it("v2: a hand-made in-order key first in line is followed like a member until it is deleted", { timeout: 20_000 }, async () => {
    // Documented behaviour: an in-order key under the election key is, to our
    // members, indistinguishable from a member. Without a TTL it leads until
    // someone deletes it; its value (even a binary one) is the leader's name.
    const key = electionKey("v2-intruder");
    const first = await v2Http(url, "POST", `/v2/keys${key}`, "value=intruder");
    const second = await v2Http(url, "POST", `/v2/keys${key}`, `value=${BINARY_FORM}`);
    assert.equal(first.status, 201);
    assert.equal(second.status, 201);
    const binaryAsEtcdShowsIt: string = second.json.node.value;
    const a = new Member(v2(), key, "a");
    await waitFor("a follows the intruder", 5_000, () => a.lastLeader === "intruder");
    const b = new Member(v2(), key, "b");
    await waitFor("b follows the intruder", 5_000, () => b.lastLeader === "intruder");
    // Longer than the TTL: renewals go on, and nobody of ours leads.
    await holdsFor(2_500, () => assert.deepEqual(leading([a, b]), []), 25);

    assert.equal((await v2Http(url, "DELETE", `/v2/keys${first.json.node.key}`)).status, 200);
    await waitFor("both follow the binary-valued key", 5_000, () =>
      [a, b].every((m) => m.lastLeader === binaryAsEtcdShowsIt),
    );
    assert.deepEqual(leading([a, b]), []);

    assert.equal((await v2Http(url, "DELETE", `/v2/keys${second.json.node.key}`)).status, 200);
    await waitFor("a elected", 5_000, () => a.elected.length === 1);
    await waitFor("b follows a", 5_000, () => b.lastLeader === "a");
    await holdsSteady([a, b], a, 200);
    assert.deepEqual(a.leaders, ["intruder", binaryAsEtcdShowsIt]);
    assert.deepEqual(b.leaders, ["intruder", binaryAsEtcdShowsIt, "a"]);
    for (const m of [a, b]) assert.deepEqual(m.errors.map((e) => e.message), [], `${m.name} saw no error`);
  });

  it("v3: a lease-less key and a leased key with a binary value at the back do not disturb the election", { timeout: 20_000 }, async () => {
    const key = electionKey("v3-foreign");
    const client = v3Client();
    const [a, b, c] = await joinInOrder(client, key, ["a", "b", "c"]);
    await client.put(`${key}/junk`).value("x").exec();
    const lease = await client.leaseClient.leaseGrant({ TTL: 60 });
    await client.put(`${key}/garbage`).value(BINARY).lease(lease.ID).exec();
    await holdsSteady([a!, b!, c!], a!, 300);

    await a!.election.leave();
    await waitFor("b elected", 5_000, () => b!.elected.length === 1);
    await waitFor("c follows b", 5_000, () => c!.lastLeader === "b");
    await holdsSteady([b!, c!], b!, 200);
    await b!.election.leave();
    await waitFor("c elected", 5_000, () => c!.elected.length === 1);
    await holdsSteady([c!], c!, 200);
    assert.deepEqual(c!.leaders, ["a", "b"]);
    for (const m of [a!, b!, c!]) assert.deepEqual(m.errors.map((e) => e.message), [], `${m.name} saw no error`);
    assert.equal(await client.get(`${key}/junk`).string(), "x", "foreign keys untouched");
    assert.deepEqual(await client.get(`${key}/garbage`).buffer(), BINARY);
    await client.leaseClient.leaseRevoke({ ID: lease.ID });
  });

  it("v3: foreign keys first in line are ignored, unless named like members, which are followed until they go", { timeout: 20_000 }, async () => {
    // Documented behaviour: only keys named as etcd's recipe names members,
    // `<key>/<lease id in lowercase hex>`, hold a place in line (etcd's own
    // recipe, and `etcdctl elect`, would count every key under `<key>/`).
    // A key named so is indistinguishable from a member, with or without a
    // lease; its value, even a binary one, is the leader's name.
    const key = electionKey("v3-intruder");
    const client = v3Client();
    for (const name of ["junk", "sub/1f", "0f", "ABC", "-1f", "8000000000000000"]) {
      await client.put(`${key}/${name}`).value("not a member").exec();
    }
    await client.put(`${key}/1f`).value("intruder").exec();
    const lease = await client.leaseClient.leaseGrant({ TTL: 60 });
    await client.put(`${key}/abc`).value(BINARY).lease(lease.ID).exec();
    const a = new Member(client, key, "a");
    await waitFor("a follows the intruder", 5_000, () => a.lastLeader === "intruder");
    const b = new Member(client, key, "b");
    await waitFor("b follows the intruder", 5_000, () => b.lastLeader === "intruder");
    await holdsFor(2_500, () => assert.deepEqual(leading([a, b]), []), 25);

    await client.delete().key(`${key}/1f`).exec();
    const garbled = BINARY.toString();
    await waitFor("both follow the binary-valued key", 5_000, () => [a, b].every((m) => m.lastLeader === garbled));
    assert.deepEqual(leading([a, b]), []);

    await client.leaseClient.leaseRevoke({ ID: lease.ID });
    await waitFor("a elected", 5_000, () => a.elected.length === 1);
    await waitFor("b follows a", 5_000, () => b.lastLeader === "a");
    await holdsSteady([a, b], a, 200);
    assert.deepEqual(a.leaders, ["intruder", garbled]);
    assert.deepEqual(b.leaders, ["intruder", garbled, "a"]);
    for (const m of [a, b]) assert.deepEqual(m.errors.map((e) => e.message), [], `${m.name} saw no error`);
  });
});
