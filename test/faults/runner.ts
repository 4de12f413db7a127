// Runs one fault scenario (test/faults/scenarios.ts) on one backend:
//
//  1. starts etcd (one server, or a cluster), or for NATS one nats-server with
//     JetStream and the election's bucket (on "nats-cluster", three servers
//     whose routes pass through fault proxies, and a bucket with three
//     replicas), or one PostgreSQL or redis-server (its append-only file
//     written before each answer), one FaultProxy per member in front of it (on the cluster,
//     member i's goes to server i, and to the next ones if that one refuses),
//     and the members, each an `etcd-leader run` process
//     (test/kit/member-process.ts) connected only through its own proxy,
//     whose command appends its start and SIGTERM to a log of the run;
//  2. waits until one member leads and every other follows it;
//  3. runs the scenario's fault, within a time budget;
//  4. waits until the election has settled: one member leads, every running
//     member follows it, and etcd holds exactly one membership per running
//     member with the leader's first (on NATS, PostgreSQL and Redis, which
//     hold nothing for a follower: the election's key or row holds the
//     leader's name);
//  5. stops every member cleanly (each must leave and exit 0);
//  6. checks the recorded histories.
//
// The checks every scenario gets (besides its own):
//  - no two members believe they lead at once beyond the scenario's allowance
//    (0 ms except where a scenario says otherwise), counting a frozen member's
//    term only up to the deadline it promised (checkHistories);
//  - no two members' commands run at once beyond the same allowance (the
//    command log: from its start to its SIGTERM);
//  - where the leader's work is a process group (a shell with children,
//    Scenario.work): no process of an earlier group runs when another
//    command starts (ps, at that start), and none is left running once
//    every member is gone (zombies do not count);
//  - fencing tokens of successive leaders increase;
//  - once the fault is over a leader is elected within TTL + 2 s
//    (RECOVERY_SLACK_MS), and after that moment the election is never
//    without a leader for longer than that bound;
//  - no member crashed, printed on stderr (an unhandled rejection, a
//    warning), exited other than as the scenario made it, or was missing at
//    the end;
//  - the election converges (step 4) within TTL + 3 s of the scenario's end.
//
// Whatever happens, every process, proxy and etcd the run started is gone when
// it returns (and `cleanupEverything()` is there for `after` hooks).
import { randomUUID } from "node:crypto";
import { setTimeout as delay } from "node:timers/promises";
import { startEtcdCluster, type EtcdCluster } from "../kit/etcd-server";
import { FaultProxy } from "../kit/fault-proxy";
import { startNatsCluster, type NatsCluster } from "../kit/nats-cluster";
import { startNats, type NatsServer } from "../kit/nats-server";
import { startPostgres, type PostgresServer } from "../kit/postgres-server";
import { startRedis, type RedisServer } from "../kit/redis-server";
import {
  checkHistories,
  formatReport,
  type HistoryReport,
  type LeadershipInterval,
} from "../kit/leadership-history";
import { CommandLog, overlaps, type ChildRecord } from "../kit/command-log";
import { firstOf, type EventNamed, type RecordedEvent, type RecordedEventName } from "../kit/event-recorder";
import { MEMBER_GRACE_SECONDS, spawnMember, type MemberProcess } from "../kit/member-process";
import { waitFor, withDeadline } from "../kit/waiting";
import { livingInGroups } from "../fixtures/process-table.cjs";
import { EtcdAdmin, type LineEntry } from "./etcd-admin";
import { FAULTS_BUCKET, NatsAdmin } from "./nats-admin";
import { PostgresAdmin, RedisAdmin, type RaceAdmin } from "./race-admin";
import { isNats, isRaceStyle, type FaultBackend, type Scenario, type ScenarioOutcome } from "./types";

/** The bound on re-election after a heal is the TTL plus this. */
export const RECOVERY_SLACK_MS = 2_000;
/** How long members may take to start and elect a first leader (start-up on a loaded 2-core machine). */
const FIRST_ELECTION_TIMEOUT_MS = 30_000;
/** The scenario's own steps must finish within this. */
const SCENARIO_BUDGET_MS = 40_000;
/** After the fault: how long the election may take to converge, beyond the TTL. */
const CONVERGE_SLACK_MS = 3_000;
/** Each step of the teardown (members killed, proxies closed, servers stopped) must be over within this. */
const RELEASE_STEP_MS = 15_000;
/** After the members are gone: how long their commands' groups may take to go (an orphan guard's grace period and more). */
const GROUPS_GONE_MS = MEMBER_GRACE_SECONDS * 1_000 + 3_000;

