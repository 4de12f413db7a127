// The faults of one run, drawn from its seed: when each comes, what it does,
// and to whom. The network's and the processes' faults are the same for every
// store; a store adds its own (store.ts). Every fault has healed by the end of
// the fault window, after which the checker asks for a leader within a bound.
import type { SimMember } from "./member";
import type { Link } from "./network";
import type { FaultContext, SimStore } from "./store";
import type { Random, Scheduler } from "./world";

/** The members of a run as the schedule acts on them: the living, by name, and how to start a new one. */
export interface Cast {
  /** The members alive now (started or not). */
  alive(): SimMember[];
  linkOf(member: SimMember): Link;
  /** Starts a new member (a host coming up, or a crashed one restarted). */
  spawn(): SimMember;
}

interface GenericFault {
  readonly kind: string;
  readonly weight: number;
  apply(cast: Cast, context: FaultContext, healAt: number): void;
}

/** A member drawn from those alive, if any. */
function anyMember(cast: Cast, random: Random): SimMember | undefined {
  const alive = cast.alive();
  return alive.length > 0 ? random.pick(alive) : undefined;
}

/** The member that leads now, if one does, else any. */
function leaderOrAny(cast: Cast, random: Random): SimMember | undefined {
  return cast.alive().find((m) => m.election.isLeader()) ?? anyMember(cast, random);
}

/** A duration from a few ms to beyond the TTL, as faults last. */
function duration(random: Random, ttlMs: number): number {
  const r = random.next();
  if (r < 0.5) return random.between(20, ttlMs / 2);
  if (r < 0.85) return random.between(ttlMs / 2, 1.5 * ttlMs);
  return random.between(1.5 * ttlMs, 4 * ttlMs);
}

/** The faults every store gets. */
function genericFaults(ttlMs: number): GenericFault[] {
  const until = (context: FaultContext, at: number, run: () => void) => context.scheduler.at(at, run);
  return [
    {
      kind: "cut",
      weight: 4,
      apply(cast, context, healAt) {
        const member = context.random.chance(0.6) ? leaderOrAny(cast, context.random) : anyMember(cast, context.random);
        if (!member) return;
        const direction = context.random.pick(["to-store", "from-store", "both"] as const);
        const heal = Math.min(healAt, context.scheduler.now + duration(context.random, ttlMs));
        context.note(`cut ${member.name} ${direction} until ${heal.toFixed(0)}`);
        const link = cast.linkOf(member);
        link.cut(direction);
        until(context, heal, () => link.heal());
      },
    },
    {
      kind: "loss",
      weight: 2,
      apply(cast, context, healAt) {
        const member = anyMember(cast, context.random);
        if (!member) return;
        const toStore = context.random.between(0.05, 0.5);
        const fromStore = context.random.between(0.05, 0.5);
        const heal = Math.min(healAt, context.scheduler.now + duration(context.random, ttlMs));
        context.note(`loss on ${member.name}: ${toStore.toFixed(2)} of requests, ${fromStore.toFixed(2)} of answers until ${heal.toFixed(0)}`);
        const link = cast.linkOf(member);
        link.setLoss(toStore, fromStore);
        until(context, heal, () => link.setLoss(0, 0));
      },
    },
    {
      kind: "congestion",
      weight: 2,
      apply(cast, context, healAt) {
        const member = context.random.chance(0.6) ? leaderOrAny(cast, context.random) : anyMember(cast, context.random);
        if (!member) return;
        const ms = context.random.between(50, ttlMs / 2);
        const direction = context.random.pick(["to-store", "from-store", "both"] as const);
        const heal = Math.min(healAt, context.scheduler.now + duration(context.random, ttlMs));
        context.note(`link of ${member.name} congested ${direction}: about ${ms.toFixed(0)} ms more a message until ${heal.toFixed(0)}`);
        const link = cast.linkOf(member);
        link.setCongestion(ms, direction);
        until(context, heal, () => link.setCongestion(0));
      },
    },
    {
      kind: "reset",
      weight: 2,
      apply(cast, context, healAt) {
        const member = anyMember(cast, context.random);
        if (!member) return;
        const back = Math.min(healAt, context.scheduler.now + context.random.between(5, 500));
        context.note(`connection of ${member.name} reset, back at ${back.toFixed(0)}`);
        const link = cast.linkOf(member);
        link.reset();
        until(context, back, () => link.restore());
      },
    },
    {
      kind: "pause",
      weight: 3,
      apply(cast, context, healAt) {
        const member = context.random.chance(0.6) ? leaderOrAny(cast, context.random) : anyMember(cast, context.random);
        if (!member) return;
        const ms = Math.min(healAt - context.scheduler.now, duration(context.random, ttlMs));
        if (ms <= 0) return;
        context.note(`${member.name} paused for ${ms.toFixed(0)} ms`);
        member.process.pause(ms);
      },
    },
    {
      kind: "crash",
      weight: 2,
      apply(cast, context) {
        const member = context.random.chance(0.5) ? leaderOrAny(cast, context.random) : anyMember(cast, context.random);
        if (!member) return;
        context.note(`${member.name} crashed`);
        member.crash();
      },
    },
    {
      kind: "stop",
      weight: 2,
      apply(cast, context, healAt) {
        const member = context.random.chance(0.5) ? leaderOrAny(cast, context.random) : anyMember(cast, context.random);
        if (!member || !member.election.isRunning()) return;
        context.note(`${member.name} stops (leave())`);
        void member.stop();
        // Now and then it comes back at once: leave() racing start(). Not
        // after the window: the run stops every member then, for good.
        if (context.random.chance(0.3)) {
          const at = context.scheduler.now + context.random.between(0, 5);
          if (at > healAt) return;
          context.scheduler.at(at, () => {
            context.note(`${member.name} starts again`);
            member.process.run(() => member.start());
          });
        }
      },
    },
    {
      kind: "start",
      weight: 2,
      apply(cast, context) {
        const stopped = cast.alive().filter((m) => !m.election.isRunning());
        if (stopped.length > 0 && context.random.chance(0.5)) {
          const member = context.random.pick(stopped);
          context.note(`${member.name} starts again`);
          member.process.run(() => member.start());
          return;
        }
        const member = cast.spawn();
        context.note(`${member.name} starts`);
        member.process.run(() => member.start());
      },
    },
  ];
}

