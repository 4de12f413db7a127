// Elections on a store of the user's own, through the published entry point:
// the README's in-memory backend (examples/in-memory-backend.ts), a race-style
// store, run as a real election of several members. The README shows that
// file verbatim; a test checks that it still does.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { after, afterEach, describe, it } from "node:test";
import etcdLeader = require("etcd-leader");
import { MemoryBackend, MemoryStore } from "../examples/in-memory-backend";
import { checkHistories, formatReport, type MemberHistory } from "./helpers/leadership-history";
import { exitOrFail, waitFor } from "./helpers/waiting";

const elections = new Set<etcdLeader.Election>();

afterEach(async () => {
  await Promise.all([...elections].map((e) => e.leave()));
  elections.clear();
});

after(exitOrFail);

const TTL_MS = 1_000;

function member(store: MemoryStore, name: string, backend = new MemoryBackend(store, name, TTL_MS)) {
  const election = etcdLeader.withBackend(backend, name, { ttl: 1 });
  const history: MemberHistory = { member: name, events: [] };
  election.on("elected", (token) => history.events.push({ type: "elected", at: Date.now(), token }));
  election.on("unelected", () => history.events.push({ type: "unelected", at: Date.now() }));
  elections.add(election);
  return { name, election, history, backend };
}

function assertOneLeaderAtATime(histories: MemberHistory[]): void {
  const report = checkHistories(histories, { allowedOverlapMs: 0, endOfHistory: Date.now() });
  assert.ok(report.ok, formatReport("in-memory election", report));
}

describe("an election on a backend of the user's own", () => {
  it("elects one member at a time, hands over on leave(), and tokens grow", async () => {
    const store = new MemoryStore();
    const members = ["a", "b", "c"].map((name) => member(store, name));
    for (const m of members) m.election.start();

    const leaders: string[] = [];
    for (let round = 0; round < 3; round++) {
      const leader = await waitFor("a leader", 5_000, () => members.find((m) => m.election.isLeader()));
      assert.equal(members.filter((m) => m.election.isLeader()).length, 1);
      const others = members.filter((m) => m !== leader && m.election.isRunning());
      await waitFor("the others follow it", 5_000, () => others.every((m) => m.election.currentLeader() === leader.name));
      leaders.push(leader.name);
      await leader.election.leave();
    }
    assert.deepEqual([...leaders].sort(), ["a", "b", "c"]);
    const tokens = members.flatMap((m) => m.history.events.flatMap((e) => (e.type === "elected" ? [e.token] : [])));
    assert.deepEqual(tokens, [...tokens].sort((x, y) => x - y));
    assertOneLeaderAtATime(members.map((m) => m.history));
  });

  it("a leader whose renewals stop steps down before its key expires and the next member takes over", async () => {
    const store = new MemoryStore();
    const first = member(store, "first");
    first.election.start();
    await waitFor("first elected", 5_000, () => first.election.isLeader());
    const second = member(store, "second");
    second.election.start();
    await waitFor("second follows", 5_000, () => second.election.currentLeader() === "first");

    // The store stops answering first's renewals, as a partitioned store would.
    first.backend.renew = () => new Promise(() => undefined);
    await waitFor("second elected", 5 * TTL_MS, () => second.election.isLeader());
    assert.equal(first.election.isLeader(), false);
    assertOneLeaderAtATime([first.history, second.history]);
  });

  it("an observer on the same backend follows the leader", async () => {
    const store = new MemoryStore();
    const observer = etcdLeader.observeBackend(new MemoryBackend(store, "observer", TTL_MS)).start();
    const seen: Array<string | undefined> = [];
    observer.on("leader", (name) => seen.push(name));
    try {
      const a = member(store, "a");
      a.election.start();
      await waitFor("the observer sees a", 5_000, () => observer.currentLeader() === "a");
      await a.election.leave();
      await waitFor("the observer sees nobody", 5_000, () => seen.at(-1) === undefined && seen.length > 1);
    } finally {
      observer.stop();
    }
  });

  it("refuses an object that is not a backend, naming what is missing", () => {
    assert.throws(
      () => etcdLeader.withBackend({ awaitTurn() {} } as never, "a"),
      /backend must implement ElectionBackend: missing renew, awaitLoss, leave, observe/,
    );
  });

  it("the README shows the example backend as it is", () => {
    const readme = readFileSync(join(__dirname, "..", "README.md"), "utf8");
    const example = readFileSync(join(__dirname, "..", "examples", "in-memory-backend.ts"), "utf8");
    assert.ok(readme.includes("```ts\n" + example + "```"), "README.md's copy of examples/in-memory-backend.ts differs");
  });
});
