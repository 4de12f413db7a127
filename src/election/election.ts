// A member of an election: its public face (start, stop, the events, who
// leads, whileLeading) and its terms. Each run from start() to stop() is one
// plain loop, the campaign (campaign.ts): join, wait for the turn, lead, step
// down, retry. It knows nothing about the store; a backend
// (src/contract/backend.ts) does the store's part. What a term may promise,
// and why, lives in src/leadership/term.ts; the scopes and waits built on
// terms (whileLeading, whenElected) live in src/leadership/.
import { EventEmitter } from "eventemitter3";
import { leaderProblem } from "../contract/answers";
import type { Claim, ElectionBackend, Leader, Membership } from "../contract/backend";
import { ElectionError, type ElectionPhase } from "../contract/errors";
import { LeaderFeed, type LeaderChanges } from "../leadership/leader-feed";
import { abortError, ElectionStoppedError, LeaseExpiredError, type LeadershipLostError } from "../leadership/lost";
import { Term } from "../leadership/term";
import { whenElected, type FencedWriter, type LeadershipHost, type WaitOptions } from "../leadership/when-elected";
import { whileLeading, type LeadershipRoutine, type WhileLeadingOptions } from "../leadership/while-leading";
import { checkOptions, checkSignal, emitSafely, onAbort, untilAborted } from "../util/abort";
import { later, systemClock, wallNow, type Clock } from "../util/clock";
import { defineAsyncDispose } from "../util/dispose";
import { log } from "../util/log";
import { Campaign, type CampaignHost } from "./campaign";
import { publishError, publishRenewal, publishRetry, publishState } from "./diagnostics";
import type { ResolvedOptions } from "./options";
import { readCandidates, type Candidates } from "./candidates";
import { judgeHealth, resolveHealthOptions, type ElectionHealth, type HealthOptions } from "./health";
import { electionState, type CampaignActivity, type ElectionState } from "./state";
import { StoreCalls } from "./store-calls";

export interface ElectionEvents {
  /** This member became leader. `token` (the fencing token) is larger than any earlier leader's. */
  elected: (token: number) => void;
  /** This member stopped being leader: stopped, lost its membership, or could not renew it in time. */
  unelected: () => void;
  /** On members that do not lead: the name of the member that leads, each time it changes. */
  leader: (name: string) => void;
  /** A store request failed. The election carries on by itself; this is for visibility. */
  error: (error: ElectionError) => void;
}

export { LeaseExpiredError };

export interface StartOptions {
  /** Ties the election's life to this signal: when it aborts, the election stops (as stop() does). */
  signal?: AbortSignal | undefined;
}

export class Election<M extends Membership = Membership> extends EventEmitter<ElectionEvents> {
  private runController: AbortController | undefined;
  private readonly campaigns = new Set<Promise<void>>();
  /** The current run's loop, for yield() and the drain. */
  private campaign: Campaign<M> | undefined;
  /** The whileLeading routines running in the current term, until each settles: what stop() drains. Made when the first one runs. */
  private routines: Set<Promise<void>> | undefined;
  /** A stop()'s drain under way: resolves once the routines have settled (or the bound passed) and the membership's release has begun. */
  protected draining: Promise<void> | undefined;
  private readonly calls: StoreCalls<M>;
  /** The term this member leads in, while it does. */
  private term: Term | undefined;
  /** The membership the current term was won on (for fenced writes). */
  private termMembership: M | undefined;
  /** The campaign's phase the current term belongs to: aborted when the term's deadline passes. */
  private termPhase: AbortController | undefined;
  /** Made when the first scope listens: most members never open one. */
  private termListeners: Set<(term: Term) => void> | undefined;
  private leaderName: string | undefined;
  private readonly leaders = new LeaderFeed();
  private activity: CampaignActivity = "joining";
  private reportedState: ElectionState = "stopped";
  private renewedAt: number | undefined;
  private detachStartSignal: (() => void) | undefined;
  /** Gives up the current run's membership; set while it holds one, for stop() to call first. */
  private leaveOnStop: (() => void) | undefined;
  /** Since the first store error with no success after it (clock.now()), and the last error's message; for health(). */
  private failing: { readonly since: number; lastError: string } | undefined;

