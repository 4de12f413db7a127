// The renewals of an etcd v3 session's members, on a fake clock and a fake
// port: the session sends one keep-alive per refresh interval and tells every
// member on its lease; a failure reaches them all and is tried again soon; a
// lease etcd lost is every member's lost membership; a member whose key no
// watch covers renews through its backend, which reads the key. The real
// server's side (one LeaseKeepAlive per refresh interval for 200 elections, a
// session cut off or revoked) is test/stores/etcd-v3/etcd-v3-session.test.ts.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { Renewed } from "../../src/contract/backend";
import { isMembershipLost } from "../../src/contract/errors";
import type { RenewalListener } from "../../src/election/renewal";
import { MembershipState, remember, type V3Membership } from "../../src/stores/etcd-v3/membership";
import type { SessionPort } from "../../src/stores/etcd-v3/port";
import { LeaseSession } from "../../src/stores/etcd-v3/session/lease-session";
import { SessionRenewal, type SessionRenewalSetting } from "../../src/stores/etcd-v3/session/session-renewal";
import { FakeClock } from "../kit/fake-clock";

const TIMING = { ttlSeconds: 10, refreshInterval: 5_000, requestTimeout: 2_000, retryInitialDelay: 100, retryMaxDelay: 5_000 };
const LEASE = "7587869834";

/** A port that grants one lease and answers keep-alives as `keepAlive` says (a TTL, or an error). */
function fakePort(clock: FakeClock) {
  const keepAlives: number[] = [];
  const port = {
    keepAliveAnswer: (): number | Error => 10,
    async grantLease(ttlSeconds: number) {
      return { id: LEASE, ttlSeconds };
    },
    awaitAnswer<T>(_what: string, answer: Promise<T>) {
      return answer;
    },
    async keepAlive() {
      keepAlives.push(clock.now());
      const answer = port.keepAliveAnswer();
      if (answer instanceof Error) throw answer;
      return answer;
    },
    abandonLease() {},
    async revokeLease() {},
  };
  return { port, keepAlives };
}

interface Heard {
  renewed: number[];
  failed: string[];
  retryDelays: number[];
  recovered: number;
  lost: unknown[];
}

function member(session: LeaseSession, clock: FakeClock, options: { keyWatched?: () => boolean; renewAlone?: () => Promise<Renewed | void> } = {}) {
  const heard: Heard = { renewed: [], failed: [], retryDelays: [], recovered: 0, lost: [] };
  const listener: RenewalListener = {
    renewed: (at) => heard.renewed.push(at),
    failed: (error) => heard.failed.push((error as Error).message),
    retrying: (_error, _attempt, delayMs) => heard.retryDelays.push(delayMs),
    recovered: () => heard.recovered++,
    lost: (error) => heard.lost.push(error),
  };
  const setting: SessionRenewalSetting = { ...TIMING, clock };
  const membership: V3Membership = { id: `e/${LEASE}`, token: 5, leaseId: LEASE };
  const keyWatched = options.keyWatched ?? (() => true);
  const state = new MembershipState(5);
  state.watchKey({}, keyWatched);
  remember(membership, state);
  const renewAlone = options.renewAlone ?? (async () => ({ sentAt: clock.now() }));
  const renewal = new SessionRenewal(session, membership, { renew: () => renewAlone() }, listener, setting);
  return { renewal, heard };
}

async function joined(clock: FakeClock) {
  const { port, keepAlives } = fakePort(clock);
  const session = new LeaseSession(port as unknown as SessionPort, TIMING, clock);
  const { sentAt } = await session.acquire();
  return { session, port, keepAlives, grantedAt: sentAt };
}

