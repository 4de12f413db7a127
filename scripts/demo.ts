// `npm run demo`: watch a leader election work, on a throwaway local etcd.
//
// Three members (alpha, bravo, charlie), each an `etcd-leader run --json`
// process running an idle command while it leads, compete for one election
// key with a 2 s TTL. The
// demo waits for a leader, stops it cleanly and times the failover, then
// SIGKILLs the new leader (its key has to expire) and times that failover too,
// printing a timeline as it goes and a summary at the end.
//
// Usage: node --import tsx scripts/demo.ts [--api v3|v2]
//
// Exits 0 when every step happened, 1 when one did not within its deadline (or
// the chosen API is not available), 130/143 when interrupted. etcd, its data
// dir and every member process are gone afterwards in every case.
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { rmSync } from "node:fs";
import { dirname, join } from "node:path";
import { etcdBinary, startEtcd, type EtcdCluster } from "../test/kit/etcd-server";
import { overlapStretches } from "../test/kit/leadership-history";

const TTL_SECONDS = 2;
const MEMBER_NAMES = ["alpha", "bravo", "charlie"] as const;
const ELECTION_KEY = "/etcd-leader-demo/leader";
/** The longest any single step may take before the demo gives up. */
const STEP_DEADLINE_MS = 15_000;
/** How long the first leader leads before it is stopped: longer than the TTL, so renewals must work. */
const FIRST_TERM_MS = 3_000;
/** How long the second leader leads before it is killed. */
const SECOND_TERM_MS = 1_000;
/** Member events may reach us slightly out of order across pipes: hold lines this long and print them sorted. */
const REORDER_WINDOW_MS = 60;

const repoRoot = join(__dirname, "..");
/** The command line tool, from source: each member is one `etcd-leader run`. */
const cliMain = join("src", "cli", "main.ts");
/** What each member runs while it leads: a command that idles until it is stopped. */
const LEADER_COMMAND = [process.execPath, "-e", "setInterval(() => {}, 1 << 30)"];
const startedAt = Date.now();

// ---------------------------------------------------------------- arguments

type Api = "v2" | "v3";

function parseArgs(argv: string[]): { api: Api } {
  let api: Api = "v3";
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    let value: string | undefined;
    if (arg === "--api") value = argv[++i];
    else if (arg.startsWith("--api=")) value = arg.slice("--api=".length);
    else if (arg === "-h" || arg === "--help") {
      process.stdout.write("usage: npm run demo [-- --api v3|v2]\n");
      process.exit(0);
    } else usage(`unknown argument ${JSON.stringify(arg)}`);
    if (value !== "v2" && value !== "v3") usage(`--api takes v2 or v3, got ${JSON.stringify(value ?? "")}`);
    api = value;
  }
  return { api };
}

function usage(problem: string): never {
  process.stderr.write(`demo: ${problem}\nusage: npm run demo [-- --api v3|v2]\n`);
  process.exit(2);
}

// ---------------------------------------------------------------- timeline

interface TimelineLine {
  t: number;
  seq: number;
  who: string;
  text: string;
}

const pending: TimelineLine[] = [];
let lineSeq = 0;
let flushTimer: NodeJS.Timeout | undefined;

function seconds(ms: number, digits = 3): string {
  return (ms / 1000).toFixed(digits);
}

/** Adds a line to the timeline; `t` is a Date.now() timestamp. */
function timeline(t: number, who: string, text: string): void {
  pending.push({ t, seq: lineSeq++, who, text });
  flushTimer ??= setTimeout(() => {
    flushTimer = undefined;
    flushTimeline(Date.now() - REORDER_WINDOW_MS);
  }, REORDER_WINDOW_MS);
}

function flushTimeline(upTo = Infinity): void {
  pending.sort((a, b) => a.t - b.t || a.seq - b.seq);
  while (pending.length > 0 && pending[0]!.t <= upTo) {
    const line = pending.shift()!;
    const offset = `+${seconds(Math.max(0, line.t - startedAt))}s`;
    process.stdout.write(`  ${offset.padStart(8)}  ${line.who.padEnd(8)}  ${line.text}\n`);
  }
  if (pending.length > 0 && flushTimer === undefined) {
    flushTimer = setTimeout(() => {
      flushTimer = undefined;
      flushTimeline(Date.now() - REORDER_WINDOW_MS);
    }, REORDER_WINDOW_MS);
  }
}