  constructor(
    private readonly backend: ElectionBackend<M>,
    /** This member's name, as other members see it in their `leader` events. */
    readonly name: string,
    private readonly options: ResolvedOptions,
    private readonly clock: Clock = systemClock,
    /** Where the first renewal falls in its interval (renewal.ts); timing tests pin it. */
    private readonly random: () => number = Math.random,
  ) {
    super();
    this.calls = new StoreCalls(backend, name, options, clock);
  }

  /**
   * Joins the election on the next tick. Calling it while running does
   * nothing; with a signal that has aborted already, neither does it. Throws a
   * TypeError, and changes nothing, for options that are not an object or a
   * signal that is not an AbortSignal.
   */
  start(options?: StartOptions): this {
    const signal = checkSignal(checkOptions(options, "start()").signal, "start()");
    if (this.runController) return this;
    if (signal?.aborted) return this;
    const controller = new AbortController();
    this.runController = controller;
    if (signal) this.detachStartSignal = onAbort(signal, () => this.stop());
    this.activity = "joining";
    this.failing = undefined;
    this.reportState();
    const begin = () => {
      if (controller.signal.aborted) return;
      const campaign = new Campaign(this.campaignHost(), this.backend, this.calls, this.options, this.clock, this.random, controller.signal);
      this.campaign = campaign;
      const run = campaign.run();
      this.campaigns.add(run);
      void run.finally(() => {
        this.campaigns.delete(run);
        if (this.campaign === campaign) this.campaign = undefined;
      });
    };
    // A start() during the last stop()'s drain joins once that is over: the
    // old run still holds its membership until then.
    if (this.draining) void this.draining.then(() => process.nextTick(begin));
    else process.nextTick(begin);
    return this;
  }

  /**
   * Leaves the election: emits `unelected` at once if this member led, then
   * deletes its membership in the background so that the next member takes
   * over without waiting for the TTL.
   */
  stop(): this {
    this.halt()?.();
    return this;
  }

  /**
   * stop() in two halves, for a caller that stops many members at once and
   * must act in between (an etcd session sends its one revoke there, before
   * ten thousand runs are unwound): this half ends the term (`unelected`),
   * so that nothing of this member leads once it returns, and starts the
   * drain if there is one; it returns the other half (the membership's
   * release and the run's end) when that is still to do. Nothing this member
   * reports in between is news: lead() and follow() check the run is current.
   */
  protected halt(): (() => void) | undefined {
    const controller = this.runController;
    if (!controller) return undefined;
    this.runController = undefined;
    this.detachStartSignal?.();
    this.detachStartSignal = undefined;
    const stopped = new ElectionStoppedError("the election was stopped");
    // Unelected first; then the membership's deletion goes out before
    // anything else is unwound, so that the next member takes over sooner.
    // Aborting `controller` ends the campaign at once, but what it waits on
    // in the store (watches, long polls, streams) is let go a turn of the
    // event loop later (campaign()): clients put a request on the wire only
    // after the turn it was made in, and unwinding in that turn held the
    // deletion back by about a millisecond, a quarter of a failover.
    const wasLeading = this.isLeader();
    this.stepDown(stopped);
    const leave = this.leaveOnStop;
    this.leaveOnStop = undefined;
    const routines = this.routines ? [...this.routines] : [];
    let rest: (() => void) | undefined;
    if (wasLeading && routines.length > 0 && this.options.drainTimeout > 0 && this.campaign?.holdForDrain()) {
      // The drain: the routines' signals have aborted (the step-down above);
      // the membership, first in line, stays held and renewed until they have
      // settled or the bound passes, so no successor's routine starts while
      // ours still finishes.
      log.election("%s draining %d routine(s) before leaving (at most %d ms)", this.name, routines.length, this.options.drainTimeout);
      const drained = this.draining = settledOrAfter(routines, this.options.drainTimeout, this.clock).then(() => {
        leave?.();
        controller.abort(stopped);
        if (this.draining === drained) this.draining = undefined;
      });
    } else {
      rest = () => {
        leave?.();
        controller.abort(stopped);
      };
    }
    this.leaderName = undefined;
    this.leaders.publish(undefined);
    this.reportState();
    return rest;
  }