describe("renewals of an etcd session's members", { timeout: 10_000 }, () => {
  it("one keep-alive per refresh interval, whatever the number of members, and every member hears its send time", async () => {
    const clock = new FakeClock();
    const { session, keepAlives, grantedAt } = await joined(clock);
    const members = [1, 2, 3].map(() => member(session, clock));
    for (const m of members) m.renewal.start(grantedAt);
    await clock.advance(4 * TIMING.refreshInterval + 10);
    assert.deepEqual(keepAlives, [1, 2, 3, 4].map((i) => grantedAt + i * TIMING.refreshInterval));
    for (const m of members) {
      assert.deepEqual(m.heard.renewed, keepAlives);
      assert.equal(m.renewal.lastConfirmedSentAt, keepAlives.at(-1));
    }
    for (const m of members) m.renewal.stop();
    await clock.advance(3 * TIMING.refreshInterval);
    assert.equal(keepAlives.length, 4, "no member left: no keep-alive sent");
    assert.equal(clock.pendingTimers, 0);
  });

  it("a failed keep-alive reaches every member and is tried again within a quarter of the refresh interval; the next success says recovered", async () => {
    const clock = new FakeClock();
    const { session, port, keepAlives, grantedAt } = await joined(clock);
    const members = [1, 2].map(() => member(session, clock));
    for (const m of members) m.renewal.start(grantedAt);
    port.keepAliveAnswer = () => new Error("etcd did not answer");
    await clock.advance(TIMING.refreshInterval);
    assert.equal(keepAlives.length, 1);
    for (const m of members) {
      assert.deepEqual(m.heard.failed, ["etcd did not answer"]);
      assert.equal(m.heard.retryDelays.length, 1);
      assert.ok(m.heard.retryDelays[0]! <= TIMING.refreshInterval / 4, `retried after ${m.heard.retryDelays[0]} ms`);
    }
    port.keepAliveAnswer = () => 10;
    await clock.advance(TIMING.refreshInterval / 4);
    assert.equal(keepAlives.length, 2, "tried again");
    for (const m of members) {
      assert.deepEqual(m.heard.renewed, [keepAlives[1]]);
      assert.equal(m.heard.recovered, 1);
    }
  });

  it("a lease etcd no longer has (a keep-alive answered with TTL 0) is every member's lost membership, and their renewals end", async () => {
    const clock = new FakeClock();
    const { session, port, keepAlives, grantedAt } = await joined(clock);
    const members = [1, 2].map(() => member(session, clock));
    for (const m of members) m.renewal.start(grantedAt);
    port.keepAliveAnswer = () => 0;
    await clock.advance(TIMING.refreshInterval);
    for (const m of members) {
      assert.equal(m.heard.lost.length, 1);
      assert.ok(isMembershipLost(m.heard.lost[0]));
      assert.deepEqual(m.heard.renewed, []);
    }
    await clock.advance(3 * TIMING.refreshInterval);
    assert.equal(keepAlives.length, 1, "nothing left to renew");
  });

  it("a member whose key no watch covers renews through its backend (which reads the key), again after a back-off if that fails", async () => {
    const clock = new FakeClock();
    const { session, grantedAt } = await joined(clock);
    let watched = false;
    const alone: number[] = [];
    let failNext = true;
    const m = member(session, clock, {
      keyWatched: () => watched,
      renewAlone: async () => {
        alone.push(clock.now());
        if (failNext) {
          failNext = false;
          throw new Error("the read of the key failed");
        }
        return { sentAt: clock.now() };
      },
    });
    const together = member(session, clock);
    m.renewal.start(grantedAt);
    together.renewal.start(grantedAt);
    await clock.advance(TIMING.refreshInterval);
    assert.equal(alone.length, 1, "renewed alone when the session's keep-alive came");
    assert.deepEqual(m.heard.renewed, [], "the keep-alive alone is no renewal of an unwatched key");
    assert.deepEqual(m.heard.failed, ["the read of the key failed"]);
    assert.equal(together.heard.renewed.length, 1, "a member whose key is watched is renewed by the keep-alive");
    await clock.advance(TIMING.refreshInterval / 4);
    assert.equal(alone.length, 2, "tried again after the back-off");
    assert.deepEqual(m.heard.renewed, [alone[1]]);
    watched = true;
    await clock.advance(TIMING.refreshInterval);
    assert.equal(alone.length, 2, "watched now: the session's keep-alive renews it");
    assert.equal(m.heard.renewed.length, 2);
  });
});