export interface RunOptions {
  /** Called with progress lines (setup, marks); default: nothing. */
  log?: (line: string) => void;
}

export interface ScenarioFigures {
  /** required re-election: heal to the first election after it. Otherwise heal to the first moment somebody leads (0 if the leader kept leading). */
  recoveryMs: number | undefined;
  /** Longest stretch after the heal (until the checks) with nobody leading. */
  longestLeaderlessMs: number | undefined;
  longestOverlapMs: number;
  errors: number;
  terms: number;
  /** Figures particular to the scenario (step-down lag, etcd down time, …). */
  extra: Record<string, number>;
}

export interface ScenarioResult {
  scenario: string;
  backend: FaultBackend;
  ok: boolean;
  problems: string[];
  figures: ScenarioFigures;
  /** formatReport's line(s) plus the figures: what a test prints. */
  summary: string;
  /** Every member's events and the runner's marks, for failures. */
  timeline: string;
  durationMs: number;
  report: HistoryReport | undefined;
}

type ExpectedExit = "left" | "killed";

/** A store server a scenario stops and starts: an etcd server, a nats-server, PostgreSQL or redis-server. */
export interface StoreServer {
  stop(): Promise<void>;
  kill(): Promise<void>;
  start(): Promise<void>;
  waitReady(timeoutMs?: number): Promise<void>;
}

/** What a run started: etcd and its admin, or nats-server, PostgreSQL or redis-server and its admin. */
interface Stores {
  etcd?: EtcdCluster;
  admin?: EtcdAdmin;
  nats?: NatsServer;
  natsCluster?: NatsCluster;
  natsAdmin?: NatsAdmin;
  postgres?: PostgresServer;
  redis?: RedisServer;
  /** PostgreSQL's or Redis's admin. */
  sqlOrRedisAdmin?: RaceAdmin;
}

/** What a scenario sees: the members, their proxies, etcd, and helpers bounded by the scenario's budget. */
export class ScenarioContext {
  /** The election key: an etcd path, or a key of the NATS bucket, a PostgreSQL row or a Redis key (no leading slash there). */
  readonly key: string;
  readonly members: MemberProcess[] = [];
  readonly proxies = new Map<MemberProcess, FaultProxy>();
  /** The member that led when the fault began. */
  leader!: MemberProcess;
  /** The other members, in their order in line (the first would succeed the leader). */
  followers: MemberProcess[] = [];
  /** The memberships in etcd when the fault began, oldest first. */
  initialLine: LineEntry[] = [];
  readonly problems: string[] = [];
  readonly extra: Record<string, number> = {};
  readonly marks: Array<{ at: number; label: string }> = [];
  readonly expectedExits = new Map<MemberProcess, ExpectedExit>();
  private readonly controller = new AbortController();

  constructor(
    readonly backend: FaultBackend,
    readonly ttlMs: number,
    private readonly stores: Stores,
    private readonly log: (line: string) => void,
    private readonly recoverySlackMs = RECOVERY_SLACK_MS,
  ) {
    this.key = isRaceStyle(backend) ? `faults-${randomUUID()}` : `/faults/${randomUUID()}`;
  }

  get etcd(): EtcdCluster {
    return this.stores.etcd ?? this.absent("etcd");
  }

  get admin(): EtcdAdmin {
    return this.stores.admin ?? this.absent("etcd");
  }

  get natsAdmin(): NatsAdmin {
    return this.stores.natsAdmin ?? this.absent("nats-server");
  }

  /** The three nats-servers of a "nats-cluster" run. */
  get natsCluster(): NatsCluster {
    return this.stores.natsCluster ?? this.absent("nats-server cluster");
  }

  /** The server the election's store runs on (the first etcd server of a cluster). */
  get server(): StoreServer {
    return this.stores.nats ?? this.stores.postgres ?? this.stores.redis ?? this.etcd.members[0]!;
  }

  /**
   * Whether members wait in a line the store holds (etcd), so that the next
   * one is known in advance; on NATS, PostgreSQL and Redis followers hold
   * nothing and race.
   */
  get queue(): boolean {
    return !isRaceStyle(this.backend);
  }