  /**
   * Stops, and resolves once the membership is deleted from the store or the
   * attempt failed. Bounded by the request timeout; never rejects. Meant for
   * shutdown handlers.
   */
  async leave(): Promise<void> {
    this.stop();
    await this.draining;
    await Promise.all([...this.campaigns]);
    await this.calls.departed();
  }

  isRunning(): boolean {
    return this.runController !== undefined;
  }

  /** True only while this member leads and its lease deadline has not passed. */
  isLeader(): boolean {
    return this.term?.isValid() ?? false;
  }

  /** The leader's name as this member knows it (its own name while it leads). */
  currentLeader(): string | undefined {
    return this.isLeader() ? this.name : this.leaderName;
  }

  /** The fencing token of the current term while this member leads, else undefined. */
  fencingToken(): number | undefined {
    return this.isLeader() ? this.term!.token : undefined;
  }

  /** Milliseconds this member may still act as leader without a further renewal; 0 when it does not lead. */
  leaseRemaining(): number {
    return this.term?.remaining() ?? 0;
  }

  /** What this member is doing: stopped, joining, following, leading or backing-off (see state.ts). */
  get state(): ElectionState {
    return electionState(this.isRunning(), this.isLeader(), this.activity);
  }

  /** When (Date.now() ms) the store last confirmed this member's membership: its creation or a renewal. */
  get lastRenewedAt(): number | undefined {
    return this.renewedAt;
  }

  /**
   * Stops leading and goes to the back of the line, without leaving the
   * election (Curator's requeue, Spring's yield): the term ends (`unelected`;
   * whileLeading's signal aborts with a LeadershipYieldedError, and its
   * routine runs again in this member's next term), the membership is
   * deleted so that the next member in line takes over at once, and this
   * member joins again behind the others. Resolves once another member leads,
   * or once this one leads again because nobody else took over; at once if
   * this member does not lead. Rejects with an AbortError if the election
   * stops or `signal` aborts first. On a race-style store (NATS KV), where
   * nobody is in line, the member leaves the key to the others for a moment
   * (the request timeout, at most 1 s) before it competes again.
   */
  yield(options?: WaitOptions): Promise<void> {
    let signal: AbortSignal | undefined;
    try {
      signal = checkSignal(checkOptions(options, "yield()").signal, "yield()");
    } catch (err) {
      return Promise.reject(err);
    }
    if (signal?.aborted) return Promise.reject(abortError(signal.reason));
    const campaign = this.campaign;
    const run = this.runController?.signal;
    if (!this.isLeader() || !campaign || !run) return Promise.resolve();
    return new Promise<void>((resolve, reject) => {
      const cleanup = () => {
        this.off("leader", onLeader);
        this.off("elected", onElected);
        stopFollowingRun();
        stopFollowingCaller?.();
      };
      const done = () => {
        cleanup();
        resolve();
      };
      const fail = (reason: unknown) => {
        cleanup();
        reject(abortError(reason));
      };
      const onLeader = (name: string) => {
        if (name !== this.name) done();
      };
      const onElected = () => done();
      this.on("leader", onLeader);
      this.on("elected", onElected);
      const stopFollowingRun = onAbort(run, () => fail(run.reason));
      const stopFollowingCaller = signal ? onAbort(signal, () => fail(signal.reason)) : undefined;
      if (!campaign.yieldTerm()) done();
    });
  }

