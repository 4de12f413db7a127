// Members running etcd-leader 0.0.1 and members running this package share one
// election, as they do during a rolling upgrade. Throughout, every member's
// isLeader() is sampled every 20 ms: never may two believe they lead.
//
// 0.0.1 stops for good on its first error and cannot recover from etcd error
// 401; these scenarios keep etcd healthy and short, so they only exercise
// the protocol the two versions share.
import { describe, it, afterEach } from "node:test";
import assert from "node:assert/strict";
import { request } from "node:http";
import type { EventEmitter } from "node:events";
import { EventRecorder } from "../../kit/event-recorder";
import { useEtcd, exitWhenDone } from "../../kit/hooks";
import { sleep, waitFor } from "../../kit/waiting";
import etcdLeader = require("../../../src/index");

// eslint-disable-next-line @typescript-eslint/no-require-imports
const Etcd = require("node-etcd");

/** What etcd-leader 0.0.1 offers. */
interface OriginalElection extends EventEmitter {
  start(): OriginalElection | undefined;
  stop(): OriginalElection | undefined;
  isLeader(): boolean;
  isRunning(): boolean;
  currentLeader(): string | undefined;
}

// eslint-disable-next-line @typescript-eslint/no-require-imports
const original: (etcd: unknown, key: string, name: string, ttl?: number) => OriginalElection = require("etcd-leader-original");

const TTL = 2;

const etcd = useEtcd();
exitWhenDone();

const now = () => performance.now();

/** The values of the membership keys under `key`, oldest first. */
function line(key: string): Promise<string[]> {
  const [host, port] = etcd.hostPorts[0]!.split(":");
  return new Promise((resolve, reject) => {
    const req = request(
      { host, port: Number(port), path: `/v2/keys${key}?sorted=true`, agent: false, timeout: 3_000 },
      (res) => {
        let text = "";
        res.setEncoding("utf8");
        res.on("data", (chunk: string) => (text += chunk));
        res.on("end", () => {
          if (res.statusCode === 404) return resolve([]);
          const body = JSON.parse(text) as { node: { nodes?: Array<{ value: string; createdIndex: number }> } };
          const nodes = [...(body.node.nodes ?? [])].sort((a, b) => a.createdIndex - b.createdIndex);
          resolve(nodes.map((n) => n.value));
        });
      },
    );
    req.on("timeout", () => req.destroy(new Error("etcd did not answer")));
    req.on("error", reject);
    req.end();
  });
}

type Kind = "original" | "port";

/** One member of either version, with what it emitted. */
class Member extends EventRecorder {
  private readonly election: OriginalElection | etcdLeader.Election;

  constructor(readonly kind: Kind, readonly name: string, key: string, onElected: (m: Member) => void) {
    const client = new Etcd(etcd.hostPorts);
    const election = kind === "original" ? original(client, key, name, TTL) : etcdLeader(client, key, name, TTL);
    super(election, name);
    this.election = election;
    (election as EventEmitter).on("elected", () => onElected(this));
  }

  get label(): string {
    return `${this.name} (${this.kind})`;
  }

  start(): void {
    this.election.start();
  }

  isLeader(): boolean {
    return this.election.isLeader();
  }

  isRunning(): boolean {
    return this.election.isRunning();
  }

  currentLeader(): string | undefined {
    return this.election.currentLeader();
  }

  /** Stops; for this package, also waits until its key is deleted. 0.0.1 deletes in the background. */
  async stop(): Promise<void> {
    if (this.kind === "port") await (this.election as etcdLeader.Election).leave();
    else this.election.stop();
  }
}

/**
 * The members of one election, sampled every 20 ms: records every moment at
 * which more than one of them believed it led, and the order of elections.
 */
class Election {
  readonly members: Member[] = [];
  readonly electedOrder: string[] = [];
  readonly overlaps: string[] = [];
  samples = 0;
  private readonly poll: NodeJS.Timeout;
  private readonly createdAt = now();

  constructor(readonly key: string) {
    this.poll = setInterval(() => this.sample(), 20);
  }

  add(kind: Kind, name: string): Member {
    const m = new Member(kind, name, this.key, (elected) => {
      this.electedOrder.push(elected.name);
      this.sample();
    });
    this.members.push(m);
    return m;
  }

  /** Starts `m` and waits until it holds its place at the back of the line. */
  async join(m: Member): Promise<void> {
    const before = this.members.filter((x) => x !== m && x.isRunning()).length;
    m.start();
    await waitFor(`${m.label} to join`, 5_000, async () => {
      const names = await line(this.key);
      return names.length === before + 1 && names.at(-1) === m.name;
    });
  }

  leaders(): Member[] {
    return this.members.filter((m) => m.isLeader());
  }

  /** Waits until `m`, and only `m`, leads. */
  async leadBy(m: Member): Promise<void> {
    await waitFor(`${m.label} to lead (leading: ${this.leaders().map((x) => x.label).join(", ") || "nobody"})`, 5_000, () => {
      const leading = this.leaders();
      return leading.length === 1 && leading[0] === m;
    });
  }

  sample(): void {
    this.samples += 1;
    const leading = this.leaders();
    if (leading.length > 1) this.overlaps.push(`${Math.round(now())} ms: ${leading.map((m) => m.label).join(" and ")}`);
  }

