// Waiting to be elected, as a promise: election.whenElected() and the wait
// in whileLeading() (while-leading.ts). A wait that is called off leaves nothing
// behind: its listeners are removed at once, and a wait that joined the
// election only for itself leaves it again.
import type { FencedWriteResult } from "../contract/backend";
import { checkOptions, checkSignal } from "../util/abort";
import { abortError, ElectionStoppedError } from "./lost";
import type { Term } from "./term";

/** What the waits and scopes need of an election; the Election hands it over (its own state stays private). */
export interface LeadershipHost {
  isRunning(): boolean;
  start(): void;
  leave(): Promise<void>;
  /** True only while this member leads and its lease deadline has not passed. */
  isLeader(): boolean;
  leaseRemaining(): number;
  /** The term under way while this member leads. */
  currentTerm(): Term | undefined;
  /** Aborts with an ElectionStoppedError when the election stops; undefined while it is not running. */
  runSignal(): AbortSignal | undefined;
  /** Calls `listener` as each term begins, before `elected` is emitted; returns the way to stop. */
  onTerm(listener: (term: Term) => void): () => void;
  /** A write the store applies only while `term` holds, where the store can (etcd v3); undefined elsewhere. */
  fencedWriter(term: Term): FencedWriter | undefined;
  /** A whileLeading routine runs in the current term until `settled` resolves: stop() drains it before giving the membership up. */
  routineRunning(settled: Promise<void>): void;
}

/** Sends the store client's operations in one transaction the store applies only while the term holds. */
export type FencedWriter = (...operations: unknown[]) => Promise<FencedWriteResult>;

export interface WaitOptions {
  /** Gives up waiting when it aborts: the promise rejects with an AbortError whose `cause` is the signal's reason. */
  signal?: AbortSignal | undefined;
}

/**
 * The token of this member's term, once it leads (at once if it leads now).
 * Joins the election if it is not running. Rejects with an AbortError when
 * `signal` aborts or the election stops (the `cause` says which); a wait that
 * joined the election leaves it again first, so its key is gone by then.
 */
export async function whenElected(host: LeadershipHost, options?: WaitOptions): Promise<number> {
  const signal = checkSignal(checkOptions(options, "whenElected()").signal, "whenElected()");
  if (signal?.aborted) throw abortError(signal.reason);
  const joinedHere = !host.isRunning();
  if (joinedHere) host.start();
  try {
    return (await untilElected(host, signal)).token;
  } catch (err) {
    if (joinedHere) await host.leave();
    throw err;
  }
}

/** The current term, or the next one to begin; rejects with an AbortError as whenElected() does. Never joins. */
export function untilElected(host: LeadershipHost, signal: AbortSignal | undefined): Promise<Term> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(abortError(signal.reason));
    const run = host.runSignal();
    if (!run || run.aborted) return reject(abortError(run?.reason ?? new ElectionStoppedError("the election is not running")));
    const current = host.currentTerm();
    if (current && !current.signal.aborted && host.isLeader()) return resolve(current);

    const settle = (outcome: () => void) => {
      stopListening();
      signal?.removeEventListener("abort", onCallerAbort);
      run.removeEventListener("abort", onStopped);
      outcome();
    };
    const onCallerAbort = () => settle(() => reject(abortError(signal!.reason)));
    const onStopped = () => settle(() => reject(abortError(run.reason)));
    const stopListening = host.onTerm((term) => settle(() => resolve(term)));
    signal?.addEventListener("abort", onCallerAbort, { once: true });
    run.addEventListener("abort", onStopped, { once: true });
  });
}
