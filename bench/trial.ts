// One trial's view of its members: who believes it leads, whom each member
// follows, every event with its time, and waiting for a condition with a
// deadline. Also the safety record: each change of each member's belief that
// it leads, from which overlaps (two leaders at once) are computed.
import { overlapStretches, type OverlapStretch } from "../test/kit/leadership-history";
import type { EventLine } from "./member-protocol";
import type { Host } from "./host";
import { subjectInfo } from "./subjects/info";
import { addSafety, tally, type Failure, type SafetySummary } from "./tallies";
import { DeadlineError, errorMessage, now } from "./util";

export interface MemberState {
  name: string;
  host: Host;
  believes: boolean;
  believesSince: number | undefined;
  knownLeader: string | undefined;
  knownLeaderAt: number | undefined;
  /**
   * Whether its library names the leader to followers. A member whose
   * library cannot (a lock used as an election) counts as following once it
   * runs: the waits below ask nothing of it that it cannot say.
   */
  namesLeader: boolean;
  /** Stopped or killed on purpose: no longer expected to take part. */
  gone: boolean;
  errors: string[];
  notes: string[];
}

export interface Transition {
  name: string;
  t: number;
  on: boolean;
}

export type Overlap = OverlapStretch;

export interface SafetyRecord {
  /** Separate stretches of time during which two or more members believed they led. */
  instants: number;
  longestMs: number;
  overlaps: Overlap[];
}

interface Waiter {
  check: () => boolean;
  resolve: () => void;
  reject: (err: Error) => void;
}

export class Trial {
  readonly members = new Map<string, MemberState>();
  readonly transitions: Transition[] = [];
  readonly events: Array<EventLine & { name: string }> = [];
  readonly startedAt = now();
  private readonly unsubscribe: Array<() => void> = [];
  private readonly waiters = new Set<Waiter>();
  private hostFailure: string | undefined;
  /** Keep every event (small trials); large ones keep only elected/unelected/error. */
  constructor(readonly label: string, private readonly keepAllEvents = true) {}

  attach(host: Host, names: string[]): void {
    const { namesLeader } = subjectInfo(host.subject);
    for (const name of names) {
      this.members.set(name, {
        name, host, believes: false, believesSince: undefined, knownLeader: undefined, knownLeaderAt: undefined, namesLeader,
        gone: false, errors: [], notes: [],
      });
    }
    this.unsubscribe.push(host.onEvent((event) => this.onEvent(host, event)));
    this.unsubscribe.push(host.onBatch(() => this.recheck()));
  }

  /** Names of the members that believe they lead. */
  leaders(): string[] {
    return [...this.members.values()].filter((m) => m.believes).map((m) => m.name);
  }

  /** Members still taking part. */
  active(): MemberState[] {
    return [...this.members.values()].filter((m) => !m.gone);
  }

  /**
   * Exactly one active member believes it leads and every other active member
   * knows its name (where its library names leaders at all): that leader, and
   * the time of the last event that made it so.
   */
  settled(): { leader: string; t: number } | undefined {
    let leader: MemberState | undefined;
    for (const m of this.members.values()) {
      if (!m.believes) continue;
      if (leader || m.gone) return undefined;
      leader = m;
    }
    if (!leader) return undefined;
    let t = leader.believesSince ?? 0;
    for (const m of this.members.values()) {
      if (m.gone || m === leader || !m.namesLeader) continue;
      if (m.knownLeader !== leader.name) return undefined;
      t = Math.max(t, m.knownLeaderAt ?? 0);
    }
    return { leader: leader.name, t };
  }

  /**
   * Exactly one active member believes it leads and every other active member
   * names some leader (it has joined and is following), right or wrong: the
   * precondition for timing a failover. `wrong` counts followers naming
   * another member than the one that believes it leads.
   */
  ready(): { leader: string; t: number; wrong: number } | undefined {
    const believers = [...this.members.values()].filter((m) => m.believes);
    if (believers.length !== 1 || believers[0]!.gone) return undefined;
    const leader = believers[0]!;
    let t = leader.believesSince ?? 0;
    let wrong = 0;
    for (const m of this.members.values()) {
      if (m.gone || m === leader || !m.namesLeader) continue;
      if (m.knownLeader === undefined) return undefined;
      if (m.knownLeader !== leader.name) wrong++;
      t = Math.max(t, m.knownLeaderAt ?? 0);
    }
    return { leader: leader.name, t, wrong };
  }

