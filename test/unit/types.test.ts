// Compile-time checks of the published types (dist/cjs/index.d.ts, reached
// through the package name as users reach it). `tsc --noEmit` over test/ fails
// if a listener's parameter type changes, or if a `@ts-expect-error` below
// stops being an error. At run time this file only checks that the same
// names exist; it needs no etcd and never starts an election.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import etcdLeader = require("etcd-leader");
import { natsLeader, type NatsElectionOptions } from "etcd-leader/nats";
import type { KV } from "@nats-io/kv";
import type { NatsConnection } from "@nats-io/transport-node";

// eslint-disable-next-line @typescript-eslint/no-require-imports
const Etcd = require("node-etcd");

/** Fails to compile unless A and B are the same type. */
type Equal<A, B> = (<T>() => T extends A ? 1 : 2) extends <T>() => T extends B ? 1 : 2 ? true : false;
function expectType<T extends true>(): T | void {}

/** Typical use, as a service would write it. Compiled, never called with a live client. */
function typicalUsage(client: unknown): etcdLeader.Election {
  const options: etcdLeader.ElectionOptions = { stepDownMargin: 1_000, requestTimeout: 2_000 };
  const election = etcdLeader(client, "/services/api/leader", "api-1", 10, options);
  etcdLeader(client, "/services/api/leader", "api-1");
  etcdLeader(client, "/services/api/leader", "api-1", "10");
  etcdLeader(client, "/services/api/leader", "api-1", { ttl: 10 });

  election.on("elected", (token) => {
    expectType<Equal<typeof token, number>>();
    const fencing: number = token;
    void fencing;
  });
  election.on("unelected", () => undefined);
  election.on("leader", (name) => {
    expectType<Equal<typeof name, string>>();
    const upper: string = name.toUpperCase();
    void upper;
  });
  election.on("error", (err) => {
    expectType<Equal<typeof err, etcdLeader.ElectionError>>();
    const phase: etcdLeader.ElectionPhase = err.phase;
    const attempt: number = err.attempt;
    const code: number | undefined = err.errorCode;
    void [phase, attempt, code];
  });

  // @ts-expect-error a `leader` listener gets the leader's name, a string
  election.on("leader", (name: number) => void name);
  // @ts-expect-error an `elected` listener gets the fencing token, a number
  election.on("elected", (token: string) => void token);
  // @ts-expect-error there is no such event
  election.on("elect", () => undefined);
  // @ts-expect-error options are checked: no such option
  etcdLeader(client, "/k", "n", { ttl: 5, stepdownMargin: 1 });
  // @ts-expect-error options are given once: in fourth place, or after the TTL
  etcdLeader(client, "/k", "n", { ttl: 5 }, { refreshInterval: 100 });
  // @ts-expect-error the TTL is a number of seconds (or a numeric string), not a boolean
  etcdLeader(client, "/k", "n", true);

  const started: etcdLeader.Election = election.start();
  const stopped: etcdLeader.Election = election.stop();
  const left: Promise<void> = election.leave();
  const leading: boolean = election.isLeader();
  const running: boolean = election.isRunning();
  const leader: string | undefined = election.currentLeader();
  const token: number | undefined = election.fencingToken();
  const remaining: number = election.leaseRemaining();
  void [started, stopped, left, leading, running, leader, token, remaining];
  // @ts-expect-error currentLeader() may be undefined
  const mustBeString: string = election.currentLeader();
  void mustBeString;

  const observer = etcdLeader.observe(client, "/services/api/leader").start();
  observer.on("leader", (name) => {
    expectType<Equal<typeof name, string | undefined>>();
  });
  // @ts-expect-error an observer reports undefined while nobody leads
  observer.on("leader", (name: string) => void name);
  const observed: string | undefined = observer.currentLeader();
  void observed;
  observer.stop();

  return election;
}