  /** The admin of a race-style store: the holder of the key as a line of one, and its delete from outside. */
  get raceAdmin(): RaceAdmin {
    return this.stores.natsAdmin ?? this.stores.sqlOrRedisAdmin ?? this.absent("race-style store");
  }

  private absent(store: string): never {
    throw new Error(`this ${this.backend} run has no ${store}`);
  }

  get signal(): AbortSignal {
    return this.controller.signal;
  }

  /** The re-election bound: TTL + 2 s, or the scenario's own slack. */
  get recoveryBoundMs(): number {
    return this.ttlMs + this.recoverySlackMs;
  }

  abort(reason: string): void {
    this.controller.abort(new Error(reason));
  }

  proxyOf(member: MemberProcess): FaultProxy {
    const proxy = this.proxies.get(member);
    if (!proxy) throw new Error(`no proxy for ${member.name}`);
    return proxy;
  }

  running(): MemberProcess[] {
    return this.members.filter((m) => m.running);
  }

  /** Records a point in time for the timeline. Returns it. */
  mark(label: string): number {
    const at = Date.now();
    this.marks.push({ at, label });
    this.log(`  ${label}`);
    return at;
  }

  check(condition: boolean, problem: string): void {
    if (!condition) this.problems.push(problem);
  }

  figure(name: string, value: number): void {
    this.extra[name] = Math.round(value);
  }

  /** The scenario is about to end this member: "left" (stop(), must leave and exit 0) or "killed" (SIGKILL). */
  expectExit(member: MemberProcess, how: ExpectedExit): void {
    this.expectedExits.set(member, how);
  }

  async sleep(ms: number): Promise<void> {
    await delay(ms, undefined, { signal: this.signal });
  }

  async sleepUntil(at: number): Promise<void> {
    await this.sleep(Math.max(0, at - Date.now()));
  }

  /** The first event matching `predicate` that is stamped at or after `since`, from any of `members`. */
  waitForAnyEvent(
    members: MemberProcess[],
    predicate: (event: RecordedEvent, member: MemberProcess) => boolean,
    since: number,
    timeoutMs: number,
    what: string,
  ): Promise<{ member: MemberProcess; event: RecordedEvent }> {
    return firstOf(members, what, timeoutMs, (event, member) => event.at >= since && predicate(event, member), { signal: this.signal });
  }

  /** The first `elected` event at or after `since` among `members`. */
  async waitForElection(
    members: MemberProcess[],
    since: number,
    timeoutMs = this.recoveryBoundMs + 2_000,
  ): Promise<{ member: MemberProcess; event: EventNamed<"elected"> }> {
    const found = await this.waitForAnyEvent(members, (e) => e.event === "elected", since, timeoutMs, "an election");
    return found as { member: MemberProcess; event: EventNamed<"elected"> };
  }

  /** The first event of `member` matching `predicate` that is stamped at or after `since`. */
  async waitForEvent(
    member: MemberProcess,
    predicate: (event: RecordedEvent) => boolean,
    since: number,
    timeoutMs: number,
    what: string,
  ): Promise<RecordedEvent> {
    return (await this.waitForAnyEvent([member], (e) => predicate(e), since, timeoutMs, `${member.name}: ${what}`)).event;
  }

  /** The first `event` of `member` stamped at or after `since`. */
  async waitForNamed<N extends RecordedEventName>(member: MemberProcess, event: N, since: number, timeoutMs: number, what: string): Promise<EventNamed<N>> {
    return (await this.waitForEvent(member, (e) => e.event === event, since, timeoutMs, what)) as EventNamed<N>;
  }

  /** Asks `probe` every 100 ms (a probe that throws is asked again) until it returns a value, or throws after `timeoutMs`. */
  until<T>(probe: () => Promise<T | undefined> | T | undefined, timeoutMs: number, what: string): Promise<NonNullable<T>> {
    return waitFor(what, timeoutMs, probe, { every: 100, signal: this.signal, retryErrors: true });
  }

  /** The etcd line of this election, oldest first; on the race-style stores the key's holder alone. */
  line(): Promise<LineEntry[]> {
    return this.queue ? this.admin.line(this.key) : this.raceAdmin.line(this.key);
  }

