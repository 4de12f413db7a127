// The watches a waiting v2 member holds: one on a member older than itself,
// and, once it is next in line, the witness of its turn (turn-witness.ts).
// Whichever answers first comes out of next(); both end when the wait does.
import { ChildAbortController } from "../../util/abort";
import { isRemoval, type EventHistory } from "./history";
import type { LineMember } from "./line";
import type { TurnVerdict, TurnWitness } from "./turn-witness";

/**
 * What became of a watched member: gone, announced that it leads (a write
 * with prevExist: an `update`), written otherwise (possibly renamed), or
 * found still there by a read where etcd had forgotten its history (a read
 * cannot tell whether it announced meanwhile).
 */
export type WatchOutcome = "removed" | "announced" | "changed" | "reread";

/** A watch's outcome, the etcd index it happened at, and the value written (always, when announced). */
export interface WatchResult {
  member: LineMember;
  outcome: WatchOutcome;
  at: number;
  value?: string | undefined;
  /** Removed, as a read at `at` found it: it went at or before `at`, not at it. */
  foundByRead?: boolean;
}

/** The watches one waiting member holds (one member's, and a witness), all cancelled together. */
export class WatchSet {
  private readonly controller: ChildAbortController;
  readonly signal: AbortSignal;
  /** The watch on one member, until its outcome comes out of next(). */
  private watched: Promise<WatchResult> | undefined;
  /** The witness's verdict, until it comes out of next(). */
  private witnessed: Promise<{ verdict: TurnVerdict }> | undefined;
  /**
   * Ends a race in next() that started before the witness was added (a
   * renewal arms it while the wait runs), so that the race takes it too.
   */
  private addedDuringRace: (() => void) | undefined;

  constructor(
    private readonly history: EventHistory,
    parent: AbortSignal,
  ) {
    this.controller = new ChildAbortController(parent);
    this.signal = this.controller.signal;
  }

  /**
   * Watches `member`, which was seen alive at etcd index `knownAliveAt`,
   * unless a member is watched already. `reportGap`: see WatchOutcome.
   */
  follow(member: LineMember, knownAliveAt: number, reportGap = false): void {
    if (this.watched) return;
    // Called only between races (from the wait's loop): no race to wake.
    const watching = reportGap
      ? this.history.nextChange(member.key, member.createdIndex, knownAliveAt + 1, this.signal, true)
      : this.history.nextChange(member.key, member.createdIndex, knownAliveAt + 1, this.signal);
    const watched = watching.then((change): WatchResult => {
      if (isRemoval(change)) return { member, outcome: "removed", at: change.removedAt, ...(change.foundByRead ? { foundByRead: true } : {}) };
      if ("rereadAt" in change) return { member, outcome: "reread", at: change.rereadAt, value: change.value };
      const { value, modifiedIndex: at } = change.node;
      return { member, outcome: change.action === "update" && value !== undefined ? "announced" : "changed", at, value };
    });
    // Rejections surface through next(); keep an unobserved one from being reported as unhandled.
    watched.catch(() => undefined);
    this.watched = watched;
  }

  /** Adds the witness; its verdict comes out of next() once. */
  witness(witness: TurnWitness): void {
    const witnessed = witness.verdict.then((verdict) => ({ verdict }));
    // As for the watch: a rejection surfaces through next(), never as unhandled.
    witnessed.catch(() => undefined);
    this.witnessed = witnessed;
    this.addedDuringRace?.();
  }

  /** Whether a witness is still watching (one that gave up is not). */
  hasWitness(): boolean {
    return this.witnessed !== undefined;
  }

  /**
   * The next change of the watched member, or the witness's verdict; it is
   * no longer watched then. `witnessMayCome`: a renewal may add the witness
   * while this waits. (A promise chain, not an async function: a waiting
   * member holds it for as long as it waits, and an async frame is bigger.)
   */
  next(witnessMayCome: boolean): Promise<WatchResult | { verdict: TurnVerdict }> {
    const { watched, witnessed } = this;
    if (watched && !witnessed && !witnessMayCome) return watched.then((result) => this.took(result));
    const sources: Array<Promise<WatchResult | { verdict: TurnVerdict } | "added">> = [];
    if (watched) sources.push(watched);
    if (witnessed) sources.push(witnessed);
    else sources.push(new Promise<"added">((resolve) => (this.addedDuringRace = () => resolve("added"))));
    return Promise.race(sources).then((result) => {
      this.addedDuringRace = undefined;
      return result === "added" ? this.next(false) : this.took(result);
    });
  }

  close(): void {
    this.controller.release(new Error("watches closed"));
  }

  private took<T extends WatchResult | { verdict: TurnVerdict }>(result: T): T {
    if ("verdict" in result) this.witnessed = undefined;
    else this.watched = undefined;
    return result;
  }
}
