// Leadership as a scope, against a real etcd on both APIs: whileLeading()
// runs a routine only while leading and aborts its signal when the term ends,
// whenElected() waits and leaves nothing behind when called off, whoLeads()
// reads the leader once, and the one-object factory, start({ signal }),
// `await using` and the state getter. The timing of the abort against a
// successor in another process is measured through the command line, whose
// run is whileLeading(): test/cli/cli-partition.test.ts and cli-freeze.test.ts.
import assert from "node:assert/strict";
import { getEventListeners } from "node:events";
import { afterEach, describe, it } from "node:test";
import etcdLeader = require("../../src/index");
import { MembershipLostError } from "../../src/contract/errors";
import { EtcdAdmin } from "../faults/etcd-admin";
import { BACKENDS } from "../faults/types";
import { exitWhenDone, useEtcd, useStoreClients } from "../kit/hooks";
import { deferred, waitFor, withDeadline } from "../kit/waiting";

type Election = etcdLeader.Election;

const TTL = 2;
/** Generous: a TTL-2 election settles in well under a second, on a loaded 2-core machine in a few. */
const BOUND_MS = 15_000;

const etcd = useEtcd();
const clients = useStoreClients(etcd);
exitWhenDone();
const elections = new Set<Election>();
let keys = 0;

afterEach(async () => {
  await Promise.all([...elections].map((e) => e.leave()));
  elections.clear();
});

/** For assert.rejects: an AbortError (a DOMException, as fetch() gives) whose `cause` passes `cause`. */
function isAbortError(cause: (cause: unknown) => boolean) {
  return (err: unknown) => {
    assert.ok(err instanceof DOMException, `expected an AbortError DOMException, got ${String(err)}`);
    assert.equal(err.name, "AbortError");
    assert.ok(cause((err as { cause?: unknown }).cause), `unexpected cause: ${String((err as { cause?: unknown }).cause)}`);
    return true;
  };
}