  /** The one member whose latest word is that it leads, if exactly one says so. */
  currentLeader(): MemberProcess | undefined {
    const leaders = this.running().filter((m) => m.isLeaderNow());
    return leaders.length === 1 ? leaders[0] : undefined;
  }

  // Store control, refused once the run is being torn down so that no server is started after cleanup.

  async stopEtcd(server: StoreServer, how: "stop" | "kill" = "stop"): Promise<void> {
    this.signal.throwIfAborted();
    await (how === "stop" ? server.stop() : server.kill());
  }

  async startEtcd(server: StoreServer): Promise<void> {
    this.signal.throwIfAborted();
    await server.start();
  }
}

const STORE_NAMES: Record<FaultBackend, string> = {
  v2: "etcd",
  v3: "etcd",
  nats: "nats-server",
  "nats-cluster": "nats-servers",
  postgres: "PostgreSQL",
  redis: "redis-server",
};

/** Resources of runs in progress, for cleanupEverything(). */
const live = new Set<Resources>();

type Resources = Stores & { proxies: FaultProxy[]; members: MemberProcess[] };

/** Kills and closes whatever runs still hold. For `after` hooks and signal handlers. */
export async function cleanupEverything(): Promise<void> {
  await Promise.all([...live].map((resources) => release(resources)));
  live.clear();
}

/** Ends what a run started; each step bounded, so that one that hangs is a problem named, not a run that never ends. */
async function release(resources: Resources): Promise<string[]> {
  const problems: string[] = [];
  const step = async (what: string, done: () => Promise<unknown>): Promise<void> => {
    await withDeadline(done(), RELEASE_STEP_MS, what).catch((err: unknown) => problems.push(`teardown: ${errorText(err)}`));
  };
  await step("SIGKILL of the members", () => Promise.all(resources.members.map((m) => m.kill("SIGKILL"))));
  await step("closing the fault proxies", () => Promise.all(resources.proxies.map((p) => p.close())));
  if (resources.natsAdmin) await step("closing the NATS admin connection", () => resources.natsAdmin!.close());
  if (resources.nats) await step("stopping nats-server", () => resources.nats!.close());
  if (resources.natsCluster) await step("stopping the nats-server cluster", () => resources.natsCluster!.close());
  if (resources.sqlOrRedisAdmin) await step("closing the admin connection", () => resources.sqlOrRedisAdmin!.close());
  if (resources.postgres) await step("stopping PostgreSQL", () => resources.postgres!.close());
  if (resources.redis) await step("stopping redis-server", () => resources.redis!.close());
  if (resources.etcd) await step("stopping etcd", () => resources.etcd!.close());
  return problems;
}

/** The replicas of the bucket of a "nats-cluster" run: one on each server. */
const CLUSTER_REPLICAS = 3;

/** Member `index`'s servers on a cluster: its own first, then the others in turn. */
function serversOfMember(upstream: string[], index: number, backend: FaultBackend): string[] {
  if (backend !== "nats-cluster") return upstream;
  const own = index % upstream.length;
  return [...upstream.slice(own), ...upstream.slice(0, own)];
}

/**
 * Starts the store a run needs: etcd (with its admin), a nats-server (or
 * three) with the election's bucket, PostgreSQL or redis-server.
 */
async function startStores(scenario: Scenario, backend: FaultBackend, ttlMs: number, resources: Resources): Promise<string[]> {
  if (backend === "postgres") {
    resources.postgres = await startPostgres();
    resources.sqlOrRedisAdmin = new PostgresAdmin(resources.postgres.url);
    return [`127.0.0.1:${resources.postgres.port}`];
  }
  if (backend === "redis") {
    // With every write on disk before its answer: a restart that lost acknowledged
    // writes would be the one fault whose overlap docs/redis.md accepts.
    resources.redis = await startRedis({ appendonly: true });
    resources.sqlOrRedisAdmin = new RedisAdmin(resources.redis.url);
    return [`127.0.0.1:${resources.redis.port}`];
  }
  if (backend === "nats") {
    resources.nats = await startNats();
    resources.natsAdmin = await NatsAdmin.open([resources.nats.url], ttlMs);
    return [`127.0.0.1:${resources.nats.port}`];
  }
  if (backend === "nats-cluster") {
    resources.natsCluster = await startNatsCluster(3, { proxiedRoutes: true });
    resources.natsAdmin = await NatsAdmin.open(resources.natsCluster.urls, ttlMs, CLUSTER_REPLICAS);
    await resources.natsCluster.waitStreamCurrent(resources.natsAdmin.stream);
    return resources.natsCluster.servers.map((server) => `127.0.0.1:${server.port}`);
  }
  resources.etcd = await startEtcdCluster(scenario.etcdServers ?? 1);
  resources.admin = new EtcdAdmin(backend, resources.etcd.hostPorts);
  return resources.etcd.hostPorts;
}