  /**
   * What a health probe needs: the state, whether it leads, how long since the
   * store confirmed it, and two verdicts with their reasons: `live` (false
   * once the member has failed to reach the store, with no success in
   * between, for longer than `unhealthyAfter`) and `ready` (every running
   * member; with `readiness: "leader"`, only the leader). See health.ts.
   * Throws a TypeError or RangeError, naming the value, for bad options.
   */
  health(options?: HealthOptions): ElectionHealth {
    const resolved = resolveHealthOptions(options, this.options.ttlMs);
    const leading = this.isLeader();
    const now = this.clock.now();
    return judgeHealth(
      {
        name: this.name,
        store: this.store,
        running: this.isRunning(),
        state: this.state,
        leading,
        fencingToken: this.fencingToken(),
        leader: this.currentLeader(),
        sinceConfirmedMs: this.renewedAt === undefined ? undefined : Math.max(0, wallNow(this.clock) - this.renewedAt),
        failingForMs: this.failing === undefined ? undefined : Math.max(0, now - this.failing.since),
        lastError: this.failing?.lastError,
      },
      resolved,
    );
  }

  /**
   * Who is in line, read once from the store: `{ scope: "line", members }`,
   * every member in order, the leader first, each `{ name, token }` (etcd);
   * or `{ scope: "leader", members }`, the leader alone, on a store that
   * holds nothing for the others (NATS KV). Works whether this member runs or
   * not; bounded by the request timeout and by `signal`.
   */
  candidates(options?: WaitOptions): Promise<Candidates> {
    try {
      const signal = checkSignal(checkOptions(options, "candidates()").signal, "candidates()");
      return readCandidates(this.backend, this.options.requestTimeout, signal);
    } catch (err) {
      return Promise.reject(err);
    }
  }

  /**
   * Runs `routine` while this member leads, with an AbortSignal that aborts
   * when its term ends, and resolves with what it returns (see src/leadership/while-leading.ts for
   * every rule). Joins if not running, and then leaves when done.
   */
  whileLeading<T>(routine: LeadershipRoutine<T>, options?: WhileLeadingOptions): Promise<T> {
    return whileLeading(this.host(), routine, options);
  }

  /**
   * Resolves with the fencing token once this member leads (at once if it
   * does). Joins if not running. Rejects with an AbortError when the signal
   * aborts or the election stops; if it joined, it has left by then.
   */
  whenElected(options?: WaitOptions): Promise<number> {
    return whenElected(this.host(), options);
  }

  /**
   * The leader as this member knows it (itself while it leads), then each
   * change: `{ name, token }`, or undefined while it knows of no leader.
   * Unbounded buffer, so a slow reader misses nothing. Ends on `break` or
   * when the signal aborts (the next read rejects with an AbortError).
   */
  leaderChanges(options?: WaitOptions): LeaderChanges {
    const signal = checkSignal(checkOptions(options, "leaderChanges()").signal, "leaderChanges()");
    return this.leaders.iterate({ signal });
  }

  /** For `await using`: leave() (Symbol.asyncDispose). */
  declare [Symbol.asyncDispose]: () => Promise<void>;

  /** What a run of the campaign tells this member, and asks of it. */
  private campaignHost(): CampaignHost<M> {
    return new Election.RunHost(this);
  }

