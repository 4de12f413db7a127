// One run of a member, from start() to stop(), as one plain loop: join (on
// a queue-style store), wait for the turn, prove the membership alive, lead
// until the store shows it gone; on any failure report it, back off, and go
// round again, keeping the membership while the store holds it. What a term
// is and what leading means belong to the Election (election.ts), which this
// loop tells of each step through its host; the store's part belongs to the
// backend, reached through StoreCalls and the waits below.
//
// Every call into a backend of the user's own is also cut short by its
// signal here (StoreCalls.wait): one that ignores the signal must not keep
// stop(), or a renewal's timeout, waiting.
import type { Claim, ElectionBackend, Leader, Membership } from "../contract/backend";
import { isMembershipLost, MembershipLostError, type ElectionPhase } from "../contract/errors";
import { LeadershipYieldedError, MembershipRemovedError, type LeadershipLostError } from "../leadership/lost";
import { ChildAbortController, sleep, untilAborted } from "../util/abort";
import { Backoff } from "../util/backoff";
import type { Clock } from "../util/clock";
import { log } from "../util/log";
import type { ResolvedOptions } from "./options";
import { renewalFor, type MembershipRenewal, type RenewalListener } from "./renewal";
import type { CampaignActivity } from "./state";
import type { StoreCalls } from "./store-calls";

/** What a run tells its member, and asks of it. */
export interface CampaignHost<M extends Membership> {
  readonly name: string;
  /** What the run is doing, for the member's state. */
  setActivity(activity: CampaignActivity): void;
  /** Who leads, as the backend reports it while this member waits. */
  follow(leader: Leader | undefined): void;
  /** The turn came and the membership is proven alive since `confirmedAt` was sent: lead; abort `phase` when the term's deadline passes. */
  lead(turn: Claim<M>, confirmedAt: number, phase: AbortController): void;
  /** The term, if any, is over, for `reason`. */
  stepDown(reason: LeadershipLostError): void;
  /** The store holds a membership for this member from now on (joined, or won). */
  held(): void;
  /** A write of `membership` sent at `sentAt` was confirmed: the term, if any, lasts longer. */
  renewed(membership: M, sentAt: number): void;
  report(phase: ElectionPhase, error: unknown, attempt: number): void;
  retrying(phase: ElectionPhase, error: unknown, attempt: number, delayMs: number): void;
  /** What stop() calls first: the membership's deletion, set while the run holds one. */
  setLeaveOnStop(leave: (() => void) | undefined): void;
  /** How the parent signal's abort reaches a phase: on a later turn (Clock.later). */
  later(callback: () => void): void;
}

/** Aborts a phase when its watches may be stale: start it over without counting a failure. */
const RESYNC = Symbol("resync");
/** Aborts the leading phase for yield(): give the membership up and join again at the back. */
const YIELD = Symbol("yield");
/** On a race-style store, how long a member that yielded leaves the key to others before it competes again (at most the request timeout). */
const YIELD_PAUSE_MS = 1_000;

export class Campaign<M extends Membership> {
  private readonly backoff: Backoff;
  /** What this member holds on the store: from joining (queue-style stores) or from winning (race-style). */
  private claim: Claim<M> | undefined;
  /** The phase this run leads in, while it leads: what yieldTerm() aborts. */
  private leading: ChildAbortController | undefined;
  /** Held for stop()'s drain (holdForDrain). */
  private holding = false;
  private renewal: MembershipRenewal | undefined;
  private membershipLost: unknown;
  /** The deletion stop() started, if it did. */
  private departure: Promise<void> | undefined;
  /**
   * Aborted by stop() too (stop() aborts `signal`), on the next turn of the
   * event loop (see Election.stop()); by a resync, a lost membership or an
   * expired term at once; and released when the phase is over. Until stop()
   * reaches the phase, what the store answers is dropped here: every step
   * checks `signal` after its wait.
   */
  private phase: ChildAbortController;

  constructor(
    private readonly host: CampaignHost<M>,
    private readonly backend: ElectionBackend<M>,
    private readonly calls: StoreCalls<M>,
    private readonly options: ResolvedOptions,
    private readonly clock: Clock,
    private readonly random: () => number,
    /** Aborted by stop(). */
    private readonly signal: AbortSignal,
  ) {
    this.backoff = new Backoff(options.retryInitialDelay, options.retryMaxDelay, random);
    this.phase = this.newPhase();
  }