export async function runScenario(scenario: Scenario, backend: FaultBackend, options: RunOptions = {}): Promise<ScenarioResult> {
  const log = options.log ?? (() => undefined);
  const startedAt = Date.now();
  const ttlSeconds = scenario.ttlSeconds ?? 2;
  const ttlMs = ttlSeconds * 1_000;
  const memberCount = scenario.members ?? 3;
  const resources: Resources = { proxies: [], members: [] };
  live.add(resources);
  // Each member's command (while it leads) appends its start and its SIGTERM here.
  const commandLog = new CommandLog();

  let ctx: ScenarioContext | undefined;
  let outcome: ScenarioOutcome | undefined;
  let checkEnd: number | undefined;
  let report: HistoryReport | undefined;
  const problems: string[] = [];
  try {
    const upstream = await startStores(scenario, backend, ttlMs, resources);
    ctx = new ScenarioContext(backend, ttlMs, resources, log, scenario.recoverySlackMs);
    const c = ctx;
    c.mark(`${backend} ${scenario.id}: ${STORE_NAMES[backend]} ${upstream.join(",")} up, key ${c.key}`);

    for (let i = 0; i < memberCount; i++) {
      const proxy = await FaultProxy.start({ upstream: serversOfMember(upstream, i, backend) });
      resources.proxies.push(proxy);
      const member = spawnMember({
        backend: isNats(backend) ? "nats" : backend,
        ...(resources.postgres ? { url: resources.postgres.url } : resources.redis ? { url: resources.redis.url } : {}),
        hosts: [proxy.hostPort],
        key: c.key,
        name: `m${i}`,
        ttl: ttlSeconds,
        ...(isNats(backend) ? { bucket: FAULTS_BUCKET } : {}),
        // An etcd option: the race-style stores' members have no watch to re-arm.
        ...(scenario.watchRearmMs !== undefined && !isRaceStyle(backend) ? { watchRearmMs: scenario.watchRearmMs } : {}),
        ...(scenario.work !== undefined ? { work: scenario.work } : {}),
        commandLog,
      });
      resources.members.push(member);
      c.members.push(member);
      c.proxies.set(member, proxy);
    }

    // A settled election: a leader, every other member following it, and a line in etcd that agrees.
    const first = await c.waitForElection(c.members, 0, FIRST_ELECTION_TIMEOUT_MS);
    c.leader = first.member;
    // The faults come to a leader running its command (or hook), not to one
    // in the moment it spawns it: a CLI killed between the fork and telling
    // its orphan guard about the new process leaves that command unwatched.
    const workStart = scenario.work === "hook-group" ? "hook-start" : "command-start";
    await c.waitForEvent(c.leader, (e) => e.event === workStart, first.event.at, 10_000, `its ${workStart}`);
    // And to one whose command has its signal handlers set: it has logged its start.
    await commandLog.waitFor(`${c.leader.name}'s command to run`, 10_000, (records) =>
      records.find((r) => r.event === "start" && r.name === c.leader.name),
    );
    await Promise.all(
      c.members
        .filter((m) => m !== c.leader)
        .map((m) => c.waitForEvent(m, (e) => e.event === "leader" && e.value === c.leader.name, 0, 10_000, `follow ${c.leader.name}`)),
    );
    // On a race-style store the "line" is the key's holder alone: followers hold nothing.
    const fullLine = c.queue ? memberCount : 1;
    c.initialLine = await c.until(async () => {
      const line = await c.line();
      return line.length === fullLine && line[0]!.name === c.leader.name ? line : undefined;
    }, 5_000, "a line of every member with the leader first");
    c.followers = c.queue
      ? c.initialLine.slice(1).map((entry) => c.members.find((m) => m.name === entry.name)!)
      : c.members.filter((m) => m !== c.leader);
    c.mark(`ready: ${c.leader.name} leads (token ${first.event.value}), line ${c.initialLine.map((e) => e.name).join(" < ")}`);

    // The fault, within its budget.
    const budget = setTimeout(() => c.abort(`scenario still running after ${SCENARIO_BUDGET_MS} ms`), SCENARIO_BUDGET_MS);
    try {
      outcome = await scenario.run(c);
    } catch (err) {
      problems.push(`scenario step failed: ${errorText(err)}`);
    } finally {
      clearTimeout(budget);
    }

    if (outcome) {
      c.mark("fault over; waiting for the election to settle");
      // Give late flaps a chance to show before checking convergence.
      await delay(ttlMs / 2);
      const settled = await waitSettled(c, ttlMs + CONVERGE_SLACK_MS);
      if (settled) problems.push(settled);
    }
    checkEnd = Date.now();

    for (const member of c.members) {
      const expected = c.expectedExits.get(member);
      if (!expected && !member.running) problems.push(`${member.name} is not running at the end (${describeExit(member)})`);
    }

    // Teardown: every member still running leaves and exits 0.
    c.mark("stopping every member");
    const stopping = c.running();
    await Promise.all(stopping.map((m) => m.stop()));
    for (const member of stopping) {
      const exit = member.seen.at(-1);
      const left = member.seen.some((e) => e.event === "left");
      if (!left || exit?.event !== "exit" || exit.code !== 0) {
        problems.push(`${member.name} did not leave cleanly when stopped (${describeExit(member)}, left: ${left})`);
      }
    }
  } catch (err) {
    problems.push(`run failed: ${errorText(err)}`);
  } finally {
    ctx?.abort("run over");
    problems.push(...(await release(resources)));
    live.delete(resources);
  }

  const c = ctx;
  const endOfHistory = Date.now();
  const commandRecords = commandLog.records();
  commandLog.remove();
  problems.push(...(await groupProblems(commandRecords)));
  let figures: ScenarioFigures = {
    recoveryMs: undefined,
    longestLeaderlessMs: undefined,
    longestOverlapMs: 0,
    errors: 0,
    terms: 0,
    extra: c?.extra ?? {},
  };
  if (c && c.members.length > 0) {
    problems.unshift(...c.problems);
    const required = outcome?.reelection === "required";
    report = checkHistories(
      c.members.map((m) => m.history()),
      {
        allowedOverlapMs: scenario.allowedOverlapMs ?? 0,
        endOfHistory,
        ...(required ? { healedAt: outcome!.healedAt, maxReelectMs: c.recoveryBoundMs } : {}),
        ...(outcome?.tokensRestartAt !== undefined ? { tokensRestartAt: outcome.tokensRestartAt } : {}),
      },
    );
    problems.push(...report.problems);
    // The step-down guarantee carried to the commands: no two ran at once beyond the same allowance.
    for (const overlap of overlaps(commandRecords, endOfHistory, scenario.allowedOverlapMs ?? 0)) {
      problems.push(`commands overlapped: ${overlap}`);
    }

    // Exits: only the ones the scenario caused, and those as it caused them.
    for (const member of c.members) {
      const expected = c.expectedExits.get(member);
      if (!expected) continue;
      const exit = member.seen.find((e) => e.event === "exit");
      if (!exit || exit.event !== "exit") {
        problems.push(`${member.name} was to be ${expected === "left" ? "stopped" : "killed"} but did not exit`);
      } else if (expected === "left" && (exit.code !== 0 || !member.seen.some((e) => e.event === "left"))) {
        problems.push(`${member.name} was stopped but did not leave and exit 0 (${describeExit(member)})`);
      } else if (expected === "killed" && exit.signal !== "SIGKILL") {
        problems.push(`${member.name} was SIGKILLed but exited otherwise (${describeExit(member)})`);
      }
    }
    for (const member of c.members) {
      const lines = member.unexpectedOutput;
      if (lines.length > 0) problems.push(`${member.name} wrote on stderr: ${lines.slice(0, 5).join(" | ").slice(0, 600)}`);
    }

    if (outcome && checkEnd !== undefined) {
      const { recoveryMs, longestLeaderlessMs } = recovery(report.intervals, outcome, checkEnd, required ? report.reelectedAfterHealMs : undefined);
      figures = { ...figures, recoveryMs, longestLeaderlessMs };
      if (longestLeaderlessMs !== undefined && longestLeaderlessMs > c.recoveryBoundMs) {
        problems.push(`nobody led for ${longestLeaderlessMs} ms after the fault was over (at most ${c.recoveryBoundMs} ms allowed)`);
      }
      if (outcome.reelection === "none") {
        const problem = checkUnbroken(report.intervals, c.leader.name, outcome.faultAt, checkEnd);
        if (problem) problems.push(problem);
      }
    }
    figures = {
      ...figures,
      longestOverlapMs: report.longestOverlapMs,
      errors: report.errorCount,
      terms: report.intervals.length,
    };
  }

  const unique = [...new Set(problems)];
  const ok = unique.length === 0;
  const name = `${backend} ${scenario.id}`;
  const head = report ? formatReport(name, report).split("\n")[0]! : `${name}: FAILED before any history`;
  const extras = Object.entries(figures.extra).map(([k, v]) => `${k} ${Math.round(v)}`);
  // formatReport already gives the re-election time when one was required.
  const recoveryText =
    figures.longestLeaderlessMs === undefined
      ? ""
      : `; ${outcome?.reelection === "required" ? "" : `somebody led ${figures.recoveryMs ?? "never"} ms after heal, `}` +
        `longest leaderless ${figures.longestLeaderlessMs} ms after heal (bound ${c?.recoveryBoundMs} ms)`;
  let summary = `${head}${recoveryText}${extras.length ? `; ${extras.join(", ")}` : ""}`;
  if (!ok) summary = summary.replace(`${name}: ok`, `${name}: FAILED`) + `\n  problems: ${unique.join("; ")}`;
  return {
    scenario: scenario.id,
    backend,
    ok,
    problems: unique,
    figures,
    summary,
    timeline: c ? timeline(c, startedAt) : "",
    durationMs: Date.now() - startedAt,
    report,
  };
}