/** The promise-, signal- and iterator-shaped surface, as a service would use it. Compiled, never called. */
async function scopedUsage(client: unknown): Promise<void> {
  const shutdown = new AbortController();
  const election = etcdLeader({ client, key: "/services/api/leader", name: "api-1", ttl: 10, stepDownMargin: 1_000 });
  expectType<Equal<typeof election, etcdLeader.Election>>();
  const settings: etcdLeader.ElectionSettings = { client, key: "/k", name: "n" };
  etcdLeader(settings);
  // @ts-expect-error the one-object form needs a name
  etcdLeader({ client, key: "/k" });
  // @ts-expect-error options are checked in the one-object form too
  etcdLeader({ client, key: "/k", name: "n", stepdownMargin: 1 });

  const started: etcdLeader.Election = election.start({ signal: shutdown.signal });
  void started;

  const result = await election.whileLeading(
    async (term) => {
      expectType<Equal<typeof term, etcdLeader.LeadershipTerm>>();
      const signal: AbortSignal = term.signal;
      const token: number = term.token;
      const leading: boolean = term.isLeader();
      const remaining: number = term.leaseRemaining();
      void [signal, token, leading, remaining];
      return 42;
    },
    { signal: shutdown.signal, onLoss: "reject" },
  );
  expectType<Equal<typeof result, number>>();
  const onLoss: etcdLeader.OnLoss = "rerun";
  const options: etcdLeader.WhileLeadingOptions = { onLoss };
  void options;
  // @ts-expect-error onLoss is "rerun" or "reject"
  await election.whileLeading(() => 1, { onLoss: "retry" });

  const token: number = await election.whenElected({ signal: AbortSignal.timeout(1_000) });
  void token;

  const state: etcdLeader.ElectionState = election.state;
  const renewedAt: number | undefined = election.lastRenewedAt;
  void [state, renewedAt];
  // @ts-expect-error no such state
  const bad: etcdLeader.ElectionState = "elected";
  void bad;

  for await (const leader of election.leaderChanges({ signal: shutdown.signal })) {
    expectType<Equal<typeof leader, etcdLeader.Leader | undefined>>();
    const name: string | undefined = leader?.name;
    const leaderToken: number | undefined = leader?.token;
    void [name, leaderToken];
  }
  const changes: etcdLeader.LeaderChanges = election.leaderChanges();
  const buffered: number = changes.buffered;
  void buffered;

  // The election's `leader` event is as it was: the name only.
  // @ts-expect-error an election's `leader` listener gets one argument
  election.on("leader", (name: string, token: number) => void [name, token]);

  const observer = etcdLeader.observe({ client, key: "/services/api/leader" });
  etcdLeader.observe(client, "/services/api/leader", { requestTimeout: 1_000 }).start({ signal: shutdown.signal });
  observer.on("leader", (name, leaderToken) => {
    expectType<Equal<typeof name, string | undefined>>();
    expectType<Equal<typeof leaderToken, number | undefined>>();
  });
  for await (const leader of observer) {
    expectType<Equal<typeof leader, etcdLeader.Leader | undefined>>();
    break;
  }
  for await (const leader of observer.changes({ signal: shutdown.signal })) void leader;

  const leader = await etcdLeader.whoLeads(client, "/services/api/leader", { signal: shutdown.signal, requestTimeout: 500 });
  expectType<Equal<typeof leader, etcdLeader.Leader | undefined>>();
  await etcdLeader.whoLeads({ client, key: "/services/api/leader" });

  const clientOptions: etcdLeader.Etcd3Options = etcdLeader.etcd3Options({ hosts: ["10.0.0.1:2379"] });
  expectType<Equal<typeof clientOptions.hosts, string[] | string | undefined>>();
  etcdLeader({ client, key: "/k", name: "n", watchRearmInterval: 10_000 });

  {
    await using disposable = etcdLeader(client, "/k", "n");
    await using watching = etcdLeader.observe(client, "/k");
    void [disposable, watching];
  }
  const dispose: () => Promise<void> = election[Symbol.asyncDispose];
  void dispose;

  const channelName: "etcd-leader:state" = etcdLeader.channels.state;
  void channelName;
  const onState = (message: etcdLeader.StateMessage) => {
    const from: etcdLeader.ElectionState = message.from;
    const source: etcdLeader.Election = message.source;
    void [from, source, message.to, message.token, message.member, message.store];
  };
  const onRenewal = (message: etcdLeader.RenewalMessage) => void [message.roundTripMs, message.membership, message.leading];
  const onRetry = (message: etcdLeader.RetryMessage) => {
    const phase: etcdLeader.ElectionPhase = message.phase;
    void [phase, message.attempt, message.delayMs, message.error];
  };
  const onError = (message: etcdLeader.ErrorMessage) => {
    const error: etcdLeader.ElectionError = message.error;
    const source: etcdLeader.Election | etcdLeader.LeaderObserver = message.source;
    void [error, source];
  };
  void [onState, onRenewal, onRetry, onError];

  const reason: unknown = new AbortController().signal.reason;
  if (reason instanceof etcdLeader.LeadershipLostError) {
    const lost: Error = reason;
    void lost;
  }
  const stopped: etcdLeader.LeadershipLostError = new etcdLeader.ElectionStoppedError("stopped");
  const expired: etcdLeader.LeadershipLostError = new etcdLeader.LeaseExpiredError("expired");
  const removed: etcdLeader.LeadershipLostError = new etcdLeader.MembershipRemovedError("removed");
  void [stopped, expired, removed];
}

