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

const waiting: Array<() => void> = [];
let draining = false;

/** Resolves on a later turn of the event loop, after the work that was waiting before it. */
export function nextTurn(): Promise<void> {
  return new Promise((resolve) => {
    waiting.push(resolve);
    if (!draining) {
      draining = true;
      setImmediate(letOneThrough);
    }
  });
}

function letOneThrough(): void {
  // Resolving runs the waiter's continuation in this turn's microtasks; the
  // next one gets a turn of its own, after the loop's poll for I/O.
  waiting.shift()?.();
  if (waiting.length > 0) setImmediate(letOneThrough);
  else draining = false;
}
