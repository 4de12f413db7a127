// The notifications about one election's row, read one at a time with a
// deadline: a follower waits for the next notice *or* for the moment the
// holder's lease must have expired, whichever comes first. PostgreSQL sends
// nothing when a lease expires (a row is only a row), so the deadline is how
// followers learn of a crashed leader; releases and acquisitions arrive as
// notices.
//
// Without LISTEN (a transaction pooler, the `listen: false` option) nothing
// arrives, and every wait ends at its deadline.
import { untilAborted } from "../../util/abort";
import type { Clock } from "../../util/clock";
import { DeadlineQueue } from "../../util/deadline-queue";
import type { LeaseListener, LeaseListening, LeaseNotice, PostgresPort } from "./port";

/** A notice, with when (on the member's clock) it arrived: the transaction that sent it committed before then. */
export type SeenNotice = LeaseNotice & { readonly seenAt: number };

export class LeaseNotices implements LeaseListener {
  /** The notices that arrived and were not taken yet; it ends when the listening ends by itself (the connection was lost). */
  private readonly arrivals: DeadlineQueue<SeenNotice>;
  private listening: LeaseListening | undefined;

  private constructor(private readonly clock: Clock) {
    this.arrivals = new DeadlineQueue(clock);
  }

  /**
   * Listens for the notices of `key` (none if `listen` is false); resolves
   * once the LISTEN is in place, so that a read or an acquire made after it
   * misses no commit.
   */
  static async open(port: PostgresPort, key: string, listen: boolean, clock: Clock, signal: AbortSignal): Promise<LeaseNotices> {
    const notices = new LeaseNotices(clock);
    if (!listen) return notices;
    const opening = port.listen(key, notices, signal);
    // A LISTEN in place after we stopped waiting would hold a connection: stop it.
    opening.then(
      (listening) => {
        if (signal.aborted) listening.stop();
      },
      () => undefined,
    );
    notices.listening = await untilAborted("listen", opening, signal);
    return notices;
  }

  /**
   * The next notice, or undefined once `dueAt` (a time on the clock) has
   * passed first. Throws if the listening ended, or with the signal's reason.
   */
  next(dueAt: number, signal: AbortSignal): Promise<SeenNotice | undefined> {
    return this.arrivals.next(dueAt, signal);
  }

  /** Whether a notice queued (not yet taken by next()) says that a member took the row with a token above `token`. */
  acquiredAfter(token: number): boolean {
    return this.arrivals.items.some((notice) => notice.kind === "acquired" && notice.token > token);
  }

  /** Checks that the listening connection still answers (a follower does, when a notice it should have had never came). */
  probe(): void {
    this.listening?.probe?.();
  }

  close(): void {
    this.listening?.stop();
    this.listening = undefined;
  }

  onNotice(notice: LeaseNotice): void {
    this.arrivals.push({ ...notice, seenAt: this.clock.now() });
  }

  onEnd(error: Error): void {
    this.arrivals.end(error);
  }
}