  /** The loop, until stop(); then what it holds is given up. Never rejects. */
  async run(): Promise<void> {
    const { signal, host, backoff } = this;
    try {
      while (!signal.aborted) {
        const phaseSignal = this.phase.signal;
        let step: ElectionPhase = "join";
        try {
          host.setActivity(this.claim || !this.backend.join ? "following" : "joining");
          if (this.membershipLost !== undefined) throw this.membershipLost;
          if (!this.claim && this.backend.join) {
            const joined = await this.calls.join(this.backend.join, signal);
            this.hold(joined);
            if (signal.aborted) break;
            log.election("%s joined as %s (token %d)", host.name, joined.membership.id, joined.token);
            backoff.reset();
            host.setActivity("following");
          }

          step = "wait";
          // Who leads, as the backend reports it while this member waits; a
          // report after the turn came (a backend's late callback) is not news.
          let waiting = true;
          const onLeader = (leader: Leader | undefined) => {
            if (waiting && !signal.aborted) host.follow(leader);
          };
          const claim = this.claim;
          let turn: Claim<M>;
          try {
            turn = await this.calls.wait("wait", () => this.backend.awaitTurn(claim, onLeader, phaseSignal), phaseSignal);
          } finally {
            waiting = false;
          }
          this.calls.checkTurn(turn, claim);
          // A race-style store holds nothing for a member until it wins (and
          // one that won just as stop() was called has a key to delete).
          if (!claim) this.hold(turn);
          if (signal.aborted) break;
          backoff.reset();

          step = "lead";
          const confirmedAt = await this.provenAlive(this.renewal!, phaseSignal);
          if (signal.aborted) break;
          host.lead(turn, confirmedAt, this.phase);
          this.leading = this.phase;
          await this.calls.wait("lead", () => this.backend.awaitLoss(turn.membership, phaseSignal), phaseSignal);
          throw new MembershipLostError(`membership ${turn.membership.id} was removed from the store`);
        } catch (thrown) {
          if (signal.aborted) break;
          if (this.holding) {
            // Draining for stop(): whatever ended the phase, wait for the
            // run's end (when the drain is over) with what is still held.
            await untilAborted("drain", new Promise<never>(() => undefined), signal).catch(() => undefined);
            break;
          }
          const reason = this.phase.signal.aborted ? this.phase.signal.reason : thrown;
          if (reason === RESYNC) {
            log.election("%s resynchronising after a store outage", host.name);
            continue;
          }
          if (reason === YIELD) {
            await this.yieldMembership();
            continue;
          }
          if (isMembershipLost(reason)) {
            host.stepDown(
              new MembershipRemovedError(`the store no longer holds this member's membership: ${reason.message}`, {
                cause: reason,
              }),
            );
            log.election("%s lost its membership: %s", host.name, reason.message);
            this.dropMembership();
          }
          host.report(step, reason, backoff.attempts + 1);
          // That answer came from the store: it is reachable again, and the
          // failures before it (a partition that just healed) need not delay
          // the rejoin. A join that succeeds resets the count anyway.
          if (isMembershipLost(reason)) backoff.reset();
          await this.backOff(step, reason);
        } finally {
          this.leading = undefined;
          this.phase.release(new Error("phase over"));
          this.phase = this.newPhase();
        }
      }
    } finally {
      this.setLeaveOnStop(undefined);
      this.renewal?.stop();
      if (this.claim) await (this.departure ?? this.calls.leave(this.claim.membership));
    }
  }

  /**
   * Gives up the term being led, to go to the back of the line: false if this
   * run does not lead now. The leading phase ends; the run then steps down,
   * deletes its membership, and joins again (yieldMembership).
   */
  /**
   * stop() drains the term's routines before the membership goes: until the
   * run's signal aborts, this run keeps (and renews) what it holds, and
   * neither rejoins nor leads again, whatever happens meanwhile. False if it
   * holds nothing to keep.
   */
  holdForDrain(): boolean {
    if (!this.claim) return false;
    this.holding = true;
    return true;
  }

  yieldTerm(): boolean {
    const leading = this.leading;
    if (!leading || leading !== this.phase || leading.signal.aborted) return false;
    leading.abort(YIELD);
    return true;
  }

