// The checker: what must hold at every event of a simulated run, and what
// must hold once its faults are over. Each violation is recorded with the
// virtual time it was seen at and what was seen, for the trace.
//
// - At most one member believes it leads (isLeader()) at any instant, and at
//   most one whileLeading() routine runs, in a process that runs, with a
//   signal that has not aborted, and none outlives its term: a routine's
//   signal aborts in the turn its member stops believing it leads. (A frozen
//   process's routine cannot act; when it wakes past its deadline,
//   isLeader() says so before any timer runs, which is the documented rule
//   for a routine.) The one documented exception: a leader whose membership
//   was deleted from outside learns it from its watch, as fast as its
//   successor (or, cut off, at its deadline); an overlap is allowed while
//   that leader leads on the deleted membership, for no longer than a TTL
//   and a delivery's delay after the deletion. It may even come to lead on
//   it after the deletion, having learnt of its turn and of the deletion in
//   one burst of a watch that a cut held back: its token is then below its
//   successor's.
// - A deadline that passed is final: a member that stopped believing it leads
//   believes again only after it is elected again (an `elected` event).
// - A member is elected only on a membership that was, at some moment, the
//   oldest the store held (where the store can tell), deleted from outside
//   since or not.
// - Fencing tokens grow strictly from one term to the next, across members;
//   a member that leads again on the same membership, with nobody's term
//   between, carries the same token.
// - A follower names as leader only a member the store held a membership
//   for, at some moment within a delivery's delay before it named it.
// - Once the last fault has healed: a leader within the stated bound, and no
//   member stuck joining or backing off beyond it.
// - No unhandled rejection.
// - Once every member has stopped (and memberships left behind have had
//   their time to live), the store holds no membership.
import type { SimMember } from "./member";

/** What the checker needs of a simulated store, whichever it is. */
export interface StoreView {
  /** Names the store holds a membership for now. */
  holders(): string[];
  /** Whether a member that waits holds a membership (queue-style stores), or only the leader does (race-style). */
  readonly followersHold: boolean;
  /** Whether the store held a membership named `name` at some moment in [from, to] (virtual time). */
  heldDuring(name: string, from: number, to: number): boolean;
  /** When the latest membership of `name` was deleted from outside (not by its member, not by expiry), if it was; undefined if not, or if it has a newer one. */
  deletedFromOutsideAt(name: string): number | undefined;
  /** Whether the latest membership of `name` was, at some moment, the oldest the store held (a store that can tell; absent: not asked). */
  wasFirstInLine?(name: string): boolean;
  /**
   * Where `token`, of a membership of `name`, ranks among every token the
   * store gave, for a store whose tokens can start over (a NATS bucket
   * deleted and made again numbers its revisions from 1 again): a new start
   * ranks above all before it. Absent: the token is its rank.
   */
  tokenRank?(name: string, token: number): number;
}

export interface Violation {
  at: number;
  rule: string;
  detail: string;
}

export interface CheckerBounds {
  /** The longest a message took from the store to a member so far (delay and the member's pauses), read at each check. */
  deliveryDelay(): number;
  /**
   * How old what a member knows of the line can be when it acts on it: an
   * answer's delivery, then one more round trip (a recipe that reads the two
   * ends of a long line names the leader from the first read once the second
   * is in, and its watch from the first read's revision corrects it at once).
   */
  readAge(): number;
  /** After the last fault healed, a leader within this many ms of virtual time. */
  leaderWithinMs: number;
  /** The members' TTL: a belief on a membership deleted from outside ends within it (and a delivery's delay). */
  ttlMs: number;
}

export class Checker {
  readonly violations: Violation[] = [];
  private highestToken = -Infinity;
  /** Who was elected last. */
  private lastElected: SimMember | undefined;

  /** Whether each member believed it led at the last check, and whether it was elected since. */
  private readonly belief = new Map<SimMember, { leading: boolean; electedSince: boolean }>();
  /** Members seen with a live routine and no belief that they lead, and since when. */
  private readonly routineAlone = new Map<SimMember, number>();
  private readonly unhandled: unknown[] = [];
  private readonly onUnhandled = (reason: unknown) => this.unhandled.push(reason);

  constructor(
    private readonly members: readonly SimMember[],
    private readonly store: StoreView,
    private readonly bounds: CheckerBounds,
    private readonly now: () => number,
    /** Told of each violation as it is found, for the trace. */
    private readonly onViolation: (violation: Violation) => void = () => undefined,
  ) {
    process.on("unhandledRejection", this.onUnhandled);
  }

  /** Called as a member is elected, with its token (from its `elected` event). */
  elected(member: SimMember, token: number): void {
    const belief = this.belief.get(member);
    if (belief) belief.electedSince = true;
    // Even on a membership deleted from outside: it came to the front of the
    // line first (its turn came before the deletion), or it was never its turn.
    if (this.store.wasFirstInLine?.(member.name) === false) {
      this.fail("leads from the front of the line", `${member.name} was elected (token ${token}) on a membership that was never the oldest the store held`);
    }
    // A member that learns late of its turn on a membership deleted from
    // outside meanwhile (the documented exception) leads on its old token.
    if (this.store.deletedFromOutsideAt(member.name) !== undefined) return;
    const rank = this.store.tokenRank?.(member.name, token) ?? token;
    const again = rank === this.highestToken && member === this.lastElected;
    if (!(rank > this.highestToken) && !again) {
      this.fail("tokens grow", `${member.name} was elected with token ${token}${rank === token ? "" : ` (rank ${rank})`}, not above the highest before it, ${this.highestToken}`);
    }
    this.highestToken = Math.max(this.highestToken, rank);
    this.lastElected = member;
  }