/** The NATS entry: @nats-io/kv's bucket fits, and the election is the same Election. Compiled, never called. */
async function natsUsage(kv: KV, nc: NatsConnection): Promise<etcdLeader.Election> {
  const options: NatsElectionOptions = { stepDownMargin: 500 };
  const election = await natsLeader(kv, "billing", "worker-1", options);
  await natsLeader({ bucket: kv, key: "billing", name: "worker-2", refreshInterval: 1_000 });
  const leader = await natsLeader.whoLeads(kv, "billing");
  expectType<Equal<typeof leader, etcdLeader.Leader | undefined>>();
  const observer: etcdLeader.LeaderObserver = natsLeader.observe(kv, "billing");
  void observer;
  // @ts-expect-error a connection is no bucket
  await natsLeader(nc, "billing", "worker-3");
  return election;
}

/** Many elections on one etcd v3 session. Compiled, never called with a live client. */
async function sessionUsage(client: unknown): Promise<void> {
  const options: etcdLeader.SessionOptions = { ttl: 10, refreshInterval: 3_000 };
  const session: etcdLeader.Session = etcdLeader.session(client, options);
  const perElection: etcdLeader.SessionElectionOptions = { stepDownMargin: 2_500, retryMaxDelay: 1_000 };
  const shard = session.election("/jobs/shard-1", "worker-1", perElection);
  expectType<Equal<typeof shard, etcdLeader.Election>>();
  shard.on("elected", (token) => expectType<Equal<typeof token, number>>());
  const done: number = await shard.start().whileLeading(async ({ signal }) => (signal.aborted ? 0 : 1));
  void done;
  const lease: string | undefined = session.leaseId;
  void lease;
  const closed: Promise<void> = session.close();
  void closed;
  {
    await using scoped = etcdLeader.session(client);
    scoped.election("/jobs/shard-2", "worker-1").start();
  }
  // @ts-expect-error the lease's timing is the session's: an election on it takes no ttl
  session.election("/jobs/shard-3", "worker-1", { ttl: 5 });
  // @ts-expect-error nor its own refresh interval
  session.election("/jobs/shard-3", "worker-1", { refreshInterval: 1_000 });
  // @ts-expect-error a session has no v2 options: it is etcd v3's
  etcdLeader.session(client, { v2: { watchRearmInterval: 1_000 } });
  // @ts-expect-error a session takes its options as an object
  etcdLeader.session(client, 10);
  const error: etcdLeader.SessionClosedError = new etcdLeader.SessionClosedError();
  void error;
}