/**
 * For commands started as process groups (CHILD_GROUP): whether one started
 * while processes of an earlier group ran, and whether any process of them is
 * left now that every member is gone. What is left is SIGKILLed.
 */
async function groupProblems(records: ChildRecord[]): Promise<string[]> {
  const problems: string[] = [];
  const starts = records.filter((r) => r.event === "start" && r.pgid !== undefined);
  for (const start of starts) {
    if (start.earlierGroupsRunning?.length) {
      problems.push(`${start.name}'s command started while processes of an earlier command's group ran: ${start.earlierGroupsRunning.join("; ")}`);
    }
  }
  const groups = starts.map((r) => r.pgid!);
  if (groups.length === 0) return problems;
  let left: string[] = [];
  await waitFor("the commands' groups to be gone", GROUPS_GONE_MS, () => (left = livingInGroups(groups)).length === 0, { every: 100 }).catch(
    () => undefined,
  );
  if (left.length > 0) {
    problems.push(`processes of the commands' groups still ran ${GROUPS_GONE_MS} ms after every member was gone: ${left.join("; ")}`);
    for (const pgid of groups) {
      try {
        process.kill(-pgid, "SIGKILL");
      } catch {
        // gone
      }
    }
  }
  return problems;
}

/**
 * Waits until one member leads, every other running member's latest `leader`
 * event names it, and etcd's line holds exactly one membership per running
 * member with the leader's first. Returns a problem, or undefined.
 */
