// The facts of PostgreSQL that the PostgreSQL recipe relies on, written
// against its port (src/stores/postgres/port.ts), as one set of cases that
// two targets run: a real PostgreSQL through the pg adapter, on a pool as a
// user makes one, and the simulated table of test/sim/stores/postgres.ts. A
// simulated table that differs from the real server on one of these fails
// here, so that what the simulation finds is about the real code on a
// faithful store.
import assert from "node:assert/strict";
import type { LeaseNotice, PostgresPort } from "../../../src/stores/postgres/port";

/** What a case may do to the table from outside the port, as an operator would, and time. */
export interface Operator {
  /** DELETE FROM <table> WHERE key = $1 (the table's trigger notifies it). */
  deleteRow(key: string): Promise<void>;
  /** UPDATE <table> SET expires_at = now() - 1 s WHERE key = $1: the lease cut short, with no notification. */
  expireRow(key: string): Promise<void>;
  /** The row as it is, expired or not; undefined if there is none. */
  row(key: string): Promise<{ holder: string; token: number } | undefined>;
  /** Ends every connection that LISTENs (pg_terminate_backend), as a lost connection would. */
  dropListeners(): Promise<void>;
  /** Lets `ms` go by: real time on a real server, virtual time on the simulated one. */
  elapse(ms: number): Promise<void>;
  /** The time on the same clock, in ms. */
  now(): number;
}

/** A table a case runs on: the port of a member (a second member's port, on a connection of its own), and the operator's hands. */
export interface FactsTable {
  readonly port: PostgresPort;
  readonly other: PostgresPort;
  readonly operator: Operator;
}

/** What a target gives each case: a fresh table of leases. */
export type TableMaker = () => Promise<FactsTable>;

export interface Fact {
  readonly title: string;
  run(table: TableMaker): Promise<void>;
}

/** A lease no case waits out. */
const LONG_TTL_MS = 60_000;
/** A lease a case waits out. */
const SHORT_TTL_MS = 300;

/** The notices a listener was told, and its end. */
interface Heard {
  readonly notices: LeaseNotice[];
  readonly ended: Error | undefined;
  stop(): void;
}

async function listenTo(port: PostgresPort, key: string): Promise<Heard> {
  const notices: LeaseNotice[] = [];
  let ended: Error | undefined;
  const listening = await port.listen(key, { onNotice: (notice) => notices.push(notice), onEnd: (error) => (ended = error) });
  return {
    notices,
    get ended() {
      return ended;
    },
    stop: () => listening.stop(),
  };
}

/** Looks at `probe` every `every` ms of the operator's time until it is true, for at most `within` ms. */
async function until(operator: Operator, what: string, within: number, probe: () => boolean | Promise<boolean>, every = 10): Promise<void> {
  const deadline = operator.now() + within;
  while (!(await probe())) {
    if (operator.now() >= deadline) assert.fail(`${what}: not within ${within} ms`);
    await operator.elapse(every);
  }
}

async function won(port: PostgresPort, key: string, name: string, ttlMs: number): Promise<number> {
  const answer = await port.acquire(key, name, ttlMs);
  assert.ok(answer.won, `${name}'s acquire should have taken the row, but ${JSON.stringify(answer)}`);
  return answer.token;
}