/** Health probes: the verdicts are typed, and only the known readiness modes and a number bound pass. */
function healthUsage(election: etcdLeader.Election): void {
  const health = election.health({ readiness: "leader", unhealthyAfter: 30_000 });
  expectType<Equal<typeof health.live.ok, boolean>>();
  expectType<Equal<typeof health.ready.reason, string>>();
  expectType<Equal<typeof health.state, etcdLeader.ElectionState>>();
  expectType<Equal<typeof health.fencingToken, number | undefined>>();
  // @ts-expect-error readiness is "member" or "leader"
  election.health({ readiness: "follower" });
  // @ts-expect-error the bound is milliseconds, a number
  election.health({ unhealthyAfter: "30s" });
  const handler: etcdLeader.HealthRequestHandler = etcdLeader.healthHandler([election], { readiness: "member" });
  etcdLeader.healthHandler(() => [election]);
  // @ts-expect-error the handler answers for elections
  etcdLeader.healthHandler("election");
  void handler;
}

/** Who is in line, yield, fenced writes and metrics: typed results, and the options they take. */
async function operatorUsage(election: etcdLeader.Election, client: unknown): Promise<void> {
  const line = await election.candidates({ signal: AbortSignal.timeout(1_000) });
  expectType<Equal<typeof line.scope, "line" | "leader">>();
  expectType<Equal<typeof line.members, readonly etcdLeader.Leader[]>>();
  const again: etcdLeader.Candidates = await etcdLeader.candidates(client, "/k", { requestTimeout: 1_000 });
  void again;
  // @ts-expect-error candidates() takes options, not a key
  void election.candidates("/k");
  const yielded: Promise<void> = election.yield({ signal: AbortSignal.timeout(5_000) });
  void yielded;
  await election.whileLeading(async ({ fenced }) => {
    expectType<Equal<typeof fenced, ((...operations: unknown[]) => Promise<etcdLeader.FencedWriteResult>) | undefined>>();
    const result = await fenced?.({ request_put: {} });
    expectType<Equal<typeof result, etcdLeader.FencedWriteResult | undefined>>();
  });
  const metrics: etcdLeader.ElectionMetrics = etcdLeader.metrics({ prefix: "svc_" });
  metrics.close();
  // @ts-expect-error metrics' prefix is a string
  etcdLeader.metrics({ prefix: 1 });
  etcdLeader(client, "/k", "n", { drainTimeout: 0 });
  // @ts-expect-error drainTimeout is milliseconds, a number
  etcdLeader(client, "/k", "n", { drainTimeout: "10s" });
  const error: etcdLeader.LeadershipYieldedError = new etcdLeader.LeadershipYieldedError("yielded");
  void error;
}

describe("types", () => {
  it("the typed names exist at run time, and an election is built without touching etcd", () => {
    assert.equal(typeof etcdLeader, "function");
    assert.equal(typeof etcdLeader.observe, "function");
    for (const name of [
      "Election", "LeaderObserver", "ElectionError", "MembershipLostError", "RequestTimeoutError", "LeaseExpiredError",
      "LeadershipLostError", "ElectionStoppedError", "MembershipRemovedError", "whoLeads", "etcd3Options",
      "session", "Session", "SessionClosedError", "healthHandler", "candidates", "metrics", "LeadershipYieldedError",
    ] as const) {
      assert.equal(typeof etcdLeader[name], "function", name);
    }
    // Nothing listens on port 9; nothing is sent before start().
    const election = etcdLeader(new Etcd("127.0.0.1:9"), "/k", "n", 5);
    assert.ok(election instanceof etcdLeader.Election);
    assert.equal(election.isRunning(), false);
    assert.equal(typeof typicalUsage, "function");
    assert.equal(typeof scopedUsage, "function");
    assert.equal(typeof natsUsage, "function");
    assert.equal(typeof sessionUsage, "function");
    assert.equal(typeof healthUsage, "function");
    assert.equal(typeof operatorUsage, "function");
    assert.equal(typeof election[Symbol.asyncDispose], "function");
    assert.equal(election.state, "stopped");
    assert.equal(typeof etcdLeader.channels.renewal, "string");
  });
});