  /**
   * After yieldTerm(): the term ends (its scopes' signals abort with a
   * LeadershipYieldedError, `unelected` is emitted), then the membership is
   * deleted, so that the next member in line takes over at once, and the
   * loop joins again, at the back. On a race-style store, where nobody is in
   * line, it waits a moment before competing again, so that a member racing
   * for the key wins it; if none does, it wins it back.
   */
  private async yieldMembership(): Promise<void> {
    this.host.stepDown(new LeadershipYieldedError("this member yielded its term"));
    const claim = this.claim;
    this.setLeaveOnStop(undefined);
    this.renewal?.stop();
    this.renewal = undefined;
    this.claim = undefined;
    if (claim) await this.calls.leave(claim.membership);
    log.election("%s yielded: left its membership, joining again", this.host.name);
    this.backoff.reset();
    if (!this.backend.join) await sleep(this.clock, Math.min(this.options.requestTimeout, YIELD_PAUSE_MS), this.signal).catch(() => undefined);
  }

  private newPhase(): ChildAbortController {
    return new ChildAbortController(this.signal, (callback) => this.host.later(callback));
  }

  private setLeaveOnStop(leave: (() => void) | undefined): void {
    // Only while this run is the current one: a start() after stop() has its own.
    if (!this.signal.aborted) this.host.setLeaveOnStop(leave);
  }

  /** The store holds `held` for this member: renew it from now on, and give it up first on stop(). */
  private hold(held: Claim<M>): void {
    const { host } = this;
    this.claim = held;
    host.held();
    this.renewal = renewalFor(this.backend, held.membership, this.options, this.clock, new Campaign.RenewalOutcomes(this, held.membership), this.random);
    this.renewal.start(held.sentAt);
    this.setLeaveOnStop(() => {
      this.departure = this.calls.leave(held.membership);
    });
  }

  /**
   * What the renewal of `membership` tells this run, as a class whose
   * methods are on the prototype: a member holds one for as long as it holds
   * a membership, and an object of arrow functions cost some 0.4 KiB more.
   * Declared in Campaign's body, so that it may reach the run's private state.
   */
  private static readonly RenewalOutcomes = class RenewalOutcomes<M extends Membership> implements RenewalListener {
    constructor(
      private readonly campaign: Campaign<M>,
      private readonly membership: M,
    ) {}

    renewed(sentAt: number): void {
      const { campaign } = this;
      if (!campaign.signal.aborted) campaign.host.renewed(this.membership, sentAt);
    }

    failed(error: unknown, attempt: number): void {
      const { campaign } = this;
      if (!campaign.signal.aborted) campaign.host.report("renew", error, attempt);
    }

    retrying(error: unknown, attempt: number, delayMs: number): void {
      const { campaign } = this;
      if (!campaign.signal.aborted) campaign.host.retrying("renew", error, attempt, delayMs);
    }

    recovered(): void {
      this.campaign.phase.abort(RESYNC);
    }

    lost(error: unknown): void {
      this.campaign.membershipLost = error;
      this.campaign.phase.abort(error);
    }
  };

  private dropMembership(): void {
    this.setLeaveOnStop(undefined);
    this.renewal?.stop();
    this.renewal = undefined;
    // The key is gone, but a v3 lease may outlive it: give up what is left.
    if (this.claim) this.calls.leaveInBackground(this.claim.membership);
    this.claim = undefined;
    this.membershipLost = undefined;
  }

  /**
   * The send time of a confirmed write to count this term's deadline from.
   * That the membership still exists was shown by awaitTurn, after the turn
   * came; a renewal only bounds how long it lives. A recent one will do:
   * renewing first would add a store write to every failover. An older one,
   * or none, means renewing now.
   */
  private async provenAlive(renewal: MembershipRenewal, signal: AbortSignal): Promise<number> {
    const last = renewal.lastConfirmedSentAt;
    if (this.clock.now() - last < this.options.refreshInterval) return last;
    return renewal.renewNow(signal);
  }

  /** Waits before the next try; the signal (stop()) cuts the wait short. */
  private async backOff(phase: ElectionPhase, error: unknown): Promise<void> {
    const delayMs = this.backoff.next();
    this.host.setActivity("backing-off");
    this.host.retrying(phase, error, this.backoff.attempts, delayMs);
    await sleep(this.clock, delayMs, this.signal).catch(() => undefined);
  }
}
