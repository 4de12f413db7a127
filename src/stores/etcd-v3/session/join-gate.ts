// How many campaigns of one session are on their way to etcd at once. Every
// election on a session joins over the client's one connection, and when the
// session starts (or rejoins after its lease was lost) they all join in the
// same moment: ten thousand transactions at once held the session's
// keep-alive behind them past its request timeout, the leaders stepped down,
// and the joins that timed out were undone and sent again, for ever. A few
// dozen at a time keep each answer quick; a join that stops waiting (its
// request timeout, stop()) while it is still queued never reaches etcd.
import { abortReason } from "../../../util/abort";

/** Campaigns in flight at once: enough to fill a round trip, few enough to leave room for the keep-alive. */
export const CAMPAIGNS_AT_ONCE = 32;

export class JoinGate {
  private inFlight = 0;
  private readonly queue: Array<() => void> = [];

  constructor(private readonly atOnce: number = CAMPAIGNS_AT_ONCE) {}

  /** Resolves with a release once a place is free; rejects with the signal's reason if it aborts first. */
  enter(signal: AbortSignal | undefined): Promise<() => void> {
    if (signal?.aborted) return Promise.reject(abortReason("join", signal));
    if (this.inFlight < this.atOnce) {
      this.inFlight++;
      return Promise.resolve(this.releaser());
    }
    return new Promise((resolve, reject) => {
      const admit = () => {
        signal?.removeEventListener("abort", onAbort);
        this.inFlight++;
        resolve(this.releaser());
      };
      const onAbort = () => {
        const index = this.queue.indexOf(admit);
        if (index >= 0) this.queue.splice(index, 1);
        reject(abortReason("join", signal!));
      };
      signal?.addEventListener("abort", onAbort, { once: true });
      this.queue.push(admit);
    });
  }

  private releaser(): () => void {
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.inFlight--;
      this.queue.shift()?.();
    };
  }
}
