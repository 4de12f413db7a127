// The renewal of one member on an etcd v3 session. The session keeps its one
// lease alive on its own schedule (LeaseSession's renewals together) and
// tells every member on it when a keep-alive it sent was confirmed: a member
// has no timer and sends nothing of its own. Ten thousand elections on a
// session used to run ten thousand renewal timers, each an answer from the
// session's last keep-alive wrapped in an abort signal and a timeout: a
// fifth of a core in an idle process.
//
// A keep-alive renews the lease, not the key, which can be deleted while its
// lease lives (recipe.ts renew()). So a member whose key no watch confirmed
// yet (a term just begun, the watch stream being opened again after a
// failure) renews alone, through the backend, which reads the key beside
// the session's keep-alive; failing, it tries again after a back-off, as a
// member of its own lease would.
import { isMembershipLost } from "../../../contract/errors";
import { retryCeiling, type MembershipRenewal, type RenewalListener } from "../../../election/renewal";
import { Backoff } from "../../../util/backoff";
import { ChildAbortController, deadline, untilAborted } from "../../../util/abort";
import { detachedTimeout, type Clock } from "../../../util/clock";
import type { RenewsAlone } from "../member-lease";
import { stateOf, type V3Membership } from "../membership";

/** What a member's renewal needs of the session and the member beside the lease's schedule. */
export interface SessionRenewalSetting {
  readonly clock: Clock;
  readonly refreshInterval: number;
  readonly requestTimeout: number;
  readonly retryInitialDelay: number;
  readonly retryMaxDelay: number;
}

/** The session's side: the schedule a member joins and leaves. */
export interface RenewalSchedule {
  renewTogether(member: SessionRenewal): void;
  renewApart(member: SessionRenewal): void;
}

export class SessionRenewal implements MembershipRenewal {
  private confirmedSentAt = -Infinity;
  private stopped = false;
  /** A renewal of this member alone (its key unwatched) on its way, or waiting to try again. */
  private alone: { retry?: unknown; backoff?: Backoff } | undefined;

  constructor(
    private readonly schedule: RenewalSchedule,
    private readonly membership: V3Membership,
    /** Renews this member alone: the session's keep-alive, and a read of the key (recipe.ts renew()). */
    private readonly backend: RenewsAlone,
    private readonly listener: RenewalListener,
    private readonly setting: SessionRenewalSetting,
  ) {}

  /** The session lease this member's key is on. */
  get leaseId(): string {
    return this.membership.leaseId;
  }

  /** Whether a watch etcd confirmed covers the member's key: then a keep-alive of the lease is a renewal. */
  private keyWatched(): boolean {
    return stateOf(this.membership).keyWatched;
  }

  start(lastSentAt: number): void {
    this.confirmedSentAt = lastSentAt;
    this.schedule.renewTogether(this);
  }

  get lastConfirmedSentAt(): number {
    return this.confirmedSentAt;
  }

  async renewNow(signal: AbortSignal): Promise<number> {
    const { clock, requestTimeout } = this.setting;
    const request = new ChildAbortController(signal);
    const timeout = detachedTimeout(clock, () => request.abort(new DOMException("renewal timed out", "TimeoutError")), requestTimeout);
    try {
      const sentAt = await untilAborted("renew", this.renewOnce(request.signal), request.signal);
      this.confirmed(sentAt, true);
      return sentAt;
    } catch (err) {
      if (!signal.aborted && !this.stopped && !isMembershipLost(err)) this.listener.failed(err, 1);
      throw err;
    } finally {
      clock.clearTimeout(timeout);
      request.release(new Error("renewal over"));
    }
  }

  stop(): void {
    if (this.stopped) return;
    this.stopped = true;
    this.schedule.renewApart(this);
    if (this.alone?.retry !== undefined) this.setting.clock.clearTimeout(this.alone.retry);
    this.alone = undefined;
  }

  /**
   * The session's keep-alive sent at `sentAt` was confirmed: a renewal of
   * this member, once its key is watched (`proven`: a renewal through the
   * backend, which read the key).
   */
  confirmed(sentAt: number, proven = false): void {
    if (this.stopped) return;
    if (!proven && !this.keyWatched()) {
      if (!this.alone) this.renewAlone();
      return;
    }
    this.confirmedSentAt = Math.max(this.confirmedSentAt, sentAt);
    this.listener.renewed(sentAt);
  }

  /** The session's keep-alive failed (the `attempt`th failure in a row); it tries again in `delayMs`. */
  failed(error: unknown, attempt: number, delayMs: number): void {
    if (this.stopped) return;
    this.listener.failed(error, attempt);
    this.listener.retrying?.(error, attempt, delayMs);
  }

  /** A keep-alive succeeded after failures: long-lived watches may have died meanwhile. */
  recovered(): void {
    if (!this.stopped) this.listener.recovered();
  }

  /** etcd no longer has the lease: the membership is gone. */
  lost(error: unknown): void {
    if (this.stopped) return;
    this.stop();
    this.listener.lost(error);
  }

  private async renewOnce(signal: AbortSignal): Promise<number> {
    const calledAt = this.setting.clock.now();
    try {
      const answer = await this.backend.renew(this.membership, signal);
      return answer?.sentAt ?? calledAt;
    } catch (err) {
      if (isMembershipLost(err)) this.lost(err);
      throw err;
    }
  }

  /** A renewal of this member alone, tried again after a back-off until it succeeds or the key is watched. */
  private renewAlone(): void {
    const alone = (this.alone ??= {});
    const bound = deadline(this.setting.requestTimeout, this.setting.clock);
    this.renewOnce(bound.signal).then(
      (sentAt) => {
        bound.clear();
        if (this.alone !== alone) return;
        this.alone = undefined;
        this.confirmed(sentAt, true);
      },
      (err: unknown) => {
        bound.clear();
        if (this.alone !== alone || this.stopped) return;
        const backoff = (alone.backoff ??= new Backoff(this.setting.retryInitialDelay, retryCeiling(this.setting)));
        const delayMs = backoff.next();
        this.failed(err, backoff.attempts, delayMs);
        alone.retry = this.setting.clock.setTimeout(() => {
          alone.retry = undefined;
          if (this.alone !== alone || this.stopped) return;
          if (this.keyWatched()) {
            // Watched meanwhile: the session's next keep-alive renews it.
            this.alone = undefined;
            return;
          }
          this.renewAlone();
        }, delayMs);
      },
    );
  }
}
