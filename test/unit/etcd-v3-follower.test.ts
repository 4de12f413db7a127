// One wait of a v3 follower (src/stores/etcd-v3/follower.ts), on an etcd in
// memory behind the recipe's port: who it names as each older member goes,
// when it takes the turn and when it gives the membership up, when it reads
// and when it arms its watches.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { Leader } from "../../src/contract/backend";
import { MembershipLostError } from "../../src/contract/errors";
import { TurnQueue } from "../../src/util/turns";
import { Follower, type WaitOutcome } from "../../src/stores/etcd-v3/follower";
import { MemberKeys } from "../../src/stores/etcd-v3/member-keys";
import { MembershipState, type V3Membership } from "../../src/stores/etcd-v3/membership";
import { LINE_END_MEMBERS, LineReader } from "../../src/stores/etcd-v3/place-in-line";
import { EtcdV3Store } from "../sim/stores/etcd-v3";

const ELECTION = "/election";
/** Lease IDs as one etcd member grants them: its ID in the top bits, then a count. */
const FIRST_LEASE = 0x694d7f0a1b2c3d00n;

interface Line {
  etcd: EtcdV3Store;
  keys: string[];
  ours: V3Membership;
}

/** `names` joined in that order, then ours, last. */
function lineOf(names: string[]): Line {
  const etcd = new EtcdV3Store();
  const keys = names.map((_, i) => `${ELECTION}/${(FIRST_LEASE + BigInt(i + 1)).toString(16)}`);
  keys.forEach((key, i) => etcd.put({ [key]: names[i]! }));
  const ourKey = `${ELECTION}/${(FIRST_LEASE + BigInt(names.length + 1)).toString(16)}`;
  const token = etcd.put({ [ourKey]: "ours" });
  return { etcd, keys, ours: { id: ourKey, token, leaseId: String(FIRST_LEASE + BigInt(names.length + 1)) } };
}

interface Waiting {
  /** Each leader the follower named, by name. */
  named: Array<string | undefined>;
  /** The wait, started by start() (by the time following() returns, unless told to hold it). */
  outcome: Promise<WaitOutcome>;
  /** Range requests made since the follower listed the line. */
  reads: () => number;
  /** What the backend knows of our membership, where the follower hands its watch over. */
  state: MembershipState;
}

async function following(
  { etcd, ours }: Line,
  options: { turns?: TurnQueue; random?: () => number; beforeStart?: () => void; signal?: AbortSignal } = {},
): Promise<Waiting> {
  const signal = options.signal ?? AbortSignal.timeout(5_000);
  const keys = new MemberKeys(ELECTION);
  const reader = new LineReader(etcd, keys);
  const state = new MembershipState(ours.token);
  const place = await reader.placeInLine(ours, signal);
  assert.ok(place.ours && place.ahead, "a member waits behind others");
  const named: Array<string | undefined> = [];
  // As the backend does: a leader named again (a Proclaim replayed by a watch from before it) is not a change.
  let last: Leader | undefined;
  const onLeader = (leader: Leader | undefined) => {
    if (last && leader && last.token === leader.token && last.name === leader.name) return;
    last = leader;
    named.push(leader?.name);
  };
  const setting = { port: etcd, keys, reader, turns: options.turns ?? new TurnQueue(), random: options.random ?? (() => 0.5) };
  const follower = new Follower(setting, ours, state, place.ahead, onLeader, signal);
  const readsBefore = etcd.requests.range;
  options.beforeStart?.();
  const outcome = follower.untilNoneOlder();
  outcome.catch(() => undefined);
  return { named, outcome, reads: () => etcd.requests.range - readsBefore, state };
}

/** Lets the follower handle what it was sent: a few turns of the event loop. */
async function settle(): Promise<void> {
  for (let i = 0; i < 5; i++) await new Promise((resolve) => setImmediate(resolve));
}

