// The election's calls into its backend that need more than a wait: a
// place taken in line (join), a claim checked as it crosses over, and what a
// member gives back (leave), in the background or not. A backend may be the
// user's own, so every call is bounded by the request timeout even when it
// ignores its signal, and whatever it answers is checked (src/contract/answers.ts).
import { callBackend as call, heldClaimProblem, InvalidClaimError, newClaimProblem } from "../contract/answers";
import type { Claim, ElectionBackend, Membership } from "../contract/backend";
import { deadline, untilAborted } from "../util/abort";
import type { Clock } from "../util/clock";
import { log } from "../util/log";
import { joinWindowFor, QUICK_SHARE } from "./join-window";
import type { ResolvedOptions } from "./options";

/**
 * Set (on its prototype) by a backend of this library whose waits settle as
 * soon as their signal aborts: its waits need no race against the signal.
 * A user's backend may ignore the signal, and stop() must not wait on it.
 */
export const SETTLES_ON_ABORT = Symbol("settles on abort");

export class StoreCalls<M extends Membership> {
  /** Memberships being given up in the background; made at the first. */
  private departures: Set<Promise<void>> | undefined;
  /** Whether the backend's waits settle on their own once their signal aborts. */
  private readonly settlesOnAbort: boolean;

  constructor(
    private readonly backend: ElectionBackend<M>,
    /** The member's name, for logs. */
    private readonly name: string,
    private readonly options: ResolvedOptions,
    private readonly clock: Clock,
  ) {
    this.settlesOnAbort = (backend as { [SETTLES_ON_ABORT]?: unknown })[SETTLES_ON_ABORT] === true;
  }

  /**
   * One of the backend's waits (for the turn, for the loss), until `signal`
   * aborts. A wait lasts as long as a term or a place in line, and there may
   * be ten thousand in a process (sessions): one that settles on its own is
   * not raced against the signal, which would hold a promise, its reactions
   * and a listener on the signal for as long.
   */
  wait<T>(operation: string, method: () => Promise<T>, signal: AbortSignal): Promise<T> {
    return this.settlesOnAbort ? method() : untilAborted(operation, call(method), signal);
  }

  /** The backend's description, for errors and diagnostics. */
  get store(): string {
    return this.backend.description ?? "custom backend";
  }

  /**
   * Takes a place in line: the backend's join, checked as it crosses over.
   * It first waits for room in the process's join window for this kind of
   * store (join-window.ts), which `signal` (stop()) ends; the join itself is
   * not cut short by stop(): the store may create the key all the same, and
   * only a finished join says what to delete. Bounded by the request timeout,
   * counted from when it leaves the window, even for a backend that ignores
   * its signal; the backend removes what the store made of a join it was told
   * to abandon, and what one that answers later anyway hands over is given back.
   */
  async join(join: (signal: AbortSignal) => Promise<Claim<M>>, signal: AbortSignal): Promise<Claim<M>> {
    const slot = await joinWindowFor(this.backend, this.clock).enter(this.options.requestTimeout, signal);
    const sentAt = this.clock.now();
    const bound = deadline(this.options.requestTimeout, this.clock);
    const joining = call(() => join.call(this.backend, bound.signal));
    try {
      const joined = await untilAborted("join", joining, bound.signal);
      slot.answered(this.clock.now() - sentAt);
      this.checkNewClaim(joined);
      return joined;
    } catch (err) {
      if (bound.signal.aborted) {
        slot.timedOut();
        joining.then(
          (late) => this.giveBack(late),
          () => undefined,
        );
      } else {
        // A failure that came quickly (a refused connection) says nothing of the store's load.
        const elapsed = this.clock.now() - sentAt;
        if (elapsed > this.options.requestTimeout * QUICK_SHARE) slot.answered(elapsed);
        else slot.released();
      }
      throw err;
    } finally {
      bound.clear();
    }
  }

  /** The claim awaitTurn resolved with: what it was handed back, or (race-style) a new one. */
  checkTurn(turn: Claim<M>, held: Claim<M> | undefined): void {
    if (!held) return this.checkNewClaim(turn);
    const problem = heldClaimProblem(turn, held);
    if (problem) throw new InvalidClaimError(this.store, problem.field, problem.problem);
  }

  /** Gives `membership` up in the background; leave() waits for it too. */
  leaveInBackground(membership: M): void {
    const departures = (this.departures ??= new Set());
    const work = this.leave(membership);
    departures.add(work);
    void work.finally(() => departures.delete(work));
  }

  /** Gives `membership` up, bounded by the request timeout; never rejects. */
  async leave(membership: M): Promise<void> {
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

  /** Resolves once every membership given up in the background is gone, or its attempt failed. */
  async departed(): Promise<void> {
    await Promise.all([...(this.departures ?? [])]);
  }

  /**
   * Throws an InvalidClaimError for a claim that breaks the contract
   * (src/contract/answers.ts), after giving back what it may hold on the store.
   */
  private checkNewClaim(claim: Claim<M>): void {
    const problem = newClaimProblem(claim, this.clock.now());
    if (!problem) return;
    this.giveBack(claim);
    throw new InvalidClaimError(this.store, problem.field, problem.problem);
  }

  /** Gives up, in the background, the membership a claim we will not hold names, if it names one. */
  private giveBack(claim: Claim<M> | undefined): void {
    const membership = (claim as { membership?: unknown } | undefined)?.membership;
    if (typeof membership === "object" && membership !== null) this.leaveInBackground(membership as M);
  }
}
