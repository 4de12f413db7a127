// Leadership as a scope: election.whileLeading(routine) runs `routine` only
// while this member leads, with an AbortSignal that aborts when its term ends
// (client-go's OnStartedLeading(ctx), node-redlock's using(…, signal)).
//
// The signal aborts the moment the member stops believing it leads: just
// before `unelected`, whatever the cause, which by the step-down guarantee
// (src/election/election.ts) is before a successor can be elected; a key deleted from
// outside is learnt from a watch, as fast as the successor learns it, not
// before. There is one gap no AbortSignal can close: a
// routine whose event loop was blocked (or whose process was frozen) past the
// lease deadline runs again before the deadline timer does, so before the
// abort event. `term.isLeader()` reads the deadline on the monotonic clock at
// every call and is false from the deadline on; read it right before each
// write that only a leader may make. The signal follows on the first timer
// turn after the deadline.
//
// Rules:
// - The routine starts when this member is elected (at once if it leads), and
//   never runs twice at once: a new term waits for the previous run to settle.
// - It resolves whileLeading() with its result if it returns while its term
//   is still on (term.isLeader() true); it rejects whileLeading() with its
//   error if it throws while its term is still on.
// - Settling after the term ended (signal aborted, or isLeader() false) is a
//   loss, whatever the routine returned or threw: with onLoss "rerun" (the
//   default) it runs again in this member's next term; with "reject",
//   whileLeading() rejects with the loss reason.
// - A routine that ignores its signal keeps running: whileLeading() waits for
//   it to settle, and the member's next term (which may come first) waits too.
// - stop(), or the caller's signal, ends it: whileLeading() rejects with an
//   AbortError (its `cause` is the ElectionStoppedError or the signal's
//   reason) once the routine has settled.
// - If whileLeading() started the election, it leaves it before it settles,
//   however it settles; otherwise the election goes on as it was.
import { checkOptions, checkSignal, onAbort } from "../util/abort";
import { abortError, ElectionStoppedError, LeadershipLostError, LeaseExpiredError } from "./lost";
import type { Term } from "./term";
import { untilElected, type FencedWriter, type LeadershipHost } from "./when-elected";

/** What the routine gets: one term of leadership. */
export interface LeadershipTerm {
  /** Aborts when this term ends, or when whileLeading()'s own signal aborts. The reason says why (a LeadershipLostError for a loss). */
  readonly signal: AbortSignal;
  /** The term's fencing token: pass it to resources that must reject writes from an earlier leader. */
  readonly token: number;
  /**
   * True while this term is on and its lease deadline has not passed. Checks
   * the deadline at each call, so it is false even before `signal` aborts
   * when the event loop was blocked past the deadline. Read it before a write.
   */
  isLeader(): boolean;
  /** Milliseconds this term may still last without a further renewal; 0 once it is over. */
  leaseRemaining(): number;
  /**
   * On etcd v3, a write that etcd itself refuses once this term is over:
   * `fenced(client.put("/jobs/state").value("done"))` sends the operations
   * (the etcd3 client's put, delete and get builders) in one transaction
   * that etcd applies only while this term's key stands as it did when the
   * term began, and resolves with `{ succeeded }`, false once the term is
   * over, however late the write arrives (a leader paused past its deadline).
   * It is sent even when isLeader() is false: etcd decides. Bounded by the
   * request timeout: a RequestTimeoutError leaves the outcome unknown.
   * Undefined on stores that cannot refuse a write themselves (etcd v2, NATS KV).
   */
  readonly fenced: FencedWriter | undefined;
}

export type LeadershipRoutine<T> = (term: LeadershipTerm) => T | PromiseLike<T>;

/** What to do when a term ends before the routine returned: run it again next term, or reject. */
export type OnLoss = "rerun" | "reject";

export interface WhileLeadingOptions {
  /** Ends the scope: the routine's signal aborts, and whileLeading() rejects with an AbortError once the routine settled. */
  signal?: AbortSignal | undefined;
  /** Default "rerun": run the routine again in the next term. "reject": reject with the loss reason (a LeadershipLostError). */
  onLoss?: OnLoss | undefined;
}

const ON_LOSS: readonly OnLoss[] = ["rerun", "reject"];

export async function whileLeading<T>(
  host: LeadershipHost,
  routine: LeadershipRoutine<T>,
  options?: WhileLeadingOptions,
): Promise<T> {
  if (typeof routine !== "function") {
    throw new TypeError(`whileLeading() needs a routine to run, a function; got ${typeof routine}`);
  }
  const { signal: given, onLoss = "rerun" } = checkOptions(options, "whileLeading()");
  const signal = checkSignal(given, "whileLeading()");
  if (!ON_LOSS.includes(onLoss)) {
    throw new RangeError(`onLoss must be "rerun" or "reject", got ${JSON.stringify(onLoss)}`);
  }
  if (signal?.aborted) throw abortError(signal.reason);
  const joinedHere = !host.isRunning();
  if (joinedHere) host.start();
  try {
    for (;;) {
      const term = await untilElected(host, signal);
      // Aborted in a callback of the term's first turn (an `elected` listener):
      // the routine never starts.
      if (signal?.aborted) throw abortError(signal.reason);
      const outcome = await runInTerm(host, term, routine, signal);
      if (signal?.aborted) throw abortError(signal.reason);
      if (outcome.termHeld) {
        if (outcome.ok) return outcome.value;
        throw outcome.error;
      }
      const reason = lossReason(term);
      if (reason instanceof ElectionStoppedError) throw abortError(reason);
      if (onLoss === "reject") throw reason;
    }
  } finally {
    if (joinedHere) await host.leave();
  }
}

type Outcome<T> = { termHeld: boolean } & ({ ok: true; value: T } | { ok: false; error: unknown });

async function runInTerm<T>(
  host: LeadershipHost,
  term: Term,
  routine: LeadershipRoutine<T>,
  callerSignal: AbortSignal | undefined,
): Promise<Outcome<T>> {
  const controller = new AbortController();
  // Both are removed when the routine settles: a term may see many short
  // runs (a job per tick), and the caller's signal may live long (a
  // process-wide shutdown signal).
  const stopFollowingTerm = onAbort(term.signal, () => controller.abort(term.signal.reason));
  const stopFollowingCaller = callerSignal ? onAbort(callerSignal, () => controller.abort(callerSignal.reason)) : undefined;
  const isLeader = () => !term.signal.aborted && !controller.signal.aborted && host.isLeader();
  const scope: LeadershipTerm = {
    signal: controller.signal,
    token: term.token,
    isLeader,
    leaseRemaining: () => (isLeader() ? host.leaseRemaining() : 0),
    fenced: host.fencedWriter(term),
  };
  let settled!: () => void;
  host.routineRunning(new Promise<void>((resolve) => (settled = resolve)));
  try {
    const value = await routine(scope);
    return { termHeld: isLeader(), ok: true, value };
  } catch (error) {
    return { termHeld: isLeader(), ok: false, error };
  } finally {
    settled();
    stopFollowingTerm();
    stopFollowingCaller?.();
  }
}

/** Why `term` ended. Its signal says, unless the deadline passed on a loop too busy to run the step-down timer yet. */
function lossReason(term: Term): LeadershipLostError {
  if (term.signal.aborted && term.signal.reason instanceof LeadershipLostError) return term.signal.reason;
  return new LeaseExpiredError("the term's lease deadline passed before the routine settled");
}