export interface FaultPlan {
  /** When the fault window ends: every fault has healed by then. */
  readonly healAt: number;
  /** How many faults of each kind were drawn. */
  readonly drawn: Record<string, number>;
}

/**
 * Draws the run's faults over [startAt, healAt) and schedules each. The
 * schedule is drawn up front, so that what a fault does depends only on the
 * seed and the state of the world when it comes.
 */
export function scheduleFaults(
  scheduler: Scheduler,
  random: Random,
  store: SimStore,
  cast: Cast,
  note: (text: string) => void,
  window: { startAt: number; healAt: number; meanGapMs: number },
): FaultPlan {
  const ttlMs = store.options.ttlMs;
  const faults: Array<{ kind: string; weight: number; apply: (context: FaultContext) => void }> = [
    ...genericFaults(ttlMs).map((fault) => ({ ...fault, apply: (context: FaultContext) => fault.apply(cast, context, window.healAt) })),
    ...store.faults.map((fault) => ({ kind: fault.kind, weight: fault.weight, apply: (context: FaultContext) => fault.apply(context) })),
    {
      kind: "store restart",
      weight: 1,
      apply: (context: FaultContext) => {
        const downMs = Math.min(window.healAt - scheduler.now, context.random.chance(0.7) ? context.random.between(10, 500) : duration(context.random, ttlMs));
        if (downMs <= 0) return;
        note(`store down for ${downMs.toFixed(0)} ms`);
        store.restart(downMs);
      },
    },
  ];
  const total = faults.reduce((sum, fault) => sum + fault.weight, 0);
  const drawn: Record<string, number> = {};
  const context: FaultContext = { scheduler, random, holders: () => store.holders(), note };
  for (let at = window.startAt + random.next() * window.meanGapMs; at < window.healAt; at += random.between(0.2, 1.8) * window.meanGapMs) {
    let pick = random.next() * total;
    const fault = faults.find((f) => (pick -= f.weight) < 0) ?? faults[0]!;
    drawn[fault.kind] = (drawn[fault.kind] ?? 0) + 1;
    scheduler.at(at, () => fault.apply(context));
  }
  return { healAt: window.healAt, drawn };
}