  /**
   * The campaign's host as a class, its methods on the prototype: an object
   * of arrow functions cost each member about 0.8 KiB, and a process may run
   * ten thousand elections on one etcd session. Declared in Election's body,
   * so that it may reach the member's private state.
   */
  private static readonly RunHost = class RunHost<M extends Membership> implements CampaignHost<M> {
    constructor(private readonly election: Election<M>) {}

    get name(): string {
      return this.election.name;
    }

    setActivity(activity: CampaignActivity): void {
      this.election.setActivity(activity);
    }

    follow(leader: Leader | undefined): void {
      this.election.follow(leader);
    }

    lead(turn: Claim<M>, confirmedAt: number, phase: AbortController): void {
      this.election.lead(turn, confirmedAt, phase);
    }

    stepDown(reason: LeadershipLostError): void {
      this.election.stepDown(reason);
    }

    held(): void {
      const election = this.election;
      election.failing = undefined;
      election.renewedAt = wallNow(election.clock);
    }

    renewed(membership: M, sentAt: number): void {
      const election = this.election;
      election.failing = undefined;
      election.term?.extend(sentAt);
      election.renewalConfirmed(membership, sentAt);
    }

    report(phase: ElectionPhase, error: unknown, attempt: number): void {
      this.election.report(phase, error, attempt);
    }

    retrying(phase: ElectionPhase, error: unknown, attempt: number, delayMs: number): void {
      this.election.retrying(phase, error, attempt, delayMs);
    }

    setLeaveOnStop(leave: (() => void) | undefined): void {
      this.election.leaveOnStop = leave;
    }

    later(callback: () => void): void {
      later(this.election.clock, callback);
    }
  };

  private host(): LeadershipHost {
    return {
      isRunning: () => this.isRunning(),
      start: () => void this.start(),
      leave: () => this.leave(),
      isLeader: () => this.isLeader(),
      leaseRemaining: () => this.leaseRemaining(),
      currentTerm: () => this.term,
      runSignal: () => this.runController?.signal,
      onTerm: (listener) => {
        const listeners = (this.termListeners ??= new Set());
        listeners.add(listener);
        return () => listeners.delete(listener);
      },
      fencedWriter: (term) => this.fencedWriter(term),
      routineRunning: (settled) => {
        const routines = (this.routines ??= new Set());
        routines.add(settled);
        void settled.then(() => routines.delete(settled));
      },
    };
  }

  /** For `term`'s scopes: the backend's fenced write on the membership the term was won on, bounded by the request timeout. */
  private fencedWriter(term: Term): FencedWriter | undefined {
    const backend = this.backend;
    const membership = term === this.term ? this.termMembership : undefined;
    if (!backend.fencedWrite || !membership) return undefined;
    return (...operations) => {
      const bound = AbortSignal.timeout(this.options.requestTimeout);
      return untilAborted("fenced write", Promise.resolve().then(() => backend.fencedWrite!(membership, operations, bound)), bound);
    };
  }

  private follow(leader: Leader | undefined): void {
    // `leader` is for members that do not lead: a backend that still reports
    // one to a leader (a resynchronising phase, say) tells it nothing new;
    // nor does one to a member halfway through stopping (halt()).
    if (this.isLeader() || !this.runController) return;
    const problem = leaderProblem(leader);
    if (problem) {
      this.report("wait", new TypeError(`${this.store} reported a leader that ${problem}; it is ignored`), 1);
      return;
    }
    // The store answered: on a race-style store, the only sign of it a follower gets.
    this.failing = undefined;
    this.leaders.publish(leader);
    if (leader === undefined || leader.name === this.leaderName) return;
    this.leaderName = leader.name;
    emitSafely(() => this.emit("leader", leader.name));
  }

  /**
   * Leads on `turn`, whose newest confirmed write was sent at `confirmedAt`;
   * when its deadline passes, `phase` is aborted. Called again for the same
   * term after a resynchronisation, it only extends the term.
   */
  private lead(turn: Claim<M>, confirmedAt: number, phase: AbortController): void {
    // A run that stop() holds for its drain never leads again.
    if (!this.runController) return;
    const current = this.term;
    if (current?.isValid() && current.token === turn.token) {
      this.termPhase = phase;
      return current.extend(confirmedAt);
    }
    if (current) this.stepDown(new LeaseExpiredError("the term's deadline passed"));
    const term = new Term(turn.token, this.clock, this.horizonFor(turn), confirmedAt, (error) => this.expireTerm(error));
    this.term = term;
    this.termMembership = turn.membership;
    this.failing = undefined;
    this.termPhase = phase;
    this.leaderName = undefined;
    // The scopes waiting for a term hear first, then the leader feed, then `elected` listeners.
    for (const listener of [...(this.termListeners ?? [])]) listener(term);
    this.leaders.publish({ name: this.name, token: turn.token });
    this.reportState();
    log.election("%s elected (token %d)", this.name, turn.token);
    emitSafely(() => this.emit("elected", turn.token));
  }

