// The integration scenarios of etcd-leader 0.0.1 (its test/test-integration.js),
// step for step and assertion for assertion, run against the package as users
// get it: `require("etcd-leader")`, which resolves to the built dist/.
//
// Differences that only concern the harness:
// - mocha's `done` becomes a promise with mocha's 10 s timeout as deadline;
//   an assertion that fails inside an event listener fails the test at once
//   (it is caught and passed on, instead of being thrown into the emitter);
// - every member is stopped after each test so that the runner can exit;
// - the etcd server is the test's own, not localhost:4001.
import { describe, it, before, after, afterEach } from "node:test";
import assert from "node:assert/strict";
import { startEtcd, type EtcdCluster } from "../../kit/etcd-server";
import { exitOrFail, sleep } from "../../kit/waiting";
import etcdLeader = require("etcd-leader");

// eslint-disable-next-line @typescript-eslint/no-require-imports
const Etcd = require("node-etcd");

type Election = ReturnType<typeof etcdLeader>;

/** mocha's timeout for these tests in 0.0.1. */
const TIMEOUT = 10_000;

let server: EtcdCluster;
let etcd: unknown;
let started: Election[] = [];

before(async () => {
  server = await startEtcd();
  etcd = new Etcd(server.hostPorts);
});

after(async () => {
  await server?.close();
  exitOrFail();
});

afterEach(async () => {
  const members = started;
  started = [];
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error("leave() did not settle within 5 s")), 5_000);
  });
  try {
    await Promise.race([Promise.all(members.map((m) => m.leave())), deadline]);
  } finally {
    clearTimeout(timer);
  }
});

function leader(key: string, name: string, ttl: number): Election {
  const election = etcdLeader(etcd, key, name, ttl);
  started.push(election);
  return election;
}

/**
 * A mocha-style test body: resolves when `done()` is called, fails when a
 * guarded listener throws or after `TIMEOUT`. Like mocha, it also fails if
 * `done` is called twice or a listener throws after `done`: it keeps watching
 * for `settleMs` after `done` before it resolves.
 */
async function scenario(
  body: (done: () => void, guard: <A extends unknown[]>(listener: (...args: A) => void) => (...args: A) => void) => void,
  settleMs = 100,
): Promise<void> {
  let late: unknown;
  let finished = false;
  let doneCalls = 0;
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => fail(new Error(`timeout of ${TIMEOUT} ms exceeded`)), TIMEOUT);
    function fail(err: unknown): void {
      if (finished) {
        late ??= err;
        return;
      }
      finished = true;
      clearTimeout(timer);
      reject(err);
    }
    const done = () => {
      doneCalls += 1;
      if (doneCalls > 1) return fail(new Error("done() called multiple times"));
      if (finished) return;
      finished = true;
      clearTimeout(timer);
      resolve();
    };
    const guard = <A extends unknown[]>(listener: (...args: A) => void) => (...args: A) => {
      try {
        listener(...args);
      } catch (err) {
        fail(err);
      }
    };
    try {
      body(done, guard);
    } catch (err) {
      fail(err);
    }
  });
  await sleep(settleMs);
  if (late !== undefined) throw late;
}

describe("etcd-leader against a real etcd server", () => {
  it("acquires fresh leader lock", () =>
    scenario((done) => {
      const leader1 = leader("/test", "node1", 10).start();
      leader1.on("elected", () => {
        // Success.
        done();
      });
    }));

  it("fails leader lock over", () =>
    scenario((done, guard) => {
      const leader1 = leader("/testfailover", "node1", 1).start();
      const leader2 = leader("/testfailover", "node2", 1);

      leader1.on("elected", guard(() => {
        leader2.start();
        leader1.stop();
      }));

      leader2.on("elected", guard(() => {
        assert.equal(leader1.isLeader(), false);
        assert.equal(leader2.isLeader(), true);
        done();
      }));
    }));

  it("handles multiple members correctly", () =>
    scenario((done, guard) => {
      const leader1 = leader("/testmultiple", "node1", 1).start();
      const leader2 = leader("/testmultiple", "node2", 1);
      const leader3 = leader("/testmultiple", "node3", 1);

      leader1.on("elected", guard(() => {
        leader2.start();
        leader3.start();

        setTimeout(guard(() => {
          assert.equal(leader1.isLeader(), true);
          assert.equal(leader2.isLeader(), false);
          assert.equal(leader3.isLeader(), false);
          done();
        }), 1500);
      }));

      leader2.on("elected", guard(() => {
        throw new Error("leader2 should not have been elected.");
      }));

      leader3.on("elected", guard(() => {
        throw new Error("leader3 should not have been elected.");
      }));
    }));

  it("cleans up membership key on stop()", async () => {
    await scenario((done, guard) => {
      const leader1 = leader("/teststop", "node1", 100).start();
      const leader2 = leader("/teststop", "node2", 100);

      leader1.on("elected", guard(() => {
        leader2.start();

        // With a TTL of 100 s, node2 is elected within the timeout only if node1's key was deleted.
        leader2.on("elected", guard(() => {
          leader2.stop();

          setTimeout(done, 1000);
        }));

        leader1.stop();
      }));
    });
    // Beyond 0.0.1's test: both membership keys are gone.
    const listing = await new Promise<{ node?: { nodes?: unknown[] } }>((resolve, reject) =>
      (etcd as { get: Function }).get("/teststop", (err: Error | null, body: { node?: { nodes?: unknown[] } }) =>
        err ? reject(err) : resolve(body)),
    );
    assert.deepEqual(listing.node?.nodes ?? [], []);
  });

  it("does not trigger spurious elected events when stopping", () =>
    scenario((done, guard) => {
      const leader1 = leader("/testspurious", "node1", 1).start();

      let electedCalled = false;
      leader1.on("elected", guard(() => {
        assert.equal(electedCalled, false);
        electedCalled = true;
        leader1.on("unelected", guard(done));
        leader1.stop();
      }));
    }, 500)); // a second `elected` or `unelected` in the half second after would fail the test

  it("emits leader events on non leaders", () =>
    scenario((done, guard) => {
      const leader1 = leader("/testleader", "node1", 1).start();
      const leader2 = leader("/testleader", "node2", 1);

      leader1.on("elected", guard(() => {
        leader2.start();

        leader2.on("leader", guard((node: string) => {
          assert.deepEqual(node, "node1");
          assert.deepEqual(node, leader2.currentLeader());
          done();
        }));
      }));
    }));

  it("emits change of leader events on non leaders", () =>
    scenario((done, guard) => {
      const leader1 = leader("/testleaderchange", "node1", 1).start();
      const leader2 = leader("/testleaderchange", "node2", 1);
      const leader3 = leader("/testleaderchange", "node3", 1);

      leader1.on("elected", guard(() => {
        leader2.start();
      }));

      leader2.on("leader", guard(() => {
        leader3.start();
      }));

      let leader3LeaderCalled = false;
      leader3.on("leader", guard((node: string) => {
        // First call should be node1, second call should be node2.
        if (!leader3LeaderCalled) {
          assert.deepEqual(node, "node1");
          leader3LeaderCalled = true;
          leader1.stop();
        } else {
          assert.deepEqual(node, "node2");
          done();
        }
      }));
    }));
});
