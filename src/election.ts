// The election state machine: join, wait for the turn, lead, step down, retry,
// stop, as one plain loop (`campaign`). It knows nothing about the store; a
// backend (backend.ts) does the store's part. What a term may promise, and
// why, lives in term.ts.
import { EventEmitter } from "eventemitter3";
import { emitSafely, sleep, untilAborted } from "./abort";
import type { Claim, ElectionBackend, Membership } from "./backend";
import { Backoff } from "./backoff";
import { systemClock, type Clock } from "./clock";
import { ElectionError, MembershipLostError, isMembershipLost, type ElectionPhase } from "./errors";
import { log } from "./log";
import type { ResolvedOptions } from "./options";
import { Renewal } from "./renewal";
import { LeaseExpiredError, Term } from "./term";

export { LeaseExpiredError } from "./term";

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

/** Aborts a phase when its watches may be stale: start it over without counting a failure. */
const RESYNC = Symbol("resync");

export class Election<M extends Membership = Membership> extends EventEmitter<ElectionEvents> {
  private runController: AbortController | undefined;
  private readonly campaigns = new Set<Promise<void>>();
  /** Memberships being given up in the background. */
  private readonly departures = new Set<Promise<void>>();
  /** The term this member leads in, while it does. */
  private term: Term | undefined;
  /** Ends the phase the current term belongs to when its deadline passes. */
  private onTermExpired: ((error: LeaseExpiredError) => void) | undefined;
  private leaderName: string | undefined;

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
  start(): this {
    if (this.runController) return this;
    const controller = new AbortController();
    this.runController = controller;
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
    controller.abort(new Error("election stopped"));
    this.stepDown();
    this.leaderName = undefined;
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

  // Every call into the backend is also cut short by its signal here: a
  // backend of the user's own that ignores the signal must not keep stop(),
  // or a renewal's timeout, waiting.
  private async campaign(signal: AbortSignal): Promise<void> {
    const backoff = new Backoff(this.options.retryInitialDelay, this.options.retryMaxDelay);
    /** What this member holds on the store: from joining (queue-style stores) or from winning (race-style). */
    let claim: Claim<M> | undefined;
    let renewal: Renewal<M> | undefined;
    let membershipLost: unknown;
    let phase = new AbortController();

    const hold = (held: Claim<M>) => {
      claim = held;
      renewal = new Renewal(this.backend, held.membership, this.options, this.clock, {
        renewed: (at) => {
          if (!signal.aborted) this.term?.extend(at);
        },
        failed: (error, attempt) => {
          if (!signal.aborted) this.report("renew", error, attempt);
        },
        recovered: () => phase.abort(RESYNC),
        lost: (error) => {
          membershipLost = error;
          phase.abort(error);
        },
      });
      renewal.start(held.sentAt);
    };

    const dropMembership = () => {
      renewal?.stop();
      renewal = undefined;
      // The key is gone, but a v3 lease may outlive it: give up what is left.
      if (claim) this.leaveInBackground(claim.membership);
      claim = undefined;
      membershipLost = undefined;
    };

    try {
      while (!signal.aborted) {
        phase = new AbortController();
        const phaseSignal = AbortSignal.any([signal, phase.signal]);
        let step: ElectionPhase = "join";
        try {
          if (membershipLost !== undefined) throw membershipLost;
          if (!claim && this.backend.join) {
            // Not aborted by stop(): the store may create the key even if we
            // stop listening, and only a finished join tells us what to delete.
            const joined = await this.backend.join(AbortSignal.timeout(this.options.requestTimeout));
            hold(joined);
            if (signal.aborted) break;
            log.election("%s joined as %s (token %d)", this.name, joined.membership.id, joined.token);
            backoff.reset();
          }

          step = "wait";
          const turn = await untilAborted("wait", this.backend.awaitTurn(claim, (leader) => this.follow(leader), phaseSignal), phaseSignal);
          // A race-style store holds nothing for a member until it wins.
          if (!claim) hold(turn);
          backoff.reset();

          step = "lead";
          const confirmedAt = await this.provenAlive(renewal!, phaseSignal);
          this.lead(turn, confirmedAt, phase);
          await untilAborted("lead", this.backend.awaitLoss(turn.membership, phaseSignal), phaseSignal);
          throw new MembershipLostError(`membership ${turn.membership.id} was removed from the store`);
        } catch (thrown) {
          if (signal.aborted) break;
          const reason = phase.signal.aborted ? phase.signal.reason : thrown;
          if (reason === RESYNC) {
            log.election("%s resynchronising after a store outage", this.name);
            continue;
          }
          if (isMembershipLost(reason)) {
            this.stepDown();
            log.election("%s lost its membership: %s", this.name, (reason as Error).message);
            dropMembership();
          }
          this.report(step, reason, backoff.attempts + 1);
          await sleep(this.clock, backoff.next(), signal).catch(() => undefined);
        } finally {
          phase.abort(new Error("phase over"));
        }
      }
    } finally {
      renewal?.stop();
      if (claim) await this.leaveStore(claim.membership);
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

  private leaveInBackground(membership: M): void {
    const departure = this.leaveStore(membership);
    this.departures.add(departure);
    void departure.finally(() => this.departures.delete(departure));
  }

  private async leaveStore(membership: M): Promise<void> {
    try {
      const signal = AbortSignal.timeout(this.options.requestTimeout);
      await untilAborted("leave", this.backend.leave(membership, signal), signal);
      log.election("%s left: deleted %s", this.name, membership.id);
    } catch (err) {
      log.election("%s could not delete %s: %s", this.name, membership.id, (err as Error).message);
    }
  }

  private follow(leader: string | undefined): void {
    if (leader === undefined || leader === this.leaderName) return;
    this.leaderName = leader;
    emitSafely(() => this.emit("leader", leader));
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
    this.stepDown();
    this.term = new Term(turn.token, this.clock, this.horizonFor(turn), confirmedAt, (error) => this.expireTerm(error));
    this.onTermExpired = (error) => phase.abort(error);
    this.leaderName = undefined;
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
    this.stepDown();
    expired?.(error);
  }

  private stepDown(): void {
    this.onTermExpired = undefined;
    const term = this.term;
    if (!term) return;
    this.term = undefined;
    term.end();
    log.election("%s unelected", this.name);
    emitSafely(() => this.emit("unelected"));
  }

  private report(phase: ElectionPhase, error: unknown, attempt: number): void {
    const wrapped = new ElectionError(phase, attempt, error);
    log.election("%s: %s", this.name, wrapped.message);
    emitSafely(() => this.emit("error", wrapped));
  }
}
