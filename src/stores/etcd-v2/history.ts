// etcd's event history as the recipe reads it: what happened to a key, or
// under the election directory, from an index on.
//
// No long poll waits unbounded. A connection that dies without a FIN or an
// RST (a NAT gateway or firewall forgetting an idle flow) would hold a watch
// forever: the member would never learn that the member before it went, and
// nobody would be elected. Every watch is abandoned after watchRearmInterval
// and asked again from the last index it saw, on a new connection, so etcd
// replays whatever it missed: a lost poll costs at most that bound, for one
// request per watch per bound and no extra read (a re-armed watch from the
// same index proves as much as a read would). Only a re-arm that etcd answers
// with 401 costs a point read.
//
// A read is bounded too: where etcd has forgotten a watch's history, the
// point read that stands in for it is given up after `abandonReadsAfterMs`
// (the recipe gives a TTL), for the same reason: on node-etcd's HTTP a
// request lost on a connection that died silently is never answered, and a
// follower waiting on it would wait for ever.
//
// The loop that asks again is the recipe's, here; the bound is the port's
// (a wait is given it, and answers "unanswered" once it passes). Asking again
// from the same index, and what that proves, is part of the recipe, and a
// simulated store must run it as it runs here: it drives it by answering
// "unanswered" when its own clock passes the bound (a silent connection
// there is a wait that never answers). Abandoning the request, so that the
// next one goes out on a new connection, is the transport's: the adapter
// aborts node-etcd's request on a plain timer (client.ts says why not a
// timeout signal).
import { log } from "../../util/log";
import { V2_REMOVALS, type EtcdV2Port, type Found, type HistoryGone, type NotFound, type WatchEvent } from "./port";

/** A watched key went, at this etcd index; or, `foundByRead`, a read at this index found it gone (it went at or before it). */
export interface Removal {
  readonly removedAt: number;
  readonly foundByRead?: boolean;
}

/** etcd had forgotten the watch's history; a read at `rereadAt` found the key still there, with this value. */
export interface Reread {
  readonly rereadAt: number;
  readonly value: string;
}

export function isRemoval(change: Removal | WatchEvent | Reread): change is Removal {
  return "removedAt" in change;
}

/** A point read: answered from whichever server the client asks. */
const POINT_READ = {} as const;

/** A wait etcd would refuse: not sent. */
const FORGOTTEN: HistoryGone = { kind: "history-gone", historyStart: undefined };

export class EventHistory {
  /**
   * The oldest index etcd's event history held at the last 401 this member
   * got: it only moves on, so a watch from before it is not asked for (a
   * follower of a busy election would pay a 401, a read and a watch for each
   * member it comes to, where a read and a watch do).
   */
  private historyStart = 0;

  constructor(
    private readonly port: EtcdV2Port,
    private readonly watchRearmInterval: number,
    /** How long a point read may go unanswered before it is given up. */
    private readonly abandonReadsAfterMs: number,
  ) {}

  /** Whether etcd had forgotten the events from `index` on, at the last 401 this member got. */
  forgot(index: number): boolean {
    return index < this.historyStart;
  }

  /**
   * The first event at or after `from` on `key` (recursive: anywhere under
   * it), asked again every watchRearmInterval until etcd answers (see the
   * top of this file for why), or that etcd has forgotten that history.
   */
  async nextEvent(key: string, from: number, recursive: boolean, signal: AbortSignal): Promise<WatchEvent | HistoryGone> {
    for (;;) {
      const answer = await this.port.wait(key, from, recursive, signal, this.watchRearmInterval);
      if (answer.kind === "unanswered") {
        log.v2("%s: no answer to the watch from %d within %d ms, asking again", key, from, this.watchRearmInterval);
        continue;
      }
      // At least past `from`, if the answer does not say.
      if (answer.kind === "history-gone") this.historyStart = Math.max(this.historyStart, answer.historyStart || from + 1);
      return answer;
    }
  }

  /**
   * The next change of one member's key, the node created at
   * `createdIndex`, at or after index `from`: its removal (a delete or
   * expiry of the key or of a directory above it, or a node written in its
   * place by a set without prevExist, which makes no removal event: at etcd
   * index `removedAt`) or a write, with the action that wrote it. Where etcd
   * has forgotten the history the watch needs, a point read stands in for
   * it: a key found gone, or made again, was removed by the read's index; a
   * key still there is watched from there, or with `reportGap` reported as
   * such (`rereadAt`), for the caller to judge what may have happened unseen.
   */
  nextChange(key: string, createdIndex: number, from: number, signal: AbortSignal, reportGap: true): Promise<Removal | WatchEvent | Reread>;
  nextChange(key: string, createdIndex: number, from: number, signal: AbortSignal, reportGap?: false): Promise<Removal | WatchEvent>;
  nextChange(key: string, createdIndex: number, from: number, signal: AbortSignal, reportGap = false): Promise<Removal | WatchEvent | Reread> {
    // A watch etcd would answer with a 401 is not sent: the read comes first.
    const watching = this.forgot(from) ? Promise.resolve(FORGOTTEN) : this.nextEvent(key, from, false, signal);
    // A promise chain, not an async function: a follower holds one for as long as it waits.
    return watching.then(async (answer) => {
      if (answer.kind === "event") {
        const { action, node } = answer;
        return V2_REMOVALS.has(action) || node.createdIndex !== createdIndex ? { removedAt: node.modifiedIndex } : answer;
      }
      const { node, etcdIndex } = await this.read(key, signal);
      const there = node !== undefined && node.createdIndex === createdIndex;
      log.v2("%s: watch history from %d gone; read at %d: %s", key, from, etcdIndex, there ? "still there" : node ? "made again" : "gone");
      if (!there) return { removedAt: etcdIndex, foundByRead: true };
      if (reportGap) return { rereadAt: etcdIndex, value: node.value ?? "" };
      return this.nextChange(key, createdIndex, etcdIndex + 1, signal);
    });
  }

  /** A point read of a member's key: the node and the etcd index it was seen at, or the index it was found gone at. */
  read(key: string, signal: AbortSignal): Promise<Found | NotFound> {
    return this.port.get("read member", key, POINT_READ, signal, this.abandonReadsAfterMs);
  }
}
