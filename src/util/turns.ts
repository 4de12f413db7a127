// Work that can wait a moment, let through one piece per turn of the event loop.
//
// When a leader goes, every follower in a process learns it from the same
// burst of answers, and each re-arms a watch on the next leader. A re-arm is
// not urgent: a watch started from the revision (or index) a member was last
// seen at replays whatever happened since. The successor's election is: its
// proof of turn (an answer still to come on v2) and its `elected`. Re-arming
// a hundred followers in the turn that delivered the burst puts a hundred
// requests' worth of work between the successor and that answer. Waiting
// here, the followers re-arm one per turn, and the event loop handles
// whatever I/O has arrived (the successor's answer among it) between them.
//
// A follower names the new leader before it waits, so no `leader` event is
// delayed; only the watch that reports the next change is armed a little later.
//
// A store's backend is given the queue it waits in. The followers of every
// election in a process share one (processTurns), since they share its event
// loop; a simulated world gives its own, turned by its own scheduler.

export class TurnQueue {
  private readonly waiting: Array<() => void> = [];
  private draining = false;

  /** `later` runs a callback on a later turn of the loop; setImmediate's check phase, for a real process. */
  constructor(private readonly later: (callback: () => void) => void = (callback) => setImmediate(callback)) {}

  /** Resolves on a later turn of the event loop, after the work that was waiting before it. */
  next(): Promise<void> {
    return new Promise((resolve) => {
      this.waiting.push(resolve);
      if (!this.draining) {
        this.draining = true;
        this.later(this.letOneThrough);
      }
    });
  }

  private readonly letOneThrough = (): void => {
    // Resolving runs the waiter's continuation in this turn's microtasks; the
    // next one gets a turn of its own, after the loop's poll for I/O.
    this.waiting.shift()?.();
    if (this.waiting.length > 0) this.later(this.letOneThrough);
    else this.draining = false;
  };
}

/** The queue every store of this process waits in. */
export const processTurns = new TurnQueue();
