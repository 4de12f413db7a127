// The election state machine: join, wait for the turn, lead, step down, retry,
// stop, as one plain loop (`campaign`). It knows nothing about the store; a
// backend (src/contract/backend.ts) does the store's part. What a term may promise, and
// why, lives in src/leadership/term.ts; the scopes and waits built on terms (whileLeading,
// whenElected) live in src/leadership/while-leading.ts and src/leadership/when-elected.ts.
import { EventEmitter } from "eventemitter3";
import { checkOptions, checkSignal, ChildAbortController, deadline, emitSafely, onAbort, sleep, untilAborted } from "../util/abort";
import type { Claim, ElectionBackend, Leader, Membership } from "../contract/backend";
import { Backoff } from "../util/backoff";
import { callBackend as call, heldClaimProblem, InvalidClaimError, leaderProblem, newClaimProblem } from "../contract/answers";
import { later, systemClock, wallNow, type Clock } from "../util/clock";
import { publishError, publishRenewal, publishRetry, publishState } from "./diagnostics";
import { defineAsyncDispose } from "../util/dispose";
import { ElectionError, MembershipLostError, isMembershipLost, type ElectionPhase } from "../contract/errors";
import { LeaderFeed, type LeaderChanges } from "../leadership/leader-feed";
import { ElectionStoppedError, LeaseExpiredError, MembershipRemovedError, type LeadershipLostError } from "../leadership/lost";
import { log } from "../util/log";
import type { ResolvedOptions } from "./options";
import { Renewal } from "./renewal";
import { whileLeading, type LeadershipRoutine, type WhileLeadingOptions } from "../leadership/while-leading";
import { electionState, type CampaignActivity, type ElectionState } from "./state";
import { Term } from "../leadership/term";
import { whenElected, type LeadershipHost, type WaitOptions } from "../leadership/when-elected";

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

/** Aborts a phase when its watches may be stale: start it over without counting a failure. */
const RESYNC = Symbol("resync");

export class Election<M extends Membership = Membership> extends EventEmitter<ElectionEvents> {
  private runController: AbortController | undefined;
  private readonly campaigns = new Set<Promise<void>>();
  /** Memberships being given up in the background; made at the first. */
  private departures: Set<Promise<void>> | undefined;
  /** The term this member leads in, while it does. */
  private term: Term | undefined;
  /** Ends the phase the current term belongs to when its deadline passes. */
  private onTermExpired: ((error: LeaseExpiredError) => void) | undefined;
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