async function waitSettled(c: ScenarioContext, timeoutMs: number): Promise<string | undefined> {
  let why = "";
  const settled = async (): Promise<boolean> => {
    why = await settledProblem(c).catch((err: unknown) => `cannot read the line: ${errorText(err)}`);
    return why === "";
  };
  try {
    await waitFor("the election to settle", timeoutMs, settled, { every: 100 });
  } catch {
    return `the election did not settle within ${timeoutMs} ms: ${why || "a read of the line did not answer"}`;
  }
  c.mark(`settled: ${c.currentLeader()?.name} leads`);
  return undefined;
}

async function settledProblem(c: ScenarioContext): Promise<string> {
  const running = c.running();
  const leaders = running.filter((m) => m.isLeaderNow());
  if (leaders.length !== 1) return `${leaders.length} members say they lead (${leaders.map((m) => m.name).join(", ")})`;
  const leader = leaders[0]!;
  for (const member of running) {
    if (member === leader) continue;
    const latest = [...member.seen].reverse().find((e) => e.event === "leader");
    const name = latest && latest.event === "leader" ? latest.value : undefined;
    if (name !== leader.name) return `${member.name} follows ${name ?? "nobody"}, not ${leader.name}`;
  }
  const line = await c.line();
  const names = line.map((e) => e.name);
  if (!c.queue) return names.length === 1 && names[0] === leader.name ? "" : `the key holds [${names.join(", ")}], not ${leader.name}`;
  const expected = running.map((m) => m.name).sort();
  if (JSON.stringify([...names].sort()) !== JSON.stringify(expected)) {
    return `etcd holds memberships of [${names.join(", ")}], running members are [${expected.join(", ")}]`;
  }
  if (names[0] !== leader.name) return `${leader.name} leads but ${names[0]} is first in line`;
  return "";
}

