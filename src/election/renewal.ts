// Keeps one membership alive: renews it every refresh interval, retries failed
// renewals with back-off, and tells its owner when each renewal that succeeded
// was *sent*, which is what a leader's deadline is counted from.
import { ChildAbortController, untilAborted } from "../util/abort";
import type { ElectionBackend, Membership } from "../contract/backend";
import { callBackend, InvalidClaimError, renewalSentAt } from "../contract/answers";
import { Backoff } from "../util/backoff";
import { detachedTimeout, later, type Clock } from "../util/clock";
import { isMembershipLost, RequestTimeoutError } from "../contract/errors";
import type { ResolvedOptions } from "./options";

export interface RenewalListener {
  /** A renewal sent at `sentAt` (monotonic ms) was confirmed by the store. */
  renewed(sentAt: number): void;
  /** A renewal failed and will be retried. */
  failed(error: unknown, attempt: number): void;
  /** The next try after a failed renewal is due in `delayMs`. */
  retrying?(error: unknown, attempt: number, delayMs: number): void;
  /** A renewal succeeded after one or more failures: long-lived watches may have died meanwhile. */
  recovered(): void;
  /** The store no longer holds the membership. Renewal has stopped. */
  lost(error: unknown): void;
}

/** What a run holds to keep its membership alive (campaign.ts): a Renewal of its own, or one a backend makes. */
export interface MembershipRenewal {
  /** Renews from now on; `lastSentAt` is when the write that created the membership was sent. */
  start(lastSentAt: number): void;
  /** When the newest renewal (or the join) that the store confirmed was sent. */
  readonly lastConfirmedSentAt: number;
  /** Renews at once; resolves with the send time once confirmed. Rejects on failure or when `signal` aborts. */
  renewNow(signal: AbortSignal): Promise<number>;
  stop(): void;
}

/**
 * Where a backend whose memberships are renewed together (an etcd v3
 * session's, all on one lease) makes each membership's renewal itself,
 * instead of a timer and a request per membership.
 */
export const RENEWED_TOGETHER = Symbol("renewed together");

export interface RenewedTogether<M extends Membership> {
  /** The renewal of `membership`, or undefined if this one renews alone. */
  [RENEWED_TOGETHER](membership: M, listener: RenewalListener): MembershipRenewal | undefined;
}

/** The renewal a run holds for `membership`: the backend's own if it renews memberships together, else a Renewal. */
export function renewalFor<M extends Membership>(
  backend: ElectionBackend<M>,
  membership: M,
  options: ResolvedOptions,
  clock: Clock,
  listener: RenewalListener,
  random: () => number,
): MembershipRenewal {
  const together = (backend as Partial<RenewedTogether<M>>)[RENEWED_TOGETHER];
  const made = typeof together === "function" ? together.call(backend, membership, listener) : undefined;
  return made ?? new Renewal(backend, membership, options, clock, listener, random);
}

/**
 * The longest wait between tries of a failed renewal: retryMaxDelay, but at
 * most a quarter of the refresh interval (never below retryInitialDelay), so
 * that several tries fit into what is left of the TTL after a missed renewal.
 */
export function retryCeiling(timing: Pick<ResolvedOptions, "retryInitialDelay" | "retryMaxDelay" | "refreshInterval">): number {
  return Math.max(timing.retryInitialDelay, Math.min(timing.retryMaxDelay, timing.refreshInterval / 4));
}

export class Renewal<M extends Membership> implements MembershipRenewal {
  /**
   * The renewals in flight (a scheduled one, and one renewNow asked for), for
   * stop() to cancel. Each has a controller only while it runs: a member
   * renews for as long as it lives, and an idle signal is some 0.5 KiB.
   */
  private readonly inFlight: AbortController[] = [];
  private readonly backoff: Backoff;
  private timer: unknown;
  private stopped = false;
  private confirmedSentAt = -Infinity;

  constructor(
    private readonly backend: ElectionBackend<M>,
    private readonly membership: M,
    private readonly options: ResolvedOptions,
    private readonly clock: Clock,
    private readonly listener: RenewalListener,
    private readonly random: () => number = Math.random,
  ) {
    this.backoff = new Backoff(options.retryInitialDelay, retryCeiling(options), random);
  }

  /**
   * Schedules the first renewal within one refresh interval after
   * `lastSentAt`, when the membership was created: at a random point of the
   * interval's second half. Members started together (a deployment, every
   * host rebooting) would otherwise renew in step for ever, a burst of one
   * write each per interval that a change of leader can land in; the first
   * renewal spreads them, and the schedule keeps that phase. Renewing sooner
   * only moves the deadline later.
   */
  start(lastSentAt: number): void {
    this.confirmedSentAt = lastSentAt;
    const spread = (this.options.refreshInterval / 2) * this.random();
    this.schedule(lastSentAt + this.options.refreshInterval - spread - this.clock.now());
  }

  /** When the newest renewal (or the join) that the store confirmed was sent. */
  get lastConfirmedSentAt(): number {
    return this.confirmedSentAt;
  }

