// The member next in line on v2 proves its turn without a read.
//
// The member just before ours going is our turn only if our own key outlived
// it: ours may have gone alone (deleted, expired) or with the whole directory
// in the same breath. etcd v2 keeps one history of events, and a recursive
// watch of the election directory reports them in index order, one per
// answer: every create, write, delete and expiry under the directory, and the
// removal of the directory itself or of one above it. Started just after an
// index at which our key was known to exist, such a watch that reports the
// predecessor's removal before any removal of ours shows our key was there
// when the predecessor went: what a read after the removal would show, but
// already in place when the removal happens, so the successor leads on that
// one answer, a round trip sooner. (For a deletion etcd's watcher hub
// notifies the watchers of the removed key before those of the directories
// above it; the other followers watch the heir, not the leader, so that the
// witness's answer is not queued behind a hundred others.)
//
// It costs a request per event in the directory (renewals wake no watch:
// test/stores/etcd-v2/etcd-v2-facts.ts), so only the member next in line
// holds one. When etcd has forgotten the history it needs (401), it gives up and
// the successor reads its key as before.
import type { EventHistory } from "./history";
import { V2_REMOVALS } from "./port";

/** What the witness saw first: the predecessor's removal, ours, or nothing it can vouch for. */
export type TurnVerdict =
  | { kind: "turn"; at: number }
  | { kind: "lost"; at: number }
  | { kind: "unknown" };

export class TurnWitness {
  readonly verdict: Promise<TurnVerdict>;

  /** Watches `dir`, the election directory, in `history`, from just after `ownKeyAliveAt`. */
  constructor(
    history: EventHistory,
    dir: string,
    private readonly ownKey: string,
    private readonly ownCreatedIndex: number,
    private readonly predecessorKey: string,
    ownKeyAliveAt: number,
    signal: AbortSignal,
  ) {
    this.verdict = this.watch(history, dir, ownKeyAliveAt + 1, signal);
    // A watch cut short by the signal rejects; whoever awaits the verdict sees it.
    this.verdict.catch(() => undefined);
  }

  private async watch(history: EventHistory, dir: string, from: number, signal: AbortSignal): Promise<TurnVerdict> {
    for (;;) {
      const event = await history.nextEvent(dir, from, true, signal);
      if (event.kind === "history-gone") return { kind: "unknown" };
      const { key, createdIndex, modifiedIndex: at } = event.node;
      if (V2_REMOVALS.has(event.action)) {
        if (removes(key, this.ownKey)) return { kind: "lost", at };
        if (key === this.predecessorKey) return { kind: "turn", at };
      } else if (key === this.ownKey && createdIndex !== this.ownCreatedIndex) {
        // Someone wrote a new key in its place (a set without prevExist replaces the node).
        return { kind: "lost", at };
      }
      from = at + 1;
    }
  }
}

/** Whether removing `removedKey` removes `key`: the key itself, or a directory above it. */
function removes(removedKey: string, key: string): boolean {
  return removedKey === key || key.startsWith(removedKey.endsWith("/") ? removedKey : `${removedKey}/`);
}