/**
 * From the heal on: how long until somebody led (for a required re-election,
 * until the first election), and the longest stretch with nobody leading.
 */
function recovery(
  intervals: LeadershipInterval[],
  outcome: ScenarioOutcome,
  checkEnd: number,
  reelectedAfterHealMs: number | undefined,
): { recoveryMs: number | undefined; longestLeaderlessMs: number | undefined } {
  const from = outcome.healedAt;
  const clipped = intervals
    .map((i) => ({ start: Math.max(i.start, from), end: Math.min(i.end, checkEnd) }))
    .filter((i) => i.end > i.start)
    .sort((a, b) => a.start - b.start);
  let covered = from;
  let longest = 0;
  let firstLed: number | undefined;
  for (const interval of clipped) {
    if (interval.start > covered) longest = Math.max(longest, interval.start - covered);
    firstLed ??= interval.start;
    covered = Math.max(covered, interval.end);
  }
  longest = Math.max(longest, checkEnd - covered);
  const recoveryMs = outcome.reelection === "required" ? reelectedAfterHealMs : firstLed === undefined ? undefined : firstLed - from;
  return { recoveryMs: recoveryMs === undefined ? undefined : Math.round(recoveryMs), longestLeaderlessMs: Math.round(longest) };
}

/** For a fault the leader must ride out: its one term covers the whole time from the fault to the checks, and nobody else led. */
function checkUnbroken(intervals: LeadershipInterval[], leader: string, faultAt: number, checkEnd: number): string | undefined {
  const during = intervals.filter((i) => i.end > faultAt && i.start < checkEnd);
  if (during.length === 1 && during[0]!.member === leader && during[0]!.start <= faultAt && during[0]!.end >= checkEnd) {
    return undefined;
  }
  const terms = during.map((i) => `${i.member} ${i.start - faultAt}..${i.end - faultAt} ms (${i.endedBy})`).join(", ");
  return `${leader} was to lead throughout the fault, but the terms from the fault on were: ${terms || "none"}`;
}

function describeExit(member: MemberProcess): string {
  const exit = member.all("exit")[0];
  if (!exit) return "still running";
  return exit.signal ? `killed by ${exit.signal}` : `exit code ${exit.code}`;
}

function errorText(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/** Every member's events and the runner's marks, in time order, relative to the start of the run. */
function timeline(c: ScenarioContext, startedAt: number): string {
  const rows: Array<{ at: number; who: string; text: string }> = c.marks.map((m) => ({ at: m.at, who: "runner", text: m.label }));
  for (const member of c.members) {
    for (const event of member.seen) {
      const believed = (until: number | undefined) =>
        until === undefined ? "" : `believes it leads until +${((until - startedAt) / 1000).toFixed(3)}s`;
      let text: string;
      switch (event.event) {
        case "elected":
          text = `elected, token ${event.value}; ${believed(event.until)}`;
          break;
        case "renewed":
          text = believed(event.until);
          break;
        case "leader":
          text = `follows ${event.value}`;
          break;
        case "error":
          text = `error: ${event.value.message.split("\n")[0]!.slice(0, 160)}`;
          break;
        case "exit":
          text = `exit ${event.signal ?? event.code}`;
          break;
        default:
          text = event.event;
      }
      rows.push({ at: event.at, who: member.name, text });
    }
  }
  rows.sort((a, b) => a.at - b.at);
  return rows.map((r) => `  +${((r.at - startedAt) / 1000).toFixed(3)}s ${r.who.padEnd(6)} ${r.text}`).join("\n");
}
