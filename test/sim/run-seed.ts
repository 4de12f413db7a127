// One simulated run: a seed makes a world, a store, a few members and a
// schedule of faults; the real election code runs in it, and the checker
// looks at every event. The same seed gives the same run, event for event.
import { createHash } from "node:crypto";
import { Checker, type Violation } from "./checker";
import { SimMember } from "./member";
import { Link, longTail, type LatencyModel } from "./network";
import { scheduleFaults, type Cast } from "./schedule";
import type { Mutation, SimStore, StoreFactory } from "./store";
import { Trace } from "./trace";
import { Random, Scheduler, SimProcess } from "./world";

export interface RunOptions {
  /** Breaks the code on purpose (mutations.ts, or the store's own). */
  mutation?: Mutation | undefined;
  /** Clock rates drawn beyond the documented bound (stepDownMargin over one TTL): the guarantee no longer holds. */
  skew?: boolean;
  /** Keep every line of the trace (for a replay), not only the last ones. */
  fullTrace?: boolean;
}

export interface RunResult {
  seed: number;
  violations: Violation[];
  /** Faults drawn, by kind. */
  drawn: Record<string, number>;
  events: number;
  trace: Trace;
}

/** How long the members have to join before the first fault, and the fault window, in TTLs. */
const SETTLE_TTLS = 1;
const WINDOW_TTLS = 5;

/**
 * A schedule written out instead of drawn: the public record's bugs, as
 * named regression cases (regressions.ts). `faults` act at fixed virtual
 * times; the members (3) start at 0, 10 and 20 ms; the network has no tail.
 */
export interface ScriptedSchedule {
  readonly name: string;
  readonly description: string;
  readonly faults: ReadonlyArray<{ at: number; apply(world: ScriptedWorld): void }>;
}

/** What a scripted fault acts on. */
export interface ScriptedWorld {
  readonly cast: Cast;
  readonly store: SimStore;
  readonly scheduler: Scheduler;
  note(text: string): void;
}

export function runSeed(makeStore: StoreFactory, seed: number, options: RunOptions = {}): Promise<RunResult> {
  return runWorld(makeStore, seed, options, undefined);
}

/** Runs a scripted schedule (with `seed` for what is still drawn: clock origins, jitter). */
export function runSchedule(makeStore: StoreFactory, schedule: ScriptedSchedule, seed = 1, options: RunOptions = {}): Promise<RunResult> {
  return runWorld(makeStore, seed, options, schedule);
}

