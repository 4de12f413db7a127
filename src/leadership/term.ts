// One term of leadership and the one promise that must never break: a leader
// stops believing it leads before its membership can expire.
//
// The safety argument, which every change here must keep:
// - A member leads only on a membership the store has shown alive after its
//   turn came (the backend's awaitTurn), and only while a write that the store
//   confirmed, sent at time S, renews it (the creating write, or a renewal).
// - The store applied that write after S, so it keeps the membership at least
//   until S + TTL, where TTL is what the store itself applies. No other member
//   can lead before then.
// - The term lasts only until S + TTL - stepDownMargin (the horizon), on a
//   monotonic clock, S being the newest confirmed write. `isValid()` checks
//   that deadline on every call, so a process that was frozen past it answers
//   false before any timer has run; the timer only makes the step-down visible.
// - A deadline that has passed is final: a renewal confirmed afterwards does
//   not revive the term. The member must be elected again.
// So, as long as clocks advance at rates that differ by less than the margin
// over one TTL, the old leader stops believing before a successor can start.
// A deletion of the membership from outside is the one exception: the leader
// learns it from a watch, as fast as the successor does, not before.
import type { Clock } from "../util/clock";
import { LeaseExpiredError, type LeadershipLostError } from "./lost";

export class Term {
  private deadline: number;
  private timer: unknown;
  private ended = false;
  /** Why the term ended, once it has. */
  private reason: LeadershipLostError | undefined;
  /** Made when a scope first asks for the signal: most terms never have one, and an idle signal is some 0.5 KiB. */
  private controller: AbortController | undefined;

  /**
   * Aborts when the term ends, with the reason (a LeadershipLostError). Its
   * abort event runs on the deadline's timer, so a process frozen past the
   * deadline learns it from `isValid()` first.
   */
  get signal(): AbortSignal {
    if (!this.controller) {
      this.controller = new AbortController();
      if (this.ended) this.controller.abort(this.reason);
    }
    return this.controller.signal;
  }

  /**
   * Starts a term on a membership whose newest confirmed write was sent at
   * `confirmedSentAt`. Throws LeaseExpiredError if that leaves no time.
   * `onExpired` runs if the deadline passes before `end()`; it must end the
   * term, with the error it is given.
   */
  constructor(
    readonly token: number,
    private readonly clock: Clock,
    /** From a confirmed write's send time: how long the term may last (TTL - stepDownMargin). */
    private readonly horizon: number,
    confirmedSentAt: number,
    private readonly onExpired: (error: LeaseExpiredError) => void,
  ) {
    this.deadline = confirmedSentAt + horizon;
    if (clock.now() >= this.deadline) {
      const late = new LeaseExpiredError("the renewal that was to confirm this term came too late");
      this.end(late);
      throw late;
    }
    this.arm();
  }

  /** True until the deadline passes or the term is ended. */
  isValid(): boolean {
    return !this.ended && this.clock.now() < this.deadline;
  }

  /** Milliseconds left before the deadline; 0 once the term is over. */
  remaining(): number {
    return this.isValid() ? this.deadline - this.clock.now() : 0;
  }

  /** A write sent at `sentAt` was confirmed by the store: the term may last until `sentAt + horizon`. */
  extend(sentAt: number): void {
    if (this.ended) return;
    // The process may have been frozen, or the event loop blocked, past the
    // deadline: the term is over even if this renewal made it in time.
    if (this.clock.now() >= this.deadline) return this.expire();
    // The timer set for the earlier deadline finds this one when it fires,
    // and waits on: a leader replaces no timer at each renewal (ten thousand
    // leaders on one etcd session renew together).
    this.deadline = Math.max(this.deadline, sentAt + this.horizon);
  }

  /** Ends the term without `onExpired`: cancels its timer and aborts its signal with `reason`. */
  end(reason: LeadershipLostError): void {
    if (this.ended) return;
    this.ended = true;
    this.reason = reason;
    if (this.timer !== undefined) {
      this.clock.clearTimeout(this.timer);
      this.timer = undefined;
    }
    this.controller?.abort(reason);
  }

  private arm(): void {
    if (this.timer !== undefined) this.clock.clearTimeout(this.timer);
    this.timer = this.clock.setTimeout(() => {
      this.timer = undefined;
      if (this.ended) return;
      if (this.clock.now() < this.deadline) return this.arm();
      this.expire();
    }, Math.max(0, this.deadline - this.clock.now()));
  }

  private expire(): void {
    if (this.ended) return;
    this.onExpired(
      new LeaseExpiredError(`no renewal was confirmed within ${this.horizon} ms of the last one sent; stepped down`),
    );
  }
}