  async close(): Promise<void> {
    clearInterval(this.poll);
    let stopped = false;
    const stopping = Promise.all(this.members.map((m) => m.stop())).then(() => (stopped = true));
    await waitFor("every member to stop", 5_000, () => stopped);
    await stopping;
    await waitFor("the election to empty", 5_000, async () => (await line(this.key)).length === 0);
  }

  /** Nobody ever saw two leaders, and no member reported an error. */
  assertSafe(): void {
    assert.deepEqual(this.overlaps, [], "at most one member believes it leads at any moment");
    const expected = (now() - this.createdAt) / 20;
    assert.ok(this.samples >= expected / 2, `sampled every 20 ms (${this.samples} samples in ${Math.round(expected * 20)} ms)`);
    for (const m of this.members) assert.deepEqual(m.errors, [], `${m.label} saw no error`);
  }
}

let current: Election | undefined;

afterEach(async () => {
  const election = current;
  current = undefined;
  await election?.close();
});

/** Joins `kinds` in order, then stops each leader in turn; checks who leads at every step. */
async function handOverInJoinOrder(key: string, kinds: Kind[]): Promise<Election> {
  const election = (current = new Election(key));
  const members = kinds.map((kind, i) => election.add(kind, `${kind}-${i + 1}`));
  await election.join(members[0]!);
  await election.leadBy(members[0]!);
  for (const m of members.slice(1)) await election.join(m);
  await sleep(2 * TTL * 1000 * 0.5 + 200); // every member refreshes at least once meanwhile
  await election.leadBy(members[0]!);

  for (let i = 0; i < members.length; i++) {
    const leader = members[i]!;
    assert.deepEqual(election.leaders(), [leader], `${leader.label} leads`);
    await leader.stop();
    if (i + 1 >= members.length) continue;
    const next = members[i + 1]!;
    await election.leadBy(next);
    // Ours behind it name it once they hear (from its announcement, when an
    // old member stands between): stopped before then, it would go unnamed.
    const ours = members.slice(i + 2).filter((m) => m.kind === "port");
    await waitFor(`${ours.map((m) => m.label).join(", ")} to name ${next.label}`, 5_000, () => ours.every((m) => m.leaders.at(-1) === next.name));
  }
  assert.deepEqual(election.electedOrder, members.map((m) => m.name), "elected in the order they joined");
  for (const m of members) assert.equal(m.elected.length, 1, `${m.label} elected once`);

  // Ours hear of every member before them as it comes to lead, whichever version it runs.
  for (const [i, m] of members.entries()) {
    if (m.kind === "port") assert.deepEqual(m.leaders, members.slice(0, i).map((x) => x.name), `${m.label}'s leader events`);
  }
  election.assertSafe();
  return election;
}

describe("rolling upgrade: 0.0.1 and this package in one election", () => {
  it("0.0.1 first, then ours, alternating: each is elected in join order, never two leaders at once", async () => {
    await handOverInJoinOrder("/rolling/original-first", ["original", "port", "original", "port"]);
  });

  it("ours first, then 0.0.1, alternating: each is elected in join order, never two leaders at once", async () => {
    await handOverInJoinOrder("/rolling/port-first", ["port", "original", "port", "original"]);
  });

  it("ours follow a 0.0.1 leader by name, and 0.0.1 members follow ours by name", async () => {
    const election = (current = new Election("/rolling/names"));
    const o1 = election.add("original", "original-leader");
    const p1 = election.add("port", "port-member");
    const o2 = election.add("original", "original-follower");
    await election.join(o1);
    await election.leadBy(o1);
    await election.join(p1);
    await waitFor("port-member hears original-leader", 3_000, () => p1.leaders.includes("original-leader"));
    assert.equal(p1.currentLeader(), "original-leader");
    await o1.stop();
    await election.leadBy(p1);
    await election.join(o2);
    await waitFor("original-follower hears port-member", 3_000, () => o2.leaders.includes("port-member"));
    assert.equal(o2.currentLeader(), "port-member");
    assert.deepEqual(p1.leaders, ["original-leader"]);
    election.assertSafe();
  });

  it("replacing 0.0.1 members one by one with ours keeps exactly one leader throughout", async () => {
    const election = (current = new Election("/rolling/replace"));
    const olds = [1, 2, 3].map((i) => election.add("original", `old-${i}`));
    await election.join(olds[0]!);
    await election.leadBy(olds[0]!);
    await election.join(olds[1]!);
    await election.join(olds[2]!);

    // Upgrade each old member in turn: it goes, its replacement joins at the back.
    const news: Member[] = [];
    for (const [i, old] of olds.entries()) {
      await old.stop();
      await election.leadBy(i < 2 ? olds[i + 1]! : news[0]!);
      const replacement = election.add("port", `new-${i + 1}`);
      await election.join(replacement);
      news.push(replacement);
      await sleep(300);
    }
    await election.leadBy(news[0]!);
    assert.deepEqual(await line(election.key), ["new-1", "new-2", "new-3"]);
    assert.deepEqual(election.electedOrder, ["old-1", "old-2", "old-3", "new-1"]);
    assert.deepEqual(news[1]!.leaders, ["old-3", "new-1"]);
    election.assertSafe();
  });
});