function flushAll(): void {
  if (flushTimer !== undefined) clearTimeout(flushTimer);
  flushTimer = undefined;
  flushTimeline();
}

function say(text: string): void {
  timeline(Date.now(), "demo", text);
}

// ---------------------------------------------------------------- members

/** A state change `etcd-leader run --json` reports on stderr (src/cli/commands/run.ts); others are ignored. */
interface MemberEvent {
  at: string;
  event: "joining" | "elected" | "unelected" | "leader" | "error" | "left" | "command-start" | "command-stop" | "health" | "metrics";
  token?: number;
  url?: string;
  leader?: string;
  error?: string;
  pid?: number;
}

interface MemberConfig {
  key: string;
  ttl: number;
  api: Api;
  endpoints: string[];
}

class DemoFailure extends Error {}


class Member {
  readonly child: ChildProcess;
  /** Whether this member believes it leads, from its elected/unelected events. */
  leading = false;
  /** The leader this member follows, from its `leader` events. */
  follows: string | undefined;
  token: number | undefined;
  /** Where its health probes are served (its `health` event). */
  probes: string | undefined;
  /** Where its Prometheus metrics are served (its `metrics` event). */
  metrics: string | undefined;
  /** Set when the demo stops or kills the member on purpose. */
  expectedExit: "leave" | "kill" | undefined;
  exit: { code: number | null; signal: NodeJS.Signals | null } | undefined;
  readonly exited: Promise<void>;
  private stderr = "";
  private stderrBuffer = "";

  constructor(readonly name: string, config: MemberConfig, private readonly onEvent: (m: Member, e: MemberEvent) => void) {
    // Each member serves its health probes and its metrics on free ports; only the leader's /readyz passes.
    const probes = ["--health-addr", "127.0.0.1:0", "--readiness", "leader", "--metrics-addr", "127.0.0.1:0"];
    const args = ["run", "--json", "--api", config.api, "--endpoints", config.endpoints.join(","), "--ttl", String(config.ttl), "--name", name, ...probes];
    this.child = spawn(process.execPath, ["--import", "tsx", cliMain, ...args, config.key, "--", ...LEADER_COMMAND], {
      cwd: repoRoot,
      stdio: ["ignore", "ignore", "pipe"],
      // The library's debug output would only be noise here.
      env: { ...process.env, DEBUG: "" },
    });
    this.child.stderr!.setEncoding("utf8");
    this.child.stderr!.on("data", (chunk: string) => this.readStderr(chunk));
    this.exited = new Promise((resolve) => {
      this.child.once("close", (code: number | null, signal: NodeJS.Signals | null) => {
        this.exit = { code, signal };
        endTerm(this, Date.now());
        resolve();
      });
      this.child.once("error", (err) => {
        this.stderr += `\n${err.message}`;
        this.exit ??= { code: null, signal: null };
        resolve();
      });
    });
  }

  get alive(): boolean {
    return this.exit === undefined;
  }

  /** SIGTERM: the member stops its command, leaves the election and exits 0. */
  leave(): void {
    this.expectedExit = "leave";
    this.child.kill("SIGTERM");
  }

  /** A crash: no leave; its membership has to expire (its orphaned command is stopped by the CLI's guard). */
  kill(): void {
    this.expectedExit = "kill";
    this.leading = false;
    this.child.kill("SIGKILL");
    endTerm(this, Date.now());
  }

  stderrTail(lines = 15): string {
    return this.stderr.trimEnd().split("\n").slice(-lines).join("\n");
  }

  describeExit(): string {
    if (!this.exit) return "running";
    if (this.exit.signal) return `killed by ${this.exit.signal}`;
    return `exited with code ${this.exit.code}`;
  }