  /** The clock's later(): where stop() lets the waits go, a turn after the deletion went out. */
  private readonly later = (callback: () => void) => later(this.clock, callback);

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
    this.reportState();
    process.nextTick(() => {
      if (controller.signal.aborted) return;
      track(this.campaigns, this.campaign(controller.signal));
    });
    return this;
  }

  /**
   * Leaves the election: emits `unelected` at once if this member led, then
   * deletes its membership in the background so that the next member takes
   * over without waiting for the TTL.
   */
  stop(): this {
    const controller = this.runController;
    if (!controller) return this;
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
    this.stepDown(stopped);
    const leave = this.leaveOnStop;
    this.leaveOnStop = undefined;
    leave?.();
    controller.abort(stopped);
    this.leaderName = undefined;
    this.leaders.publish(undefined);
    this.reportState();
    return this;
  }

  /**
   * Stops, and resolves once the membership is deleted from the store or the
   * attempt failed. Bounded by the request timeout; never rejects. Meant for
   * shutdown handlers.
   */
  async leave(): Promise<void> {
    this.stop();
    await Promise.all([...this.campaigns]);
    await Promise.all([...(this.departures ?? [])]);
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
    };
  }

  // Every call into the backend is also cut short by its signal here: a
  // backend of the user's own that ignores the signal must not keep stop(),
  // or a renewal's timeout, waiting.
  private async campaign(signal: AbortSignal): Promise<void> {
    const backoff = new Backoff(this.options.retryInitialDelay, this.options.retryMaxDelay, this.random);
    /** What this member holds on the store: from joining (queue-style stores) or from winning (race-style). */
    let claim: Claim<M> | undefined;
    let renewal: Renewal<M> | undefined;
    let membershipLost: unknown;
    /** The deletion stop() started, if it did. */
    let departure: Promise<void> | undefined;
    const setLeaveOnStop = (leave: (() => void) | undefined) => {
      // Only while this run is the current one: a start() after stop() has its own.
      if (!signal.aborted) this.leaveOnStop = leave;
    };
    // Aborted by stop() too (stop() aborts `signal`), on the next turn of the
    // event loop (see stop()); by a resync, a lost membership or an expired
    // term at once; and released when the phase is over. Until stop() reaches
    // the phase, what the store answers is dropped here: every step below
    // checks `signal` after its wait.
    let phase = new ChildAbortController(signal, this.later);

    const hold = (held: Claim<M>) => {
      claim = held;
      this.renewedAt = wallNow(this.clock);
      renewal = new Renewal(this.backend, held.membership, this.options, this.clock, {
        renewed: (at) => {
          if (signal.aborted) return;
          this.term?.extend(at);
          this.renewalConfirmed(held.membership, at);
        },
        failed: (error, attempt) => {
          if (!signal.aborted) this.report("renew", error, attempt);
        },
        retrying: (error, attempt, delayMs) => {
          if (!signal.aborted) this.retrying("renew", error, attempt, delayMs);
        },
        recovered: () => phase.abort(RESYNC),
        lost: (error) => {
          membershipLost = error;
          phase.abort(error);
        },
      }, this.random);
      renewal.start(held.sentAt);
      setLeaveOnStop(() => {
        departure = this.leaveStore(held.membership);
      });
    };

    const dropMembership = () => {
      setLeaveOnStop(undefined);
      renewal?.stop();
      renewal = undefined;
      // The key is gone, but a v3 lease may outlive it: give up what is left.
      if (claim) this.leaveInBackground(claim.membership);
      claim = undefined;
      membershipLost = undefined;
    };

    try {
      while (!signal.aborted) {
        const phaseSignal = phase.signal;
        let step: ElectionPhase = "join";
        try {
          this.setActivity(claim || !this.backend.join ? "following" : "joining");
          if (membershipLost !== undefined) throw membershipLost;
          if (!claim && this.backend.join) {
            const joined = await this.join(this.backend.join);
            hold(joined);
            if (signal.aborted) break;
            log.election("%s joined as %s (token %d)", this.name, joined.membership.id, joined.token);
            backoff.reset();
            this.setActivity("following");
          }

          step = "wait";
          // Who leads, as the backend reports it while this member waits; a
          // report after the turn came (a backend's late callback) is not news.
          let waiting = true;
          const onLeader = (leader: Leader | undefined) => {
            if (waiting && !signal.aborted) this.follow(leader);
          };
          const turn = await untilAborted("wait", call(() => this.backend.awaitTurn(claim, onLeader, phaseSignal)), phaseSignal).finally(
            () => (waiting = false),
          );
          this.checkTurn(turn, claim);
          // A race-style store holds nothing for a member until it wins (and
          // one that won just as stop() was called has a key to delete).
          if (!claim) hold(turn);
          if (signal.aborted) break;
          backoff.reset();

          step = "lead";
          const confirmedAt = await this.provenAlive(renewal!, phaseSignal);
          if (signal.aborted) break;
          this.lead(turn, confirmedAt, phase);
          await untilAborted("lead", call(() => this.backend.awaitLoss(turn.membership, phaseSignal)), phaseSignal);
          throw new MembershipLostError(`membership ${turn.membership.id} was removed from the store`);
        } catch (thrown) {
          if (signal.aborted) break;
          const reason = phase.signal.aborted ? phase.signal.reason : thrown;
          if (reason === RESYNC) {
            log.election("%s resynchronising after a store outage", this.name);
            continue;
          }
          if (isMembershipLost(reason)) {
            this.stepDown(
              new MembershipRemovedError(`the store no longer holds this member's membership: ${reason.message}`, {
                cause: reason,
              }),
            );
            log.election("%s lost its membership: %s", this.name, reason.message);
            dropMembership();
          }
          this.report(step, reason, backoff.attempts + 1);
          // That answer came from the store: it is reachable again, and the
          // failures before it (a partition that just healed) need not delay
          // the rejoin. A join that succeeds resets the count anyway.
          if (isMembershipLost(reason)) backoff.reset();
          await this.backOff(step, reason, backoff, signal);
        } finally {
          phase.release(new Error("phase over"));
          phase = new ChildAbortController(signal, this.later);
        }
      }
    } finally {
      setLeaveOnStop(undefined);
      renewal?.stop();
      if (claim) await (departure ?? this.leaveStore(claim.membership));
    }
  }

  /**
   * The send time of a confirmed write to count this term's deadline from.
   * That the membership still exists was shown by awaitTurn, after the turn
   * came; a renewal only bounds how long it lives. A recent one will do:
   * renewing first would add a store write to every failover. An older one,
   * or none, means renewing now.
   */
  private async provenAlive(renewal: Renewal<M>, signal: AbortSignal): Promise<number> {
    const last = renewal.lastConfirmedSentAt;
    if (this.clock.now() - last < this.options.refreshInterval) return last;
    return renewal.renewNow(signal);
  }

  /**
   * Takes a place in line: the backend's join, checked as it crosses over.
   * Not cut short by stop(): the store may create the key all the same, and
   * only a finished join says what to delete. Bounded by the request timeout,
   * even for a backend that ignores its signal; the backend removes what the store made of a join it was told to
   * abandon, and what one that answers later anyway hands over is given back.
   */
  private async join(join: (signal: AbortSignal) => Promise<Claim<M>>): Promise<Claim<M>> {
    const bound = deadline(this.options.requestTimeout, this.clock);
    const joining = call(() => join.call(this.backend, bound.signal));
    try {
      const joined = await untilAborted("join", joining, bound.signal);
      this.checkNewClaim(joined);
      return joined;
    } catch (err) {
      if (bound.signal.aborted) {
        joining.then(
          (late) => this.giveBack(late),
          () => undefined,
        );
      }
      throw err;
    } finally {
      bound.clear();
    }
  }

  /**
   * Throws an InvalidClaimError for a claim that breaks the contract
   * (claim-rules.ts), after giving back what it may hold on the store.
   */
  private checkNewClaim(claim: Claim<M>): void {
    const problem = newClaimProblem(claim, this.clock.now());
    if (!problem) return;
    this.giveBack(claim);
    throw new InvalidClaimError(this.store, problem.field, problem.problem);
  }

  /** The claim awaitTurn resolved with: what it was handed back, or (race-style) a new one. */
  private checkTurn(turn: Claim<M>, held: Claim<M> | undefined): void {
    if (!held) return this.checkNewClaim(turn);
    const problem = heldClaimProblem(turn, held);
    if (problem) throw new InvalidClaimError(this.store, problem.field, problem.problem);
  }

  /** Gives up, in the background, the membership a claim we will not hold names, if it names one. */
  private giveBack(claim: Claim<M> | undefined): void {
    const membership = (claim as { membership?: unknown } | undefined)?.membership;
    if (typeof membership === "object" && membership !== null) this.leaveInBackground(membership as M);
  }

  private leaveInBackground(membership: M): void {
    track((this.departures ??= new Set()), this.leaveStore(membership));
  }

  private async leaveStore(membership: M): Promise<void> {
    // On stop()'s way to the deletion: a plain timer (src/util/abort.ts, deadline()).
    const bound = deadline(this.options.requestTimeout, this.clock);
    try {
      await untilAborted("leave", call(() => this.backend.leave(membership, bound.signal)), bound.signal);
      log.election("%s left: deleted %s", this.name, membership.id);
    } catch (err) {
      log.election("%s could not delete %s: %s", this.name, membership.id, err instanceof Error ? err.message : String(err));
    } finally {
      bound.clear();
    }
  }

  private follow(leader: Leader | undefined): void {
    // `leader` is for members that do not lead: a backend that still reports
    // one to a leader (a resynchronising phase, say) tells it nothing new.
    if (this.isLeader()) return;
    const problem = leaderProblem(leader);
    if (problem) {
      this.report("wait", new TypeError(`${this.store} reported a leader that ${problem}; it is ignored`), 1);
      return;
    }
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
    const current = this.term;
    if (current?.isValid() && current.token === turn.token) {
      this.onTermExpired = (error) => phase.abort(error);
      return current.extend(confirmedAt);
    }
    if (current) this.stepDown(new LeaseExpiredError("the term's deadline passed"));
    const term = new Term(turn.token, this.clock, this.horizonFor(turn), confirmedAt, (error) => this.expireTerm(error));
    this.term = term;
    this.onTermExpired = (error) => phase.abort(error);
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
    const expired = this.onTermExpired;
    this.stepDown(error);
    expired?.(error);
  }

  /** Ends the term, if any: its signal aborts with `reason` before `unelected` is emitted. */
  private stepDown(reason: LeadershipLostError): void {
    this.onTermExpired = undefined;
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
    log.election("%s: %s", this.name, wrapped.message);
    publishError(() => ({ source: this, member: this.name, store: this.store, error: wrapped }));
    emitSafely(() => this.emit("error", wrapped));
  }

  // State and diagnostics: the hooks the campaign above calls.

  private get store(): string {
    return this.backend.description ?? "custom backend";
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

  /** Waits before the campaign's next try; the signal (stop()) cuts the wait short. */
  private async backOff(phase: ElectionPhase, error: unknown, backoff: Backoff, signal: AbortSignal): Promise<void> {
    const delayMs = backoff.next();
    this.setActivity("backing-off");
    this.retrying(phase, error, backoff.attempts, delayMs);
    await sleep(this.clock, delayMs, signal).catch(() => undefined);
  }
}

defineAsyncDispose(Election, function (this: Election) {
  return this.leave();
});

/** Keeps `work` in `set` until it settles. */
function track(set: Set<Promise<void>>, work: Promise<void>): void {
  set.add(work);
  void work.finally(() => set.delete(work));
}
