// The election state machine: join, wait for the turn, lead, step down, retry,
// stop. It knows nothing about the store; a backend (backend.ts) does the
// store's part.
//
// The safety argument, which every change here must keep:
// - A member leads only when the store has shown it first in line with its
//   membership still held after the last older member went (awaitTurn), and
//   confirmed a renewal of that membership (or its creation) sent at time S.
// - The store keeps the membership at least until S + TTL (it applied the
//   renewal after S). No other member can be first in line before then.
// - The member believes it leads only until S + TTL - stepDownMargin, measured
//   on a monotonic clock. `isLeader()` checks that deadline on every call, so a
//   process that was frozen past it answers false before any timer has run.
// So, as long as clocks advance at rates that differ by less than the margin
// over one TTL, the old leader stops believing before a successor can start.
// A deletion of the key from outside is the one exception: the member learns
// it from a watch, as fast as the successor does, not before.
import { EventEmitter } from "eventemitter3";
import { emitSafely, sleep } from "./abort";
import type { ElectionBackend, Leader, Membership } from "./backend";
import { Backoff } from "./backoff";
import { systemClock, type Clock } from "./clock";
import { publishError, publishRenewal, publishRetry, publishState } from "./diagnostics";
import { defineAsyncDispose } from "./dispose";
import { ElectionError, MembershipLostError, isMembershipLost, type ElectionPhase } from "./errors";
import { LeaderFeed, type LeaderChanges } from "./leader-changes";
import { ElectionStoppedError, LeadershipLostError, LeaseExpiredError, MembershipRemovedError } from "./leadership-lost";
import { log } from "./log";
import type { ResolvedOptions } from "./options";
import { Renewal } from "./renewal";
import { whileLeading, type LeadershipRoutine, type WhileLeadingOptions } from "./scope";
import { electionState, type CampaignActivity, type ElectionState } from "./state";
import { whenElected, type LeadershipHost, type Term, type WaitOptions } from "./until-elected";

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
  /** Memberships being given up in the background. */
  private readonly departures = new Set<Promise<void>>();
  private leading = false;
  private token: number | undefined;
  private leaderName: string | undefined;
  private leaseDeadline = -Infinity;
  private deadlineTimer: unknown;
  private onLeaseExpired: ((error: LeaseExpiredError) => void) | undefined;
  /** The term under way while leading; aborted, with the reason, when it ends. */
  private term: { token: number; controller: AbortController } | undefined;
  private readonly termListeners = new Set<(term: Term) => void>();
  private readonly leaders = new LeaderFeed();
  private activity: CampaignActivity = "joining";
  private reportedState: ElectionState = "stopped";
  private renewedAt: number | undefined;
  private detachStartSignal: (() => void) | undefined;

  constructor(
    private readonly backend: ElectionBackend<M>,
    /** This member's name, as other members see it in their `leader` events. */
    readonly name: string,
    private readonly options: ResolvedOptions,
    private readonly clock: Clock = systemClock,
  ) {
    super();
  }

  /** Joins the election on the next tick. Calling it while running does nothing. */
  start(options: StartOptions = {}): this {
    if (this.runController) return this;
    const { signal } = options;
    if (signal?.aborted) return this;
    const controller = new AbortController();
    this.runController = controller;
    if (signal) {
      const onAbort = () => this.stop();
      signal.addEventListener("abort", onAbort, { once: true });
      this.detachStartSignal = () => signal.removeEventListener("abort", onAbort);
    }
    this.activity = "joining";
    this.reportState();
    process.nextTick(() => {
      if (controller.signal.aborted) return;
      const campaign = this.campaign(controller.signal);
      this.campaigns.add(campaign);
      void campaign.finally(() => this.campaigns.delete(campaign));
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
    controller.abort(stopped);
    this.stepDown(stopped);
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
    await Promise.all([...this.departures]);
  }

  isRunning(): boolean {
    return this.runController !== undefined;
  }

  /** True only while this member leads and its lease deadline has not passed. */
  isLeader(): boolean {
    return this.leading && this.clock.now() < this.leaseDeadline;
  }

  /** The leader's name as this member knows it (its own name while it leads). */
  currentLeader(): string | undefined {
    return this.isLeader() ? this.name : this.leaderName;
  }

  /** The fencing token of the current term while this member leads, else undefined. */
  fencingToken(): number | undefined {
    return this.isLeader() ? this.token : undefined;
  }

  /** Milliseconds this member may still act as leader without a further renewal; 0 when it does not lead. */
  leaseRemaining(): number {
    return this.isLeader() ? this.leaseDeadline - this.clock.now() : 0;
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
   * when its term ends, and resolves with what it returns (see scope.ts for
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
  leaderChanges(options: WaitOptions = {}): LeaderChanges {
    return this.leaders.iterate({ signal: options.signal });
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
      currentTerm: () => (this.term ? { token: this.term.token, signal: this.term.controller.signal } : undefined),
      runSignal: () => this.runController?.signal,
      onTerm: (listener) => {
        this.termListeners.add(listener);
        return () => this.termListeners.delete(listener);
      },
    };
  }

  private async campaign(signal: AbortSignal): Promise<void> {
    const backoff = new Backoff(this.options.retryInitialDelay, this.options.retryMaxDelay);
    let membership: M | undefined;
    let renewal: Renewal<M> | undefined;
    let membershipLost: unknown;
    let phase = new AbortController();

    const dropMembership = () => {
      renewal?.stop();
      renewal = undefined;
      // The key is gone, but a v3 lease may outlive it: give up what is left.
      if (membership) this.leaveInBackground(membership);
      membership = undefined;
      membershipLost = undefined;
    };

    try {
      while (!signal.aborted) {
        phase = new AbortController();
        const phaseSignal = AbortSignal.any([signal, phase.signal]);
        let step: ElectionPhase = "join";
        try {
          this.setActivity(membership ? "following" : "joining");
          if (membershipLost !== undefined) throw membershipLost;
          if (!membership) {
            const sentAt = this.clock.now();
            // Not aborted by stop(): the store may create the key even if we
            // stop listening, and only a finished join tells us what to delete.
            const joined = await this.backend.join(AbortSignal.timeout(this.options.requestTimeout));
            membership = joined;
            if (signal.aborted) break;
            this.renewedAt = Date.now();
            log.election("%s joined as %s (token %d)", this.name, joined.id, joined.token);
            backoff.reset();
            renewal = new Renewal(this.backend, joined, this.options, this.clock, {
              renewed: (at) => {
                if (!signal.aborted) this.extendLease(at);
                if (!signal.aborted) this.renewalConfirmed(joined, at);
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
            });
            renewal.start(sentAt);
            this.setActivity("following");
          }

          step = "wait";
          await this.backend.awaitTurn(membership, (leader) => this.follow(leader), phaseSignal);
          backoff.reset();

          step = "lead";
          const confirmedAt = await this.provenAlive(renewal!, phaseSignal);
          this.lead(membership.token, confirmedAt, phase);
          await this.backend.awaitLoss(membership, phaseSignal);
          throw new MembershipLostError(`membership ${membership.id} was removed from the store`);
        } catch (thrown) {
          if (signal.aborted) break;
          const reason = phase.signal.aborted ? phase.signal.reason : thrown;
          if (reason === RESYNC) {
            log.election("%s resynchronising after a store outage", this.name);
            continue;
          }
          if (isMembershipLost(reason)) {
            this.stepDown(new MembershipRemovedError(`the store no longer holds this member's membership: ${(reason as Error).message}`, { cause: reason }));
            log.election("%s lost its membership: %s", this.name, (reason as Error).message);
            dropMembership();
          }
          this.report(step, reason, backoff.attempts + 1);
          await this.backOff(step, reason, backoff, signal);
        } finally {
          phase.abort(new Error("phase over"));
        }
      }
    } finally {
      renewal?.stop();
      if (membership) await this.leaveStore(membership);
    }
  }

  /**
   * The send time of a confirmed renewal to count this term's deadline from.
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

  private leaveInBackground(membership: M): void {
    const departure = this.leaveStore(membership);
    this.departures.add(departure);
    void departure.finally(() => this.departures.delete(departure));
  }

  private async leaveStore(membership: M): Promise<void> {
    try {
      await this.backend.leave(membership, AbortSignal.timeout(this.options.requestTimeout));
      log.election("%s left: deleted %s", this.name, membership.id);
    } catch (err) {
      log.election("%s could not delete %s: %s", this.name, membership.id, (err as Error).message);
    }
  }

  private follow(leader: Leader | undefined): void {
    this.leaders.publish(leader);
    if (leader === undefined || leader.name === this.leaderName) return;
    this.leaderName = leader.name;
    emitSafely(() => this.emit("leader", leader.name));
  }

  private lead(token: number, confirmedAt: number, phase: AbortController): void {
    this.onLeaseExpired = (error) => phase.abort(error);
    this.extendLease(confirmedAt);
    if (this.clock.now() >= this.leaseDeadline) {
      throw new LeaseExpiredError("the renewal that was to confirm this term came too late");
    }
    if (this.leading) return;
    this.leading = true;
    this.token = token;
    this.leaderName = undefined;
    this.beginTerm(token);
    log.election("%s elected (token %d)", this.name, token);
    emitSafely(() => this.emit("elected", token));
  }

  /** A renewal sent at `sentAt` was confirmed: a leader may believe it leads until sentAt + TTL - margin. */
  private extendLease(sentAt: number): void {
    // A deadline that passed (the process was frozen, or the event loop
    // blocked) is final: step down first, even if this renewal made it.
    if (this.leading && this.clock.now() >= this.leaseDeadline) return this.expireLease();
    this.leaseDeadline = Math.max(this.leaseDeadline, sentAt + this.options.leaseHorizon);
    if (this.onLeaseExpired) this.armDeadline();
  }

  private armDeadline(): void {
    if (this.deadlineTimer !== undefined) this.clock.clearTimeout(this.deadlineTimer);
    this.deadlineTimer = this.clock.setTimeout(() => {
      this.deadlineTimer = undefined;
      if (!this.leading) return;
      if (this.clock.now() < this.leaseDeadline) return this.armDeadline();
      this.expireLease();
    }, Math.max(0, this.leaseDeadline - this.clock.now()));
  }

  private expireLease(): void {
    const expired = this.onLeaseExpired;
    const error = new LeaseExpiredError(
      `no renewal was confirmed within ${this.options.leaseHorizon} ms of the last one sent; stepped down`,
    );
    this.stepDown(error);
    expired?.(error);
  }

  private stepDown(reason: LeadershipLostError): void {
    if (this.deadlineTimer !== undefined) {
      this.clock.clearTimeout(this.deadlineTimer);
      this.deadlineTimer = undefined;
    }
    this.onLeaseExpired = undefined;
    this.leaseDeadline = -Infinity;
    if (!this.leading) return;
    this.leading = false;
    this.token = undefined;
    this.endTerm(reason);
    log.election("%s unelected", this.name);
    emitSafely(() => this.emit("unelected"));
  }

  private report(phase: ElectionPhase, error: unknown, attempt: number): void {
    const wrapped = new ElectionError(phase, attempt, error);
    log.election("%s: %s", this.name, wrapped.message);
    publishError(() => ({ source: this, member: this.name, store: this.backend.description, error: wrapped }));
    emitSafely(() => this.emit("error", wrapped));
  }

  // Terms, state and diagnostics: the hooks the campaign above calls.

  /** A term begins: the scopes waiting for it hear first, then the feed, then `elected` listeners. */
  private beginTerm(token: number): void {
    const controller = new AbortController();
    this.term = { token, controller };
    const term: Term = { token, signal: controller.signal };
    for (const listener of [...this.termListeners]) listener(term);
    this.leaders.publish({ name: this.name, token });
    this.reportState();
  }

  /** The term ends: its signal aborts with the reason before `unelected` is emitted. */
  private endTerm(reason: LeadershipLostError): void {
    const term = this.term;
    this.term = undefined;
    term?.controller.abort(reason);
    this.leaders.publish(undefined);
    this.reportState();
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
      store: this.backend.description,
      from,
      to,
      token: to === "leading" ? this.token : undefined,
    }));
  }

  private renewalConfirmed(membership: M, sentAt: number): void {
    this.renewedAt = Date.now();
    const roundTripMs = this.clock.now() - sentAt;
    publishRenewal(() => ({
      source: this,
      member: this.name,
      store: this.backend.description,
      membership: membership.id,
      roundTripMs,
      leading: this.isLeader(),
    }));
  }

  private retrying(phase: ElectionPhase, error: unknown, attempt: number, delayMs: number): void {
    publishRetry(() => ({ source: this, member: this.name, store: this.backend.description, phase, attempt, delayMs, error }));
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
