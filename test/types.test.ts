// Compile-time checks of the published types (dist/cjs/index.d.ts, reached
// through the package name as users reach it). `tsc --noEmit` over test/ fails
// if a listener's parameter type changes, or if a `@ts-expect-error` below
// stops being an error. At run time this file only checks that the same
// names exist; it needs no etcd and never starts an election.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import etcdLeader = require("etcd-leader");

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

describe("types", () => {
  it("the typed names exist at run time, and an election is built without touching etcd", () => {
    assert.equal(typeof etcdLeader, "function");
    assert.equal(typeof etcdLeader.observe, "function");
    for (const name of ["Election", "LeaderObserver", "ElectionError", "MembershipLostError", "RequestTimeoutError", "LeaseExpiredError"] as const) {
      assert.equal(typeof etcdLeader[name], "function", name);
    }
    // Nothing listens on port 9; nothing is sent before start().
    const election = etcdLeader(new Etcd("127.0.0.1:9"), "/k", "n", 5);
    assert.ok(election instanceof etcdLeader.Election);
    assert.equal(election.isRunning(), false);
    assert.equal(typeof typicalUsage, "function");
  });
});