  /** The CLI's JSON lines are events; any other line (an error message) is kept for the failure report. */
  private readStderr(chunk: string): void {
    this.stderrBuffer += chunk;
    let newline: number;
    while ((newline = this.stderrBuffer.indexOf("\n")) >= 0) {
      const line = this.stderrBuffer.slice(0, newline).trim();
      this.stderrBuffer = this.stderrBuffer.slice(newline + 1);
      if (!line) continue;
      let event: MemberEvent | undefined;
      try {
        event = JSON.parse(line) as MemberEvent;
      } catch {
        // not an event
      }
      if (event && typeof event.event === "string") this.onEvent(this, event);
      else this.stderr = `${this.stderr}\n${line}`.slice(-8_000);
    }
  }
}

// ---------------------------------------------------------------- state and waiting

const members: Member[] = [];
/** Every term in order: who, from when (`elected`) until when (`unelected`, killed or exited), with which token. */
interface Term {
  name: string;
  t: number;
  end?: number;
  token: number;
}
const terms: Term[] = [];

type Waiter = { check: () => boolean; resolve: () => void; reject: (err: Error) => void };
const waiters = new Set<Waiter>();

function recheck(): void {
  for (const waiter of [...waiters]) {
    let done: boolean;
    try {
      done = waiter.check();
    } catch (err) {
      waiters.delete(waiter);
      waiter.reject(err as Error);
      continue;
    }
    if (done) {
      waiters.delete(waiter);
      waiter.resolve();
    }
  }
}

/** Resolves once `check()` holds; rejects after the step deadline or when a member exits unexpectedly. */
function waitUntil(what: string, check: () => boolean): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => {
      waiters.delete(waiter);
      reject(new DemoFailure(`timed out after ${STEP_DEADLINE_MS / 1000} s waiting for ${what}`));
    }, STEP_DEADLINE_MS);
    const waiter: Waiter = {
      check: () => {
        const crashed = members.find((m) => !m.alive && m.expectedExit === undefined);
        if (crashed) throw new DemoFailure(`${crashed.name} ${crashed.describeExit()} unexpectedly while waiting for ${what}`);
        return check();
      },
      resolve: () => {
        clearTimeout(timer);
        resolve();
      },
      reject: (err) => {
        clearTimeout(timer);
        reject(err);
      },
    };
    waiters.add(waiter);
    recheck();
  });
}

function onMemberEvent(member: Member, event: MemberEvent): void {
  const t = Number.isNaN(Date.parse(event.at)) ? Date.now() : Date.parse(event.at);
  switch (event.event) {
    case "joining":
      timeline(t, member.name, "joins the election");
      break;
    case "elected": {
      member.leading = true;
      member.follows = undefined;
      member.token = event.token;
      terms.push({ name: member.name, t, token: event.token ?? NaN });
      timeline(t, member.name, `elected (fencing token ${event.token})`);
      break;
    }
    case "unelected":
      endTerm(member, t);
      member.leading = false;
      member.token = undefined;
      timeline(t, member.name, "unelected");
      break;
    case "leader":
      member.follows = event.leader;
      timeline(t, member.name, `follows ${event.leader}`);
      break;
    case "error":
      timeline(t, member.name, `error: ${event.error}`);
      break;
    case "command-start":
      timeline(t, member.name, `its command started (pid ${event.pid})`);
      break;
    case "command-stop":
      timeline(t, member.name, `its command is being stopped (pid ${event.pid})`);
      break;
    case "left":
      timeline(t, member.name, "left the election");
      break;
    case "health":
      member.probes = event.url;
      break;
    case "metrics":
      member.metrics = event.url;
      break;
  }
  if (event.event === "elected" || event.event === "unelected" || event.event === "leader") void printReadiness();
  recheck();
}

/**
 * Each living member's GET /readyz (served with --readiness leader: 200 only
 * while it leads) and, from its /metrics, its etcd_leader_is_leader, summed
 * over the members as an alert on two leaders would: on one timeline line.
 */