  /**
   * How long after a confirmed write a term on `turn` may last: the TTL the
   * store applies (never more than the one asked for, so a longer lease than
   * asked changes nothing) less the step-down margin. A store whose TTL is too
   * short for the options cannot be led on safely.
   */
  private horizonFor(turn: Claim<M>): number {
    const ttlMs = Math.min(this.options.ttlMs, turn.ttlMs);
    const horizon = ttlMs - this.options.stepDownMargin;
    if (!(horizon > this.options.refreshInterval)) {
      throw new RangeError(
        `the store keeps ${turn.membership.id} for ${turn.ttlMs} ms, too short for a refreshInterval of ` +
          `${this.options.refreshInterval} ms and a stepDownMargin of ${this.options.stepDownMargin} ms: ` +
          "give the store a longer TTL or the election shorter timings",
      );
    }
    return horizon;
  }

  private expireTerm(error: LeaseExpiredError): void {
    const phase = this.termPhase;
    this.stepDown(error);
    phase?.abort(error);
  }

  /** Ends the term, if any: its signal aborts with `reason` before `unelected` is emitted. */
  private stepDown(reason: LeadershipLostError): void {
    this.termPhase = undefined;
    const term = this.term;
    if (!term) return;
    this.term = undefined;
    term.end(reason);
    this.leaders.publish(undefined);
    this.reportState();
    log.election("%s unelected", this.name);
    emitSafely(() => this.emit("unelected"));
  }

  private report(phase: ElectionPhase, error: unknown, attempt: number): void {
    const wrapped = new ElectionError(phase, attempt, error);
    if (this.failing) this.failing.lastError = wrapped.message;
    else this.failing = { since: this.clock.now(), lastError: wrapped.message };
    log.election("%s: %s", this.name, wrapped.message);
    publishError(() => ({ source: this, member: this.name, store: this.store, error: wrapped }));
    emitSafely(() => this.emit("error", wrapped));
  }

  // State and diagnostics: the hooks the campaign calls.

  private get store(): string {
    return this.calls.store;
  }

  private setActivity(activity: CampaignActivity): void {
    this.activity = activity;
    this.reportState();
  }

  /** Publishes the state on the diagnostics channel when it differs from the last one published. */
  private reportState(): void {
    const to = this.state;
    const from = this.reportedState;
    if (to === from) return;
    this.reportedState = to;
    publishState(() => ({
      source: this,
      member: this.name,
      store: this.store,
      from,
      to,
      token: to === "leading" ? this.term?.token : undefined,
    }));
  }

  private renewalConfirmed(membership: M, sentAt: number): void {
    this.renewedAt = wallNow(this.clock);
    const roundTripMs = this.clock.now() - sentAt;
    publishRenewal(() => ({
      source: this,
      member: this.name,
      store: this.store,
      membership: membership.id,
      roundTripMs,
      leading: this.isLeader(),
    }));
  }

  private retrying(phase: ElectionPhase, error: unknown, attempt: number, delayMs: number): void {
    publishRetry(() => ({ source: this, member: this.name, store: this.store, phase, attempt, delayMs, error }));
  }
}

/** Resolves once every one of `routines` has settled, or after `ms`, whichever comes first. */
function settledOrAfter(routines: Array<Promise<void>>, ms: number, clock: Clock): Promise<void> {
  return new Promise<void>((resolve) => {
    const timer = clock.setTimeout(resolve, ms);
    void Promise.all(routines).then(() => {
      clock.clearTimeout(timer);
      resolve();
    });
  });
}

defineAsyncDispose(Election, function (this: Election) {
  return this.leave();
});
