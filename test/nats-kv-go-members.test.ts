// One NATS KV election shared with members of the Go nats-kv-leader-elect,
// against a real nats-server, with a member on the raw bucket that behaves as
// the Go library does (helpers/go-style-member.ts): no watch, so after its key
// is deleted or purged from outside it goes on saying it leads until its next
// tick's update fails, while one of ours, elected over the marker at once,
// leads beside it.
import assert from "node:assert/strict";
import { after, afterEach, before, describe, it, type TestContext } from "node:test";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { Kvm, type KV } from "@nats-io/kv";
import type { Election } from "../src/election";
import { natsLeader } from "../src/nats";
import { GoStyleMember } from "./helpers/go-style-member";
import { startNats, type NatsServer } from "./helpers/nats-server";
import { exitOrFail, waitFor } from "./helpers/waiting";

/** Short, so that a test takes seconds: the Go member ticks every 2.25 s. (The Go library itself refuses under 30 s.) */
const TTL_MS = 3_000;
const BOUND_MS = 30_000;
const KEY = "leader";

let server: NatsServer;
let nc: NatsConnection;
let kvm: Kvm;
let buckets = 0;
const elections = new Set<Election>();
const goMembers = new Set<GoStyleMember>();

before(async () => {
  server = await startNats();
  nc = await connect({ servers: server.url });
  kvm = new Kvm(nc);
});

afterEach(async () => {
  await Promise.all([...elections].map((e) => e.leave()));
  elections.clear();
  await Promise.all([...goMembers].map((m) => m.stop()));
  goMembers.clear();
});

after(async () => {
  await nc?.close().catch(() => undefined);
  await server?.close();
  exitOrFail();
});

function freshBucket(ttlMs = TTL_MS): Promise<KV> {
  return kvm.create(`go_members_${++buckets}`, { ttl: ttlMs, history: 1 });
}

interface Ours {
  election: Election;
  events: Array<{ type: "elected" | "unelected" | "leader"; value?: unknown; at: number }>;
}

async function ours(kv: KV, name: string): Promise<Ours> {
  const election = await natsLeader(kv, KEY, name);
  const events: Ours["events"] = [];
  election.on("elected", (token) => events.push({ type: "elected", value: token, at: performance.now() }));
  election.on("unelected", () => events.push({ type: "unelected", at: performance.now() }));
  election.on("leader", (leader) => events.push({ type: "leader", value: leader, at: performance.now() }));
  elections.add(election);
  election.start();
  return { election, events };
}

function goMember(kv: KV, name = "go-member"): GoStyleMember {
  const member = new GoStyleMember(kv, KEY, name, TTL_MS);
  goMembers.add(member);
  return member.start();
}

/** Resolves just after the key's revision moves past `revision`: the Go leader's update, seen at once. */
async function nextWrite(kv: KV, revision: number): Promise<number> {
  const entry = await waitFor("the next write to the key", BOUND_MS, async () => {
    const now = await kv.get(KEY);
    return now && now.revision > revision ? now : undefined;
  });
  return entry.revision;
}

/**
 * A Go-style member leads and one of ours follows; just after the Go
 * member's update (so that its next tick is as far off as it gets), the key
 * is removed from outside. Samples both every few ms until ours is elected
 * and the Go member has stood down, and reports when each happened.
 */
async function removedUnderGoLeader(t: TestContext, how: "delete" | "purge") {
  const kv = await freshBucket();
  const go = goMember(kv);
  await waitFor("the Go member to say it leads", BOUND_MS, () => go.isLeader());
  const member = await ours(kv, "ours");
  await waitFor("ours to name the Go member", BOUND_MS, () => member.events.some((e) => e.type === "leader" && e.value === "go-member"));
  await nextWrite(kv, (await kv.get(KEY))!.revision);
  const removedAt = performance.now();
  await (how === "delete" ? kv.delete(KEY) : kv.purge(KEY));
  let overlapMs = 0;
  let last = performance.now();
  await waitFor("ours elected and the Go member stood down", BOUND_MS, () => {
    const now = performance.now();
    if (member.election.isLeader() && go.isLeader()) overlapMs += now - last;
    last = now;
    return member.election.isLeader() && go.events.some((e) => e.type === "lost");
  });
  const electedAt = member.events.find((e) => e.type === "elected")!.at;
  const goLostAt = go.events.find((e) => e.type === "lost")!.at;
  t.diagnostic(
    `${how}: the Go member stood down ${(goLostAt - removedAt).toFixed(0)} ms after it, ours elected ` +
      `${(electedAt - removedAt).toFixed(0)} ms after it; sampled overlap ${overlapMs.toFixed(0)} ms`,
  );
  return { kv, go, member, removedAt, electedAt, goLostAt, overlapMs };
}

describe("a mixed election with Go members: the key deleted or purged from outside while a Go member leads", () => {
  for (const how of ["delete", "purge"] as const) {
    it(`ours is elected over the ${how} marker while the Go member still says it leads, until its next tick`, async (t) => {
      const { electedAt, goLostAt, removedAt } = await removedUnderGoLeader(t, how);
      assert.ok(electedAt - removedAt < 1_000, `ours took ${(electedAt - removedAt).toFixed(0)} ms`);
      assert.ok(goLostAt > electedAt, "the Go member had stood down before ours was elected");
    });
  }
});