  /** Called as a member names a leader (its `leader` event). */
  named(member: SimMember, leader: string): void {
    const to = this.now();
    const from = to - this.bounds.readAge();
    if (!this.store.heldDuring(leader, from, to)) {
      this.fail("named leader was held", `${member.name} named ${leader}, which held no membership from ${from.toFixed(1)} to ${to.toFixed(1)}`);
    }
  }

  /** After every event: the safety rules. */
  afterEvent(): void {
    const leaders = this.members.filter((m) => m.alive && m.election.isLeader());
    if (leaders.length > 1 && !this.excused(leaders)) {
      this.fail("one leader", `${leaders.map((m) => `${m.name} (token ${m.election.fencingToken()})`).join(" and ")} all believe they lead`);
    }
    const acting = this.members.filter((m) => m.alive && !m.process.paused && m.routineRunning);
    const routines = acting.filter((m) => m.election.isLeader());
    if (routines.length > 1 && !this.excused(routines)) {
      this.fail("one routine", `the routines of ${routines.map((m) => m.name).join(" and ")} run with live signals`);
    }
    const now = this.now();
    for (const member of this.members) {
      if (!member.alive) continue;
      const leading = member.election.isLeader();
      const before = this.belief.get(member);
      if (before && !before.leading && leading && !before.electedSince) {
        this.fail("a passed deadline is final", `${member.name} believes it leads again (token ${member.election.fencingToken()}) without being elected again`);
      }
      this.belief.set(member, { leading, electedSince: false });
    }
    for (const member of this.members) {
      const alone = member.alive && !member.process.paused && member.routineRunning && !member.election.isLeader();
      if (!alone) {
        this.routineAlone.delete(member);
        continue;
      }
      // Its deadline's timer may be due at this very instant, behind this event.
      const since = this.routineAlone.get(member) ?? now;
      this.routineAlone.set(member, since);
      if (now > since) this.fail("routine ends with its term", `${member.name}'s routine has run on since ${since.toFixed(1)}, its member no longer believing it leads`);
    }
    if (this.unhandled.length > 0) {
      for (const reason of this.unhandled.splice(0)) this.fail("no unhandled rejection", String((reason as Error)?.stack ?? reason));
    }
  }

  /** Whether the members have settled: one leader, and every other running member following on a membership the store holds. */
  settled(): boolean {
    const running = this.members.filter((m) => m.alive && m.election.isRunning());
    if (running.length === 0 || !running.some((m) => m.election.isLeader())) return false;
    const holders = this.store.followersHold ? new Set(this.store.holders()) : undefined;
    return running.every((m) => {
      const state = m.election.state;
      return (state === "leading" || state === "following") && (!holders || holders.has(m.name));
    });
  }

  /** Once the faults have healed, at `healedAt`: a leader, and nobody stuck. Call at healedAt + leaderWithinMs. */
  afterHeal(healedAt: number): void {
    const running = this.members.filter((m) => m.alive && m.election.isRunning());
    if (running.length === 0) return;
    if (!running.some((m) => m.election.isLeader())) {
      this.fail("a leader after the heal", `no leader ${this.bounds.leaderWithinMs} ms after the last fault healed at ${healedAt.toFixed(1)}`);
    }
    const holders = new Set(this.store.holders());
    for (const member of running) {
      const state = member.election.state;
      if (state !== "leading" && state !== "following") {
        this.fail("nobody stuck", `${member.name} is ${state} ${this.bounds.leaderWithinMs} ms after the heal`);
      } else if (this.store.followersHold && !holders.has(member.name)) {
        // Waiting on a membership the store no longer holds: it would wait for ever (etcd issue 19597).
        this.fail("nobody stuck", `${member.name} is ${state} ${this.bounds.leaderWithinMs} ms after the heal, and the store holds no membership of it`);
      }
    }
  }

  /** Once every member has stopped and what they left behind has expired. */
  atEnd(): void {
    const left = this.store.holders();
    if (left.length > 0) this.fail("nothing left behind", `the store still holds memberships of ${left.join(", ")}`);
    this.afterEvent();
    process.off("unhandledRejection", this.onUnhandled);
  }

  dispose(): void {
    process.off("unhandledRejection", this.onUnhandled);
  }

  /** Two at once is the documented exception while every one but the newest leads on a membership deleted from outside. */
  private excused(together: readonly SimMember[]): boolean {
    const tokenOf = (m: SimMember) => {
      const token = m.election.fencingToken() ?? m.termToken ?? 0;
      return this.store.tokenRank?.(m.name, token) ?? token;
    };
    const newest = together.reduce((a, b) => (tokenOf(a) > tokenOf(b) ? a : b));
    const now = this.now();
    const allowance = this.bounds.ttlMs + this.bounds.deliveryDelay();
    return together.every((m) => {
      if (m === newest) return true;
      const deletedAt = this.store.deletedFromOutsideAt(m.name);
      return deletedAt !== undefined && now - deletedAt <= allowance;
    });
  }

  private fail(rule: string, detail: string): void {
    // One of each rule is enough to fail a seed; more would flood the trace.
    if (this.violations.some((v) => v.rule === rule)) return;
    const violation = { at: this.now(), rule, detail };
    this.violations.push(violation);
    this.onViolation(violation);
  }
}