async function runWorld(makeStore: StoreFactory, seed: number, options: RunOptions, script: ScriptedSchedule | undefined): Promise<RunResult> {
  const random = new Random(seed);
  const scheduler = new Scheduler();
  const trace = new Trace(scheduler, options.fullTrace ?? false);
  const store = makeStore(scheduler, random.fork());
  const memberOptions = { ...store.options, ...options.mutation?.options };
  const ttlMs = store.options.ttlMs;
  const latency = script ? longTail(1, 0, Infinity) : drawLatency(random);
  // The documented bound: clocks whose rates differ by less than
  // stepDownMargin over one TTL. Inside it, rates within half of it from 1;
  // with skew, beyond it.
  const bound = store.options.stepDownMargin / ttlMs;
  const rateOf = (r: Random) => (options.skew ? 1 + (r.chance(0.5) ? 1 : -1) * r.between(bound, 3 * bound) : 1 + r.between(-bound / 2, bound / 2) * 0.99);

  const members: SimMember[] = [];
  const links = new Map<SimMember, Link>();
  let checker: Checker | undefined;
  const spawn = (): SimMember => {
    const name = `m${members.length + 1}`;
    const own = random.fork();
    const process = new SimProcess(name, scheduler, rateOf(own), own.between(0, 1e6));
    const link = new Link(process, scheduler, own.fork(), latency, store.transport);
    const member = new SimMember(name, process, store.backend(name, process, link, own.fork()), memberOptions, own.fork());
    member.election.on("elected", (token) => {
      trace.note(`${name} elected (token ${token})`);
      checker?.elected(member, token);
    });
    member.election.on("unelected", () => trace.note(`${name} unelected`));
    member.election.on("leader", (leader) => {
      trace.note(`${name} names ${leader} the leader`);
      checker?.named(member, leader);
    });
    member.election.on("error", (error) => trace.note(`${name} error: ${error.message}`));
    members.push(member);
    links.set(member, link);
    return member;
  };
  const cast: Cast = { alive: () => members.filter((m) => m.alive), linkOf: (m) => links.get(m)!, spawn };
  const note = (text: string) => trace.note(text);

  const undo = options.mutation?.patch?.();
  try {
    const count = script ? 3 : 3 + random.below(3);
    for (let i = 0; i < count; i++) {
      const member = spawn();
      scheduler.at(script ? 10 * i : random.between(0, ttlMs / 2), () => member.process.run(() => member.start()));
    }
    checker = new Checker(members, store, {
      deliveryDelay: () => Math.max(0, ...[...links.values()].map((l) => l.longestDelivery)) + 1,
      readAge: () => {
        const answer = Math.max(0, ...[...links.values()].map((l) => l.longestDelivery));
        const request = Math.max(0, ...[...links.values()].map((l) => l.longestRequest));
        return 2 * answer + request + 1;
      },
      leaderWithinMs: leaderBound(store.options),
      ttlMs,
    }, () => scheduler.now, (v) => trace.note(`VIOLATION ${v.rule}: ${v.detail}`));
    const startAt = SETTLE_TTLS * ttlMs;
    const healAt = startAt + WINDOW_TTLS * ttlMs;
    let drawn: Record<string, number> = {};
    if (script) {
      const world: ScriptedWorld = { cast, store, scheduler, note };
      for (const fault of script.faults) scheduler.at(startAt + fault.at, () => fault.apply(world));
    } else {
      drawn = scheduleFaults(scheduler, random.fork(), store, cast, note, { startAt, healAt, meanGapMs: random.between(0.2, 1) * ttlMs }).drawn;
    }
    const afterEach = () => checker!.afterEvent();
    await scheduler.runUntil(healAt, afterEach);
    trace.note("every fault has healed");
    // A run where every member crashed or stopped gets one more, so that "a leader after the heal" asks something.
    if (!members.some((m) => m.alive && m.election.isRunning())) {
      const member = spawn();
      trace.note(`${member.name} starts`);
      member.process.run(() => member.start());
    }
    // The checks after the heal hold at the bound; a run that settles sooner
    // is checked then (what holds at a settled instant holds at the bound,
    // unless a member unsettles, which the checker sees at every event).
    const checkAt = healAt + leaderBound(store.options);
    await scheduler.runUntil(checkAt, afterEach, () => checker!.settled());
    checker.afterHeal(healAt);
    trace.note("every member stops");
    for (const member of members) if (member.alive) member.process.run(() => void member.stop());
    const stoppedAt = scheduler.now;
    // Requests still in flight (a join answered late) may yet make a membership: a TTL with none left is enough.
    await scheduler.runUntil(stoppedAt + store.holdsAtMostMs + 2 * ttlMs, afterEach, () => scheduler.now > stoppedAt + ttlMs && store.holders().length === 0);
    checker.atEnd();
    return { seed, violations: checker.violations, drawn, events: scheduler.events, trace };
  } finally {
    checker?.dispose();
    undo?.();
  }
}

/** The network of one run: typical delays from a fraction of a ms to a few ms, and a tail. */
function drawLatency(random: Random): LatencyModel {
  return longTail(random.between(0.2, 3), random.between(20, 400), 20 + random.below(400));
}

/**
 * How soon after the last fault healed a leader must be elected: a
 * membership left by a crashed or cut-off leader lives out its TTL (and the
 * store's expiry lag), a member's back-off is at most retryMaxDelay, and a
 * few round trips, each up to the tail.
 */
function leaderBound(options: { ttlMs: number; retryMaxDelay: number }): number {
  return 2 * options.ttlMs + 2 * options.retryMaxDelay + 2_000;
}

/** A digest of a run's trace: two runs of one seed must give the same. */
export function traceDigest(result: RunResult): string {
  return createHash("sha256").update(result.trace.lines().join("\n")).digest("hex");
}