for (const api of BACKENDS) {
  describe(`leadership as a scope, etcd ${api} API`, () => {
    const admin = () => new EtcdAdmin(api, etcd.hostPorts);
    const client = () => clients.create(api);
    const uniqueKey = (label: string) => `/lead-scope-${api}/${label}-${++keys}`;

    function member(key: string, name: string): Election {
      const election = etcdLeader({ client: client(), key, name, ttl: TTL });
      elections.add(election);
      return election;
    }

    async function leading(election: Election): Promise<void> {
      await waitFor(`${election.name} to lead`, BOUND_MS, () => election.isLeader());
    }

    async function lineNames(key: string): Promise<string[]> {
      return (await admin().line(key)).map((entry) => entry.name);
    }

    describe("whileLeading()", () => {
      it("runs the routine with this term's token once elected, resolves with its result, and leaves the election it joined", async () => {
        const key = uniqueKey("result");
        const election = member(key, "a");
        let seen: { token: number; fencing: number | undefined; aborted: boolean; isLeader: boolean; remaining: number } | undefined;
        const result = await withDeadline(
          election.whileLeading(async (term) => {
            seen = {
              token: term.token,
              fencing: election.fencingToken(),
              aborted: term.signal.aborted,
              isLeader: term.isLeader(),
              remaining: term.leaseRemaining(),
            };
            return "done";
          }),
          BOUND_MS,
          "whileLeading",
        );
        assert.equal(result, "done");
        assert.ok(seen);
        assert.equal(seen.token, seen.fencing);
        assert.equal(seen.aborted, false);
        assert.equal(seen.isLeader, true);
        assert.ok(seen.remaining > 0, `leaseRemaining ${seen.remaining}`);
        assert.equal(election.isRunning(), false, "the election whileLeading() joined is left");
        assert.deepEqual(await lineNames(key), []);
      });

      it("leaves an election that was running before it was called running, and leading", async () => {
        const key = uniqueKey("keeps-running");
        const election = member(key, "a").start();
        const { signal } = new AbortController();
        const result = await withDeadline(election.whileLeading(({ token }) => token, { signal }), BOUND_MS, "whileLeading");
        assert.equal(result, election.fencingToken());
        assert.equal(getEventListeners(signal, "abort").length, 0, "no listener left on the caller's signal");
        assert.equal(election.isRunning(), true);
        assert.equal(election.isLeader(), true);
        assert.deepEqual(await lineNames(key), ["a"]);
      });

      it("stop() aborts the routine's signal with an ElectionStoppedError before `unelected`, and rejects with an AbortError once the routine settled", async () => {
        const key = uniqueKey("stop");
        const election = member(key, "a");
        const started = deferred<AbortSignal>();
        let abortedBeforeUnelected: boolean | undefined;
        const scope = election.whileLeading(async ({ signal }) => {
          started.resolve(signal);
          await new Promise((resolve) => signal.addEventListener("abort", resolve));
          throw signal.reason;
        });
        const signal = await withDeadline(started.promise, BOUND_MS, "routine start");
        election.once("unelected", () => (abortedBeforeUnelected = signal.aborted));
        election.stop();
        await assert.rejects(withDeadline(scope, BOUND_MS, "whileLeading"), isAbortError((cause) => cause instanceof etcdLeader.ElectionStoppedError));
        assert.ok(signal.reason instanceof etcdLeader.ElectionStoppedError, `reason ${String(signal.reason)}`);
        assert.ok(signal.reason instanceof etcdLeader.LeadershipLostError);
        assert.equal(abortedBeforeUnelected, true, "the signal had aborted when `unelected` was emitted");
      });

      it("a membership deleted from outside aborts with a MembershipRemovedError; onLoss \"reject\" rejects with it", async () => {
        const key = uniqueKey("lost-reject");
        const election = member(key, "a");
        const started = deferred<AbortSignal>();
        const scope = election.whileLeading(
          async ({ signal }) => {
            started.resolve(signal);
            await new Promise((resolve) => signal.addEventListener("abort", resolve));
          },
          { onLoss: "reject" },
        );
        // The rejection can land before deleteKey() returns: handled from here on, checked below.
        scope.catch(() => undefined);
        const signal = await withDeadline(started.promise, BOUND_MS, "routine start");
        const [entry] = await admin().line(key);
        await admin().deleteKey(entry!.key);
        await assert.rejects(withDeadline(scope, BOUND_MS, "whileLeading"), (err: unknown) => {
          assert.ok(err instanceof etcdLeader.MembershipRemovedError, `got ${String(err)}`);
          assert.ok(err.cause instanceof MembershipLostError);
          return true;
        });
        assert.equal(signal.reason, await scope.catch((err: unknown) => err));
        assert.equal(election.isRunning(), false);
      });

      it("by default runs the routine again in the next term after a lost membership, with a larger token", async () => {
        const key = uniqueKey("lost-rerun");
        const election = member(key, "a");
        const runs: Array<{ token: number; reason?: unknown }> = [];
        const firstStarted = deferred();
        const scope = election.whileLeading(async ({ signal, token }) => {
          const run: { token: number; reason?: unknown } = { token };
          runs.push(run);
          if (runs.length > 1) return "second run";
          firstStarted.resolve();
          await new Promise((resolve) => signal.addEventListener("abort", resolve));
          run.reason = signal.reason;
          return "first run, after its term ended";
        });
        await withDeadline(firstStarted.promise, BOUND_MS, "first run");
        const [entry] = await admin().line(key);
        await admin().deleteKey(entry!.key);
        assert.equal(await withDeadline(scope, BOUND_MS, "whileLeading"), "second run");
        assert.equal(runs.length, 2);
        assert.ok(runs[0]!.reason instanceof etcdLeader.MembershipRemovedError, `reason ${String(runs[0]!.reason)}`);
        assert.ok(runs[1]!.token > runs[0]!.token, `tokens ${runs[0]!.token} then ${runs[1]!.token}`);
      });

      it("a routine that throws while leading rejects with its own error, and the election it joined is left", async () => {
        const key = uniqueKey("throws");
        const election = member(key, "a");
        await assert.rejects(
          withDeadline(election.whileLeading(() => Promise.reject(new Error("routine failed"))), BOUND_MS, "whileLeading"),
          /routine failed/,
        );
        assert.equal(election.isRunning(), false);
        assert.deepEqual(await lineNames(key), []);
      });

      it("a routine that ignores its signal: isLeader() turns false, a successor leads, and the next run waits until it returns", async () => {
        const key = uniqueKey("ignores");
        const a = member(key, "a");
        const runs: Array<{ token: number; signal: AbortSignal; isLeader: () => boolean }> = [];
        const firstStarted = deferred();
        const finishFirst = deferred();
        const scope = a.whileLeading(async (term) => {
          runs.push({ token: term.token, signal: term.signal, isLeader: () => term.isLeader() });
          if (runs.length > 1) return "second run";
          firstStarted.resolve();
          await finishFirst.promise; // ignores term.signal
          return "first run";
        });
        await withDeadline(firstStarted.promise, BOUND_MS, "first run");
        const b = member(key, "b").start();
        await waitFor("b in line", BOUND_MS, async () => (await lineNames(key)).length === 2);
        const [entry] = await admin().line(key);
        await admin().deleteKey(entry!.key);
        await leading(b);
        const first = runs[0]!;
        assert.equal(first.signal.aborted, true);
        assert.ok(first.signal.reason instanceof etcdLeader.MembershipRemovedError);
        assert.equal(first.isLeader(), false);

        // a rejoined behind b; once b goes, a leads again while its first run still runs.
        await waitFor("a back in line", BOUND_MS, async () => (await lineNames(key)).join() === "b,a");
        await b.leave();
        await leading(a);
        await new Promise((resolve) => setTimeout(resolve, 200));
        assert.equal(runs.length, 1, "no second run while the first has not returned");
        assert.equal(first.isLeader(), false, "the first run's term stays over in the next term");

        finishFirst.resolve();
        assert.equal(await withDeadline(scope, BOUND_MS, "whileLeading"), "second run");
        assert.equal(runs.length, 2);
        assert.equal(runs[1]!.token, a.fencingToken() ?? runs[1]!.token);
        assert.ok(runs[1]!.token > first.token);
      });

      it("its own signal, while waiting, rejects with an AbortError carrying the reason, and the membership it made is gone", async () => {
        const key = uniqueKey("abort-waiting");
        const b = member(key, "b").start();
        await leading(b);
        const a = member(key, "a");
        const controller = new AbortController();
        let ran = false;
        const scope = a.whileLeading(() => void (ran = true), { signal: controller.signal });
        await waitFor("a in line", BOUND_MS, async () => (await lineNames(key)).join() === "b,a");
        const reason = new Error("shutting down");
        controller.abort(reason);
        await assert.rejects(withDeadline(scope, BOUND_MS, "whileLeading"), isAbortError((cause) => cause === reason));
        assert.equal(ran, false);
        assert.equal(a.isRunning(), false);
        assert.deepEqual(await lineNames(key), ["b"]);
      });

      it("its own signal, while the routine runs, aborts the routine's signal with that reason", async () => {
        const key = uniqueKey("abort-running");
        const a = member(key, "a");
        const controller = new AbortController();
        const started = deferred<AbortSignal>();
        const scope = a.whileLeading(
          async ({ signal }) => {
            started.resolve(signal);
            await new Promise((resolve) => signal.addEventListener("abort", resolve));
            return "ignored";
          },
          { signal: controller.signal },
        );
        const signal = await withDeadline(started.promise, BOUND_MS, "routine start");
        const reason = new Error("shutting down");
        controller.abort(reason);
        assert.equal(signal.reason, reason);
        await assert.rejects(withDeadline(scope, BOUND_MS, "whileLeading"), isAbortError((cause) => cause === reason));
        assert.deepEqual(await lineNames(key), []);
        assert.equal(getEventListeners(controller.signal, "abort").length, 0, "no listener left on the caller's signal");
      });

      it("refuses a bad onLoss, naming the option", async () => {
        const a = member(uniqueKey("bad-option"), "a");
        await assert.rejects(a.whileLeading(() => 1, { onLoss: "retry" as etcdLeader.OnLoss }), /onLoss must be "rerun" or "reject", got "retry"/);
        assert.equal(a.isRunning(), false);
      });
    });

    describe("whenElected()", () => {
      it("resolves with the fencing token once elected, and at once while leading", async () => {
        const key = uniqueKey("elected");
        const a = member(key, "a");
        const { signal } = new AbortController();
        const token = await withDeadline(a.whenElected({ signal }), BOUND_MS, "whenElected");
        assert.equal(token, a.fencingToken());
        assert.equal(await a.whenElected({ signal }), token);
        assert.equal(getEventListeners(signal, "abort").length, 0, "no listener left on the caller's signal");
        assert.equal(a.isRunning(), true, "the member stays in the election it was elected in");
      });

      it("an aborted wait rejects with an AbortError and takes back the membership it made", async () => {
        const key = uniqueKey("wait-abort");
        const b = member(key, "b").start();
        await leading(b);
        const a = member(key, "a");
        const controller = new AbortController();
        const waiting = a.whenElected({ signal: controller.signal });
        await waitFor("a in line", BOUND_MS, async () => (await lineNames(key)).join() === "b,a");
        controller.abort();
        await assert.rejects(withDeadline(waiting, BOUND_MS, "whenElected"), isAbortError((cause) => (cause as Error).name === "AbortError"));
        assert.equal(a.isRunning(), false);
        assert.deepEqual(await lineNames(key), ["b"], "the membership is gone by the time the wait rejected");
      });

      it("rejects with an AbortError whose cause is an ElectionStoppedError when the election stops", async () => {
        const key = uniqueKey("wait-stop");
        const b = member(key, "b").start();
        await leading(b);
        const a = member(key, "a").start();
        const waiting = a.whenElected();
        a.stop();
        await assert.rejects(withDeadline(waiting, BOUND_MS, "whenElected"), isAbortError((cause) => cause instanceof etcdLeader.ElectionStoppedError));
      });

      it("an already aborted signal rejects without joining", async () => {
        const a = member(uniqueKey("wait-pre-aborted"), "a");
        await assert.rejects(a.whenElected({ signal: AbortSignal.abort() }), isAbortError(() => true));
        assert.equal(a.isRunning(), false);
      });
    });

    describe("whoLeads()", () => {
      it("reads the leader's name and fencing token once, without joining; undefined while nobody leads", async () => {
        const key = uniqueKey("who");
        assert.equal(await etcdLeader.whoLeads(client(), key), undefined);
        const b = member(key, "b").start();
        await leading(b);
        member(key, "c").start();
        await waitFor("c in line", BOUND_MS, async () => (await lineNames(key)).length === 2);
        assert.deepEqual(await etcdLeader.whoLeads(client(), key), { name: "b", token: b.fencingToken() });
        assert.deepEqual(await etcdLeader.whoLeads({ client: client(), key }), { name: "b", token: b.fencingToken() });
        assert.deepEqual(await lineNames(key), ["b", "c"], "reading joined nobody");
        await assert.rejects(etcdLeader.whoLeads(client(), key, { signal: AbortSignal.abort() }), isAbortError(() => true));
      });
    });

    describe("construction, start({ signal }), await using, state", () => {
      it("etcdLeader({ client, key, name, ttl, ...options }) makes a member like the four-argument call", async () => {
        const key = uniqueKey("settings");
        const election = etcdLeader({ client: client(), key, name: "a", ttl: TTL, refreshInterval: 500 });
        elections.add(election);
        assert.ok(election instanceof etcdLeader.Election);
        assert.equal(election.name, "a");
        await withDeadline(election.whenElected(), BOUND_MS, "elected");
        assert.deepEqual(await lineNames(key), ["a"]);
        assert.throws(() => etcdLeader({ client: client(), key, name: "" }), /node name not specified/);
        assert.throws(() => etcdLeader({ client: client(), key, name: "a", ttl: 0 }), /ttl must be a positive whole number/);
      });

      it("start({ signal }) stops the election when the signal aborts", async () => {
        const key = uniqueKey("start-signal");
        const controller = new AbortController();
        const a = member(key, "a").start({ signal: controller.signal });
        await leading(a);
        controller.abort();
        assert.equal(a.isRunning(), false);
        assert.equal(a.isLeader(), false);
        await waitFor("the membership to go", BOUND_MS, async () => (await lineNames(key)).length === 0);
        assert.equal(member(key, "b").start({ signal: AbortSignal.abort() }).isRunning(), false);
      });

      it("`await using` leaves the election at the end of the block", async () => {
        const key = uniqueKey("await-using");
        {
          await using election = member(key, "a").start();
          await leading(election);
          assert.deepEqual(await lineNames(key), ["a"]);
        }
        assert.deepEqual(await lineNames(key), []);
      });

      it("state goes stopped, joining, following, leading, stopped; lastRenewedAt moves with each renewal", async () => {
        const key = uniqueKey("state");
        const b = member(key, "b").start();
        await leading(b);
        const a = member(key, "a");
        assert.equal(a.state, "stopped");
        assert.equal(a.lastRenewedAt, undefined);
        a.start();
        assert.equal(a.state, "joining");
        await waitFor("a following", BOUND_MS, () => a.state === "following");
        const joinedAt = a.lastRenewedAt;
        assert.ok(joinedAt !== undefined && Math.abs(Date.now() - joinedAt) < BOUND_MS);
        await waitFor("a renewal", BOUND_MS, () => a.lastRenewedAt! > joinedAt);
        assert.equal(b.state, "leading");
        await b.leave();
        await waitFor("a leading", BOUND_MS, () => a.state === "leading");
        assert.equal(a.isLeader(), true);
        a.stop();
        assert.equal(a.state, "stopped");
      });

      it("state is backing-off while etcd cannot be reached", async () => {
        // Nothing listens on port 9.
        const a = etcdLeader({ client: clients.create(api, ["127.0.0.1:9"]), key: uniqueKey("unreachable"), name: "a", ttl: TTL });
        elections.add(a);
        a.on("error", () => undefined);
        a.start();
        await waitFor("backing off", BOUND_MS, () => a.state === "backing-off");
        a.stop();
      });
    });
  });
}