async function printReadiness(): Promise<void> {
  const askedAt = Date.now();
  const living = members.filter((m) => m.alive && m.probes !== undefined);
  const answers = await Promise.all(
    living.map(async (m) => {
      const signal = AbortSignal.timeout(1_000);
      try {
        // Both at once, so that they describe the same moment.
        const [status, text] = await Promise.all([
          fetch(`${m.probes}/readyz`, { signal }).then((r) => r.status),
          m.metrics ? fetch(`${m.metrics}/metrics`, { signal }).then((r) => r.text()) : "",
        ]);
        const isLeader = /^etcd_leader_is_leader\{[^}]*\} (\d+)$/m.exec(text)?.[1];
        return { text: `${m.name} ${status}`, isLeader: isLeader === undefined ? 0 : Number(isLeader) };
      } catch {
        return { text: `${m.name} -`, isLeader: 0 };
      }
    }),
  );
  const leaders = answers.reduce((sum, a) => sum + a.isLeader, 0);
  // Stamped with when it was asked: what each member answered about that moment.
  if (answers.length > 0) {
    timeline(askedAt, "probes", `GET /readyz: ${answers.map((a) => a.text).join(", ")}; sum of etcd_leader_is_leader ${leaders}`);
  }
}

function endTerm(member: Member, at: number): void {
  const term = [...terms].reverse().find((candidate) => candidate.name === member.name);
  if (term && term.end === undefined) term.end = at;
}

/** Stretches of time in which two members believed they led at once (the test kit's checker). */
function overlaps(): string[] {
  const intervals = terms.map((term) => ({ member: term.name, start: term.t, end: term.end ?? Infinity }));
  return overlapStretches(intervals).map((o) => `${o.members.join(" and ")} led at once for ${o.ms} ms`);
}

function alive(): Member[] {
  return members.filter((m) => m.alive && m.expectedExit === undefined);
}

/** The one live member that leads, when every other live member follows it. */
function agreedLeader(): Member | undefined {
  const live = alive();
  const leaders = live.filter((m) => m.leading);
  if (leaders.length !== 1) return undefined;
  const leader = leaders[0]!;
  return live.every((m) => m === leader || m.follows === leader.name) ? leader : undefined;
}

async function waitForExit(member: Member, what: string): Promise<void> {
  const timedOut = new Promise<"timeout">((resolve) => setTimeout(resolve, STEP_DEADLINE_MS, "timeout").unref());
  if ((await Promise.race([member.exited, timedOut])) === "timeout") {
    throw new DemoFailure(`timed out after ${STEP_DEADLINE_MS / 1000} s waiting for ${what}`);
  }
  if (member.exit?.code !== 0) throw new DemoFailure(`${member.name} ${member.describeExit()} while ${what}`);
}