describe("a v3 follower's wait", () => {
  it("names each leader in turn as the older members go, and takes the turn when the one before it goes, without a read", async () => {
    const line = lineOf(["a", "b", "c"]);
    const wait = await following(line);
    await settle();
    for (const [i, next] of [["b"], ["b", "c"]].entries()) {
      line.etcd.delete(line.keys[i]!);
      await settle();
      assert.deepEqual(wait.named, next);
    }
    line.etcd.delete(line.keys[2]!);
    assert.equal(await wait.outcome, "first");
    assert.equal(wait.reads(), 0);
  });

  it("gives the membership up when its key went in the same revision as the member before it", async () => {
    const line = lineOf(["a"]);
    const wait = await following(line);
    await settle();
    line.etcd.delete(line.keys[0]!, line.ours.id);
    await assert.rejects(wait.outcome, (err) => err instanceof MembershipLostError && /deleted with the member before it/.test(err.message));
  });

  it("gives the membership up when its key goes while it waits", async () => {
    const line = lineOf(["a", "b"]);
    const wait = await following(line);
    await settle();
    line.etcd.delete(line.ours.id);
    await assert.rejects(wait.outcome, (err) => err instanceof MembershipLostError && /deleted while waiting/.test(err.message));
  });

  it("passes over a member seen going while it was not the oldest, never naming it", async () => {
    const line = lineOf(["a", "b", "c", "d"]);
    const wait = await following(line);
    await settle();
    line.etcd.delete(line.keys[1]!);
    await settle();
    line.etcd.delete(line.keys[0]!);
    await settle();
    assert.deepEqual(wait.named, ["c"]);
    line.etcd.delete(line.keys[2]!);
    await settle();
    line.etcd.delete(line.keys[3]!);
    assert.equal(await wait.outcome, "first");
    assert.deepEqual(wait.named, ["c", "d"]);
  });

  it("names the leader by a value it put in place (etcd's Proclaim), and a member not yet leading by its own once it leads", async () => {
    const line = lineOf(["a", "b", "c"]);
    const wait = await following(line);
    await settle();
    // b is neither the leader nor the member just before ours: only the leader's watch sees its put.
    for (const [i, name] of ["a2", "b2", "c2"].entries()) line.etcd.put({ [line.keys[i]!]: name });
    await settle();
    assert.deepEqual(wait.named, ["a2"]);
    line.etcd.delete(line.keys[0]!);
    await settle();
    assert.deepEqual(wait.named, ["a2", "b2"]);
    line.etcd.delete(line.keys[1]!);
    await settle();
    assert.deepEqual(wait.named, ["a2", "b2", "c2"]);
    line.etcd.put({ [line.keys[2]!]: "c3" });
    await settle();
    assert.deepEqual(wait.named, ["a2", "b2", "c2", "c3"]);
  });

  it("arms its watches a turn of the queue after it starts, unless it is next in line", async () => {
    const turns: Array<() => void> = [];
    const queue = new TurnQueue((callback) => turns.push(callback));
    const behind = lineOf(["a", "b"]);
    await following(behind, { turns: queue });
    assert.equal(behind.etcd.requests.watch, 0, "no watch before its turn");
    turns.shift()!();
    await settle();
    assert.equal(behind.etcd.requests.watch, 2, "the line's and the leader's");

    const next = lineOf(["a"]);
    await following(next, { turns: queue });
    assert.equal(next.etcd.requests.watch, 1, "the line's watch, at once");
  });

  it("ends its wait as soon as its signal aborts, even while it waits for its turn of the queue", async () => {
    // The campaign waits on this recipe without a race against the signal (src/election/store-calls.ts).
    const queue = new TurnQueue(() => undefined); // a queue that never lets anyone through
    const controller = new AbortController();
    const wait = await following(lineOf(["a", "b"]), { turns: queue, signal: controller.signal });
    controller.abort(new Error("stopped"));
    await settle();
    let settled: unknown = "pending";
    wait.outcome.then((outcome) => (settled = outcome), (err: unknown) => (settled = err));
    await settle();
    assert.match(String(settled), /stopped/);
  });

  it("reads the oldest end of a long line again once as few members are left there as its random draw says", async () => {
    const names = Array.from({ length: 3 * LINE_END_MEMBERS }, (_, i) => `m${i}`);
    // Draws of 0 and 0.99: read again with 1 member left of the LINE_END_MEMBERS + 1 listed, or with REFILL_SPREAD = 4.
    for (const [draw, readAfter] of [
      [0, LINE_END_MEMBERS],
      [0.99, LINE_END_MEMBERS - 3],
    ] as const) {
      const line = lineOf(names);
      const wait = await following(line, { random: () => draw });
      await settle();
      const readsAfterEach: number[] = [];
      for (let i = 0; i < LINE_END_MEMBERS + 1; i++) {
        line.etcd.delete(line.keys[i]!);
        await settle();
        readsAfterEach.push(wait.reads());
      }
      assert.equal(readsAfterEach.indexOf(1) + 1, readAfter, `draw ${draw}: reads after each leader went: ${readsAfterEach.join(" ")}`);
      assert.equal(wait.reads(), 1, `draw ${draw}: reads after each leader went: ${readsAfterEach.join(" ")}`);
      assert.deepEqual(wait.named, names.slice(1, LINE_END_MEMBERS + 2));
    }
  });

  it("where etcd compacted the history its line watch starts from, reads its own key and the one before it, and watches again", async () => {
    const line = lineOf(["a"]);
    const wait = await following(line, { beforeStart: () => compactPast(line.etcd) });
    await settle();
    assert.equal(wait.reads(), 2, "our key and the predecessor's");
    line.etcd.delete(line.keys[0]!);
    assert.equal(await wait.outcome, "first");
  });

  it("where etcd compacted that history and its key is gone, gives the membership up", async () => {
    const line = lineOf(["a"]);
    const wait = await following(line, {
      beforeStart: () => {
        line.etcd.delete(line.ours.id);
        compactPast(line.etcd);
      },
    });
    await assert.rejects(wait.outcome, (err) => err instanceof MembershipLostError && /before its turn came/.test(err.message));
  });

  it("lists the line again when etcd compacted the history its leader watch starts from", async () => {
    const line = lineOf(["a", "b"]);
    const wait = await following(line, { beforeStart: () => compactPast(line.etcd) });
    assert.equal(await wait.outcome, "list again");
  });

  it("when its turn comes, hands the watch of its own key over to the leader's wait, and leaves no other", async () => {
    const line = lineOf(["a", "b"]);
    const wait = await following(line);
    await settle();
    assert.equal(line.etcd.openWatches, 2);
    line.etcd.delete(line.keys[0]!);
    await settle();
    line.etcd.delete(line.keys[1]!);
    assert.equal(await wait.outcome, "first");
    await settle();
    assert.equal(line.etcd.openWatches, 1, "the line watch, which covers our key, stays for awaitLoss");
    const handed = wait.state.takeHandedOver();
    assert.ok(handed?.created("line"));
    handed!.close();
    await settle();
    assert.equal(line.etcd.openWatches, 0);
  });

  it("leaves no watch behind when its wait ends without its turn", async () => {
    const line = lineOf(["a", "b"]);
    const wait = await following(line);
    await settle();
    line.etcd.delete(line.ours.id);
    await assert.rejects(wait.outcome, /deleted/);
    await settle();
    assert.equal(line.etcd.openWatches, 0);
    assert.equal(wait.state.takeHandedOver(), undefined);
  });
});

/** Moves the history on past what was read, and compacts it there. */
function compactPast(etcd: EtcdV3Store): void {
  etcd.put({ "/elsewhere": "x" });
  etcd.compact();
}