export const POSTGRES_FACTS: readonly Fact[] = [
  {
    title: "acquire takes a row that is absent and answers a token; over a live lease it changes nothing and names the holder, its token and the time it has left",
    async run(table) {
      const { port, other, operator } = await table();
      const token = await won(port, "leader", "a", LONG_TTL_MS);
      assert.ok(Number.isSafeInteger(token) && token > 0);
      const lost = await other.acquire("leader", "b", LONG_TTL_MS);
      assert.equal(lost.won, false);
      assert.ok(!lost.won && lost.holder, "the holder is named");
      assert.equal(lost.holder.name, "a");
      assert.equal(lost.holder.token, token);
      assert.ok(lost.holder.remainingMs > LONG_TTL_MS - 5_000 && lost.holder.remainingMs <= LONG_TTL_MS, `${lost.holder.remainingMs} ms left`);
      assert.deepEqual(await operator.row("leader"), { holder: "a", token });
    },
  },
  {
    title: "of many acquires of one key sent together exactly one takes the row",
    async run(table) {
      const { port, other } = await table();
      const answers = await Promise.all(Array.from({ length: 8 }, (_, i) => (i % 2 ? other : port).acquire("leader", `m${i}`, LONG_TTL_MS)));
      assert.equal(answers.filter((answer) => answer.won).length, 1, JSON.stringify(answers));
    },
  },
  {
    title: "a lease expires on the server's clock: acquire takes the row once its TTL has passed, with a larger token, and not before",
    async run(table) {
      const { port, other, operator } = await table();
      const first = await won(port, "leader", "a", SHORT_TTL_MS);
      assert.equal((await other.acquire("leader", "b", SHORT_TTL_MS)).won, false);
      assert.equal((await port.read("leader"))?.name, "a");
      await operator.elapse(SHORT_TTL_MS + 20);
      assert.equal(await port.read("leader"), undefined, "an expired lease is read as nobody's");
      const second = await won(other, "leader", "b", SHORT_TTL_MS);
      assert.ok(second > first, `token ${second} after ${first}`);
    },
  },
  {
    title: "tokens grow across a row deleted from outside: they come from a sequence, not from the row",
    async run(table) {
      const { port, other, operator } = await table();
      const first = await won(port, "leader", "a", LONG_TTL_MS);
      await operator.deleteRow("leader");
      const second = await won(other, "leader", "b", LONG_TTL_MS);
      assert.ok(second > first, `token ${second} after ${first}`);
      await operator.deleteRow("leader");
      const third = await won(port, "leader", "a", LONG_TTL_MS);
      assert.ok(third > second, `token ${third} after ${second}`);
    },
  },
  {
    title: "renew extends the lease only while the row holds the token and has not expired",
    async run(table) {
      const { port, other, operator } = await table();
      const token = await won(port, "leader", "a", SHORT_TTL_MS);
      assert.equal(await port.renew("leader", token + 1, SHORT_TTL_MS), false, "another token");
      await operator.elapse(SHORT_TTL_MS / 2);
      assert.equal(await port.renew("leader", token, SHORT_TTL_MS), true);
      // Past the first expiry, within the renewed one.
      await operator.elapse(SHORT_TTL_MS / 2 + 50);
      assert.equal((await other.acquire("leader", "b", SHORT_TTL_MS)).won, false, "the renewed lease still holds");
      await operator.elapse(SHORT_TTL_MS);
      assert.equal(await port.renew("leader", token, SHORT_TTL_MS), false, "an expired lease is not renewed");
      await operator.expireRow("leader");
      assert.deepEqual(await operator.row("leader"), { holder: "a", token }, "nobody took it: the row is there, expired");
      assert.equal(await port.renew("leader", token, SHORT_TTL_MS), false);
    },
  },
  {
    title: "a lease cut short from outside is taken at once, and its holder's renewal fails",
    async run(table) {
      const { port, other, operator } = await table();
      const token = await won(port, "leader", "a", LONG_TTL_MS);
      await operator.expireRow("leader");
      const taken = await won(other, "leader", "b", LONG_TTL_MS);
      assert.ok(taken > token);
      assert.equal(await port.renew("leader", token, LONG_TTL_MS), false);
    },
  },
  {
    title: "release deletes the row only under its token, and notifies listeners; a wrong token changes nothing and notifies nobody",
    async run(table) {
      const { port, other, operator } = await table();
      const heard = await listenTo(other, "leader");
      try {
        const token = await won(port, "leader", "a", LONG_TTL_MS);
        await until(operator, "the acquisition's notice", 2_000, () => heard.notices.length >= 1);
        assert.deepEqual(heard.notices, [{ kind: "acquired", name: "a", token, ttlMs: LONG_TTL_MS }]);
        assert.equal(await port.release("leader", token + 1), false);
        assert.deepEqual(await operator.row("leader"), { holder: "a", token });
        assert.equal(await port.release("leader", token), true);
        assert.equal(await operator.row("leader"), undefined);
        await until(operator, "the release's notice", 2_000, () => heard.notices.length >= 2);
        await operator.elapse(50);
        assert.deepEqual(heard.notices.slice(1), [{ kind: "released", token }], "one notice, for the release under the token");
        assert.equal(await port.release("leader", token), false, "released already");
      } finally {
        heard.stop();
      }
    },
  },
  {
    title: "renewals, leases that expire and leases cut short from outside notify nobody; a row deleted from outside notifies as a release; notices come in commit order, only for the key listened to",
    async run(table) {
      const { port, other, operator } = await table();
      const heard = await listenTo(other, "leader");
      try {
        const first = await won(port, "leader", "a", SHORT_TTL_MS);
        await won(port, "elsewhere", "a", LONG_TTL_MS);
        await port.renew("leader", first, SHORT_TTL_MS);
        await operator.elapse(SHORT_TTL_MS + 20);
        const second = await won(other, "leader", "b", LONG_TTL_MS);
        await operator.expireRow("leader");
        const third = await won(port, "leader", "c", LONG_TTL_MS);
        await operator.deleteRow("leader");
        await operator.deleteRow("elsewhere");
        await until(operator, "four notices", 2_000, () => heard.notices.length >= 4);
        await operator.elapse(100);
        assert.deepEqual(
          heard.notices.map((notice) => (notice.kind === "acquired" ? `${notice.name}@${notice.token}` : `released@${notice.token}`)),
          [`a@${first}`, `b@${second}`, `c@${third}`, `released@${third}`],
        );
      } finally {
        heard.stop();
      }
    },
  },
  {
    title: "a listener whose connection is lost reports its end, and listening anew works",
    async run(table) {
      const { port, other, operator } = await table();
      const heard = await listenTo(other, "leader");
      await operator.dropListeners();
      await until(operator, "the listener's end", 5_000, () => heard.ended !== undefined);
      heard.stop();
      const again = await listenTo(other, "leader");
      try {
        const token = await won(port, "leader", "a", LONG_TTL_MS);
        await until(operator, "a notice on the new listener", 2_000, () => again.notices.length >= 1);
        assert.deepEqual(again.notices, [{ kind: "acquired", name: "a", token, ttlMs: LONG_TTL_MS }]);
      } finally {
        again.stop();
      }
    },
  },
];