/** Lets `ms` pass while `invariant()` holds; fails at once when it stops holding or a member dies. */
function hold(ms: number, what: string, invariant: () => boolean): Promise<void> {
  const until = Date.now() + ms;
  const timer = setTimeout(recheck, ms);
  return waitUntil(what, () => {
    if (!invariant()) throw new DemoFailure(`expected ${what}, but that stopped being true`);
    return Date.now() >= until;
  }).finally(() => clearTimeout(timer));
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

// ---------------------------------------------------------------- clean-up

let cluster: EtcdCluster | undefined;
let etcdStarting: Promise<EtcdCluster> | undefined;
let cleaning: Promise<void> | undefined;

/** Kills every member and etcd, removes etcd's data dir. Idempotent. */
function cleanup(): Promise<void> {
  cleaning ??= (async () => {
    const killMembers = () => {
      for (const member of members) if (member.alive) member.child.kill("SIGKILL");
    };
    killMembers();
    if (!cluster && etcdStarting) cluster = await etcdStarting.catch(() => undefined);
    killMembers();
    await Promise.all(members.map((m) => m.exited));
    await cluster?.close();
  })();
  return cleaning;
}

/** Last resort on the way out, synchronous: nothing may outlive the demo. */
function cleanupSync(): void {
  for (const member of members) {
    if (member.alive) {
      try {
        member.child.kill("SIGKILL");
      } catch {
        // already gone
      }
    }
  }
  for (const server of cluster?.members ?? []) {
    if (server.running && server.pid) {
      try {
        process.kill(server.pid, "SIGKILL");
      } catch {
        // already gone
      }
    }
    rmSync(dirname(server.dataDir), { recursive: true, force: true });
  }
}

let interrupted = false;

process.on("exit", cleanupSync);
process.on("uncaughtException", (err) => {
  if (interrupted) return;
  flushAll();
  process.stderr.write(`\ndemo failed: ${err.stack ?? err.message}\n`);
  void cleanup().finally(() => process.exit(1));
});

for (const signal of ["SIGINT", "SIGTERM", "SIGHUP"] as const) {
  process.on(signal, () => {
    const code = 128 + ({ SIGHUP: 1, SIGINT: 2, SIGTERM: 15 } as const)[signal];
    if (interrupted) process.exit(code); // a second signal: the exit handler still kills everything
    interrupted = true;
    flushAll();
    process.stderr.write(`\n${signal === "SIGINT" ? "Interrupted" : `Got ${signal}`}: stopping the members and etcd...\n`);
    const force = setTimeout(() => process.exit(code), 8_000);
    force.unref();
    void cleanup().finally(() => process.exit(code));
  });
}

// ---------------------------------------------------------------- the demo

async function main(): Promise<number> {
  const { api } = parseArgs(process.argv.slice(2));
  process.stdout.write(
    `etcd-leader demo: ${MEMBER_NAMES.length} members, one election key, TTL ${TTL_SECONDS} s, etcd ${api} API\n\n`,
  );

  const probe = spawnSync(etcdBinary(), ["--version"], { stdio: "ignore", timeout: 10_000 });
  if (probe.error || probe.status !== 0) {
    throw new DemoFailure(
      `cannot run ${etcdBinary()} (${probe.error?.message ?? `exit code ${probe.status}`}). ` +
        "Install etcd 3.4 or later and put it on PATH (`npm run demo` does it via scripts/prepare.sh), or set ETCD_BIN.",
    );
  }
  etcdStarting = startEtcd();
  cluster = await etcdStarting;
  // Interrupted while etcd was starting: the signal handler cleans up; start nothing more.
  if (interrupted) return new Promise<number>(() => {});
  say(`etcd is up at ${cluster.clientUrls.join(", ")} (throwaway data dir)`);

  const config: MemberConfig = { key: ELECTION_KEY, ttl: TTL_SECONDS, api, endpoints: cluster.clientUrls };
  for (const name of MEMBER_NAMES) members.push(new Member(name, config, onMemberEvent));
  for (const member of members) void member.exited.then(recheck);

  // 1. A leader, and everyone else knows it.
  await waitUntil("a leader that every member knows", () => agreedLeader() !== undefined);
  const first = agreedLeader()!;
  say(`${first.name} leads, the others follow it; letting it lead for ${seconds(FIRST_TERM_MS, 1)} s (renewing its ${TTL_SECONDS} s TTL)`);
  await hold(FIRST_TERM_MS, `${first.name} to keep leading, followed by the others`, () => agreedLeader() === first);

  // 2. Graceful stop: the leader leaves, deleting its key; the next one takes over at once.
  const electionsBeforeStop = terms.length;
  const stopAt = Date.now();
  say(`stopping ${first.name} cleanly (SIGTERM: it stops its command and leaves the election)`);
  first.leave();
  await waitUntil("the next leader after the clean stop", () => terms.length > electionsBeforeStop);
  const gracefulTerm = terms[electionsBeforeStop]!;
  const gracefulMs = gracefulTerm.t - stopAt;
  timeline(gracefulTerm.t, "demo", `failover after clean stop: ${gracefulMs} ms`);
  await waitForExit(first, `${first.name} leaves and exits`);
  await waitUntil(`the remaining member to follow ${gracefulTerm.name}`, () => agreedLeader()?.name === gracefulTerm.name);
  const second = agreedLeader()!;
  say(`${second.name} leads; letting it lead for ${seconds(SECOND_TERM_MS, 1)} s`);
  await hold(SECOND_TERM_MS, `${second.name} to keep leading, followed by the others`, () => agreedLeader() === second);

  // 3. Crash: SIGKILL the leader; nobody deletes its key, it has to expire.
  const electionsBeforeKill = terms.length;
  const killAt = Date.now();
  say(`killing ${second.name} (SIGKILL): no clean-up, its key must expire (TTL ${TTL_SECONDS} s)`);
  second.kill();
  await waitUntil("the next leader after the crash", () => terms.length > electionsBeforeKill);
  const crashTerm = terms[electionsBeforeKill]!;
  const crashMs = crashTerm.t - killAt;
  timeline(crashTerm.t, "demo", `failover after crash: ${seconds(crashMs, 2)} s`);

  // 4. Shut down.
  const last = members.find((m) => m.name === crashTerm.name)!;
  say(`stopping ${last.name} cleanly`);
  last.leave();
  await waitForExit(last, `${last.name} leaves and exits`);
  await cluster.close();
  cluster = undefined;
  say("etcd stopped, data dir removed");
  flushAll();

  // Summary.
  const overlapping = overlaps();
  const tokens = terms.map((term) => term.token);
  const increasing = tokens.every((token, i) => Number.isFinite(token) && (i === 0 || token > tokens[i - 1]!));
  const rows: [string, string][] = [
    ["TTL", `${TTL_SECONDS} s`],
    [`clean stop of ${first.name}`, `${gracefulTerm.name} elected ${gracefulMs} ms later`],
    [
      `crash of ${second.name}`,
      `${crashTerm.name} elected ${seconds(crashMs, 2)} s later (${(crashMs / (TTL_SECONDS * 1000)).toFixed(2)} × TTL)`,
    ],
    ["fencing tokens", `${terms.map((term) => `${term.token} (${term.name})`).join(" < ")}${increasing ? "" : "  NOT INCREASING"}`],
    ["leaders at once", overlapping.length === 0 ? "never more than one" : overlapping.join("; ")],
  ];
  const width = Math.max(...rows.map(([label]) => label.length));
  process.stdout.write(`\nSummary\n${rows.map(([label, value]) => `  ${label.padEnd(width)}  ${value}`).join("\n")}\n`);

  if (!increasing || overlapping.length > 0) {
    process.stderr.write("\ndemo: the election misbehaved (see the summary above)\n");
    return 1;
  }
  return 0;
}

function reportFailure(err: unknown): void {
  flushAll();
  // startEtcd appends each server's log; drop the headers of empty ones.
  const message = (err instanceof Error ? err.message : String(err)).replace(/\n--- \S+(?=\n--- |\n*$)/g, "").trimEnd();
  if (!(err instanceof DemoFailure) && !/etcd did not start/.test(message) && err instanceof Error && err.stack) {
    process.stderr.write(`\ndemo failed: ${err.stack}\n`);
    return;
  }
  process.stderr.write(`\ndemo failed: ${message}\n`);
  if (members.length > 0) {
    process.stderr.write("\nMembers:\n");
    for (const m of members) {
      const role = m.leading ? `leads (token ${m.token})` : m.follows ? `follows ${m.follows}` : "no leader known";
      process.stderr.write(`  ${m.name.padEnd(8)}  ${m.describeExit()}, ${role}\n`);
    }
    for (const m of members) {
      const tail = m.stderrTail();
      if (tail) process.stderr.write(`\n--- ${m.name} stderr\n${tail}\n`);
    }
  }
  for (const server of cluster?.members ?? []) {
    if (server.running) continue;
    const tail = server.logTail(10).trim();
    if (tail) process.stderr.write(`\n--- etcd log (last lines)\n${tail}\n`);
  }
}

main().then(
  async (code) => {
    await cleanup();
    process.exit(code);
  },
  async (err: unknown) => {
    // A Ctrl-C reaches the members too; give our own SIGINT a moment to arrive
    // so that their deaths are not reported as a failure.
    await sleep(150);
    if (interrupted) return; // the signal handler is already cleaning up
    reportFailure(err);
    await cleanup();
    process.exit(1);
  },
);