  /** Why the election is not settled, for failure messages. */
  describe(): string {
    const leaders = this.leaders();
    const active = this.active();
    const named = new Map<string, number>();
    for (const m of active) {
      if (m.believes) continue;
      const key = m.knownLeader ?? "(nobody)";
      named.set(key, (named.get(key) ?? 0) + 1);
    }
    const followers = [...named.entries()].sort((a, b) => b[1] - a[1]).slice(0, 3).map(([k, v]) => `${v} name ${k}`).join(", ");
    return `${leaders.length} believe they lead (${leaders.slice(0, 3).join(", ") || "none"}); of the others ${followers || "none"}`;
  }

  /** The member was stopped on purpose (graceful): it is no longer expected to follow anyone. */
  markGone(name: string): void {
    const m = this.members.get(name);
    if (m) m.gone = true;
  }

  /** The member's process was SIGKILLed at `t`: whatever it believed ends there. */
  killed(name: string, t: number): void {
    const m = this.members.get(name);
    if (!m) return;
    m.gone = true;
    this.setBelief(m, false, t);
  }

  /** Resolves once `check` returns something other than undefined; rejects after `timeoutMs` or if a process dies. */
  waitFor<T>(what: string, check: () => T | undefined, timeoutMs: number): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      let result: T | undefined;
      const timer = setTimeout(() => {
        this.waiters.delete(waiter);
        reject(new DeadlineError(`${what}: not within ${(timeoutMs / 1000).toFixed(1)} s; ${this.describe()}`));
      }, timeoutMs);
      const waiter: Waiter = {
        check: () => {
          if (this.hostFailure) throw new Error(`${what}: ${this.hostFailure}`);
          result = check();
          return result !== undefined;
        },
        resolve: () => {
          clearTimeout(timer);
          resolve(result as T);
        },
        reject: (err) => {
          clearTimeout(timer);
          reject(err);
        },
      };
      this.waiters.add(waiter);
      this.recheck();
    });
  }

  /** The first `elected` by someone other than `except` at or after `after`. */
  electedAfter(after: number, except?: string): { name: string; t: number } | undefined {
    for (const e of this.events) {
      if (e.type === "elected" && e.at >= after && e.name !== except) return { name: e.name, t: e.at };
    }
    return undefined;
  }

  errorCount(): number {
    let count = 0;
    for (const m of this.members.values()) count += m.errors.length;
    return count;
  }

  notes(): string[] {
    return [...this.members.values()].flatMap((m) => m.notes.map((n) => `${m.name}: ${n}`));
  }

  /** Overlaps of beliefs, with beliefs still held closed at `end`. */
  safety(end = now()): SafetyRecord {
    const intervals: Array<{ member: string; start: number; end: number }> = [];
    const since = new Map<string, number>();
    for (const tr of this.transitions) {
      if (tr.on) since.set(tr.name, tr.t);
      else if (since.has(tr.name)) {
        intervals.push({ member: tr.name, start: since.get(tr.name)!, end: tr.t });
        since.delete(tr.name);
      }
    }
    for (const [member, start] of since) intervals.push({ member, start, end });
    const overlaps = overlapStretches(intervals);
    return { instants: overlaps.length, longestMs: Math.max(0, ...overlaps.map((o) => o.ms)), overlaps };
  }

  dispose(): void {
    for (const off of this.unsubscribe) off();
    this.unsubscribe.length = 0;
    for (const waiter of this.waiters) waiter.reject(new Error("trial over"));
    this.waiters.clear();
  }

  private onEvent(host: Host, event: EventLine): void {
    if (event.type === "exit") {
      const victims = [...this.members.values()].filter((m) => m.host === host);
      for (const m of victims) {
        if (!m.gone) {
          this.hostFailure ??= `${host.label} died (${host.describeExit()}) ${host.stderrTail(3)}`;
        }
        this.setBelief(m, false, host.killedAt ?? event.at);
      }
      return;
    }
    const name = event.name;
    if (!name) return;
    const m = this.members.get(name);
    if (!m || m.host !== host) return;
    if (this.keepAllEvents || event.type !== "leader") this.events.push(event as EventLine & { name: string });
    switch (event.type) {
      case "belief":
        this.setBelief(m, event.on === true, event.at);
        break;
      case "leader": {
        const leader = (event.leader as string | null) ?? undefined;
        if (leader !== m.knownLeader) {
          m.knownLeader = leader;
          m.knownLeaderAt = event.at;
        }
        break;
      }
      case "elected":
        m.knownLeader = undefined;
        break;
      case "error":
        m.errors.push(String(event.message));
        break;
      case "note":
        m.notes.push(String(event.message));
        break;
    }
  }

  private setBelief(m: MemberState, on: boolean, t: number): void {
    if (m.believes === on) return;
    m.believes = on;
    m.believesSince = on ? t : undefined;
    this.transitions.push({ name: m.name, t, on });
  }

  private recheck(): void {
    for (const waiter of [...this.waiters]) {
      let done: boolean;
      try {
        done = waiter.check();
      } catch (err) {
        this.waiters.delete(waiter);
        waiter.reject(err as Error);
        continue;
      }
      if (done) {
        this.waiters.delete(waiter);
        waiter.resolve();
      }
    }
  }
}