  /**
   * Renews at once and resolves with the send time once the store confirmed
   * it; the periodic schedule restarts from there. Rejects on failure (the
   * periodic renewal goes on) or when `signal` aborts.
   */
  async renewNow(signal: AbortSignal): Promise<number> {
    this.cancelTimer();
    try {
      const sentAt = await this.attempt(signal);
      this.scheduleAfter(sentAt);
      return sentAt;
    } catch (err) {
      // A renewal given up because the caller stopped waiting did not fail:
      // schedule, but report nothing.
      if (!this.stopped && this.timer === undefined) this.retryAfter(err, !signal.aborted);
      throw err;
    }
  }

  stop(): void {
    this.stopped = true;
    this.cancelTimer();
    for (const request of this.inFlight.splice(0)) request.abort(new Error("renewal stopped"));
  }

  private schedule(delay: number): void {
    if (this.stopped) return;
    this.cancelTimer();
    this.timer = this.clock.setTimeout(() => {
      this.timer = undefined;
      void this.attempt().then(
        (sentAt) => this.scheduleAfter(sentAt),
        (err: unknown) => {
          if (!this.stopped && this.timer === undefined) this.retryAfter(err, true);
        },
      );
    }, Math.max(0, delay));
  }

  /**
   * The next renewal is due one refresh interval after this one was *sent*:
   * counting from its answer instead would let a slow link push every renewal
   * later, until they no longer arrive before the leader's deadline.
   */
  private scheduleAfter(sentAt: number): void {
    this.schedule(sentAt + this.options.refreshInterval - this.clock.now());
  }

  private retryAfter(error: unknown, report: boolean): void {
    const delayMs = this.backoff.next();
    if (report) this.listener.retrying?.(error, this.backoff.attempts, delayMs);
    this.schedule(delayMs);
  }

  private cancelTimer(): void {
    if (this.timer !== undefined) {
      this.clock.clearTimeout(this.timer);
      this.timer = undefined;
    }
  }

  /** One renewal, cut short when `signal` aborts; reports its outcome to the listener and rethrows failures. */
  private async attempt(signal?: AbortSignal): Promise<number> {
    const calledAt = this.clock.now();
    // Two renewals can be on their way at once (a scheduled one and
    // renewNow's), and the one sent later may be answered first: this one's
    // answer is judged against what was confirmed when it was asked for.
    const confirmedBefore = this.confirmedSentAt;
    let sentAt = calledAt;
    const request = signal ? new ChildAbortController(signal) : new AbortController();
    const requestSignal = request.signal;
    // On the election's clock, like every timer of the election, and like
    // AbortSignal.timeout()'s it keeps no process alive by itself.
    const timeout = detachedTimeout(this.clock, () => request.abort(new DOMException("renewal timed out", "TimeoutError")), this.options.requestTimeout);
    this.inFlight.push(request);
    let renewing: Promise<unknown> | undefined;
    try {
      renewing = callBackend(() => this.backend.renew(this.membership, requestSignal));
      // A shared renewal (an etcd v3 session's keep-alive) may have been sent
      // before this call: the deadline counts from that send, never later.
      const answered = renewalSentAt(await untilAborted("renew", renewing, requestSignal), calledAt, this.clock.now(), confirmedBefore);
      if ("problem" in answered) throw new InvalidClaimError(this.backend.description ?? "custom backend", answered.field, answered.problem, "renewal");
      sentAt = answered.sentAt;
    } catch (failure) {
      if (this.stopped || signal?.aborted) throw failure;
      const err = renewing ? await backendTimeout(renewing, failure, this.clock) : failure;
      if (isMembershipLost(err)) {
        this.stop();
        this.listener.lost(err);
      } else {
        this.listener.failed(err, this.backoff.attempts + 1);
      }
      throw err;
    } finally {
      this.clock.clearTimeout(timeout);
      const index = this.inFlight.indexOf(request);
      if (index >= 0) this.inFlight.splice(index, 1);
      // Detached from the caller's signal: a signal that lives on keeps no trace of it.
      if (request instanceof ChildAbortController) request.release(new Error("renewal over"));
    }
    if (this.stopped) return sentAt;
    this.confirmedSentAt = Math.max(this.confirmedSentAt, sentAt);
    const hadFailed = this.backoff.attempts > 0;
    this.backoff.reset();
    this.listener.renewed(sentAt);
    if (hadFailed) this.listener.recovered();
    return sentAt;
  }
}

/**
 * When a renewal times out, the backend's own timeout, if it gives one by the
 * next turn of the event loop, says more (which request, and for etcd3 what
 * to configure when timeouts keep coming): report that one instead.
 */
async function backendTimeout(renewing: Promise<unknown>, failure: unknown, clock: Clock): Promise<unknown> {
  if (!(failure instanceof RequestTimeoutError)) return failure;
  const own = await Promise.race([
    renewing.then(() => undefined, (err: unknown) => err),
    new Promise<undefined>((resolve) => later(clock, () => resolve(undefined))),
  ]);
  return own instanceof RequestTimeoutError ? own : failure;
}