/** What every scenario records over a subject's trials, besides its own figures. */
export interface TrialBook {
  failures: Failure[];
  safety: SafetySummary;
  messages: Record<string, number>;
}

export interface TrialRunOptions {
  /** Trial labels are `${label} ${i}`. */
  label: string;
  trials: number;
  /** Trials not begun within this many seconds of the first are recorded as failures, not run. */
  budgetS: number;
  /** Where failures, safety and message counts go. */
  book: TrialBook;
  /** Before the first trial (the member processes' clients): a throw ends the scenario, after close(). */
  prepare?(): Promise<unknown>;
  /**
   * One trial: attach members to `trial`, act, measure. A throw records a
   * failure. `release` registers a step (close the members, a proxy) that
   * runs once the trial is over, whatever happened.
   */
  run(trial: Trial, i: number, release: (step: () => Promise<unknown>) => void): Promise<void>;
  /** After a failed trial: whether to go on (default: yes). A dead member process usually means no. */
  continueAfterFailure?(): boolean;
  /** Closes what the trials shared (the member processes), after the last one. */
  close(): Promise<void>;
}

/**
 * Runs a scenario's trials one after another: each gets a fresh Trial, its
 * failure (if any) and its safety record are booked, the members' errors and
 * notes tallied, the trial disposed and its release steps run; at the end the
 * shared processes are closed.
 */
export async function runTrials(options: TrialRunOptions): Promise<void> {
  const { book } = options;
  const began = now();
  try {
    await options.prepare?.();
    for (let i = 1; i <= options.trials; i++) {
      if ((now() - began) / 1000 > options.budgetS) {
        book.failures.push({ trial: i, reason: `time budget of ${options.budgetS} s used up; trials ${i}.. not run` });
        break;
      }
      const trial = new Trial(`${options.label} ${i}`);
      const releases: Array<() => Promise<unknown>> = [];
      let failed = false;
      try {
        await options.run(trial, i, (step) => releases.push(step));
      } catch (err) {
        failed = true;
        book.failures.push({ trial: i, reason: errorMessage(err) });
      } finally {
        addSafety(book.safety, trial.safety());
        tally(book.messages, trial);
        trial.dispose();
        for (const step of releases) await step();
      }
      if (failed && options.continueAfterFailure && !options.continueAfterFailure()) break;
    }
  } finally {
    await options.close();
  }
}
