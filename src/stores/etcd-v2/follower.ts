// A v2 member's wait for its turn, from its one listing until no member older
// than itself is left.
//
// One member is watched at a time, from the index it was last seen at, so a
// change since then is replayed at once:
// - while another member stands between ours and the leader, the heir (the
//   member next in line after the leader). Its removal moves the watch to
//   the member behind it; its announcement (it leads, so the leader before
//   it is gone) names it the leader.
// - once ours is the heir, the leader: its removal is our turn.
// A change of leader costs a follower one request, and the leader's removal
// wakes only the heir. A member that leaves from further back is passed
// over when the watch comes to it: its removal is replayed at once. One long
// poll per follower (a socket and some 11 KiB here, and a watcher at etcd),
// not two as in ZooKeeper's recipe.
//
// 0.0.1 members do not announce; they renew by writing their value (a
// compareAndSwap event). A follower that sees its heir do so watches the
// leader instead, from where it was last seen, and when the leader goes
// names the heir at once, from memory. Only before that heir's first renewal
// (within half its TTL of the listing) does a follower learn of its
// leadership late: at that renewal. A key written by hand without a TTL (no
// member writes one) never writes again: the listing shows it, and it is a
// silent heir from the start.
//
// The heir also holds a witness (turn-witness.ts) that proves the turn
// without a read: from its listing if that shows it next, else from its
// first renewal after it became next (a renewal says at which index our key
// was there, so the witness has nothing to replay).
import type { LeaderListener } from "../../contract/backend";
import { MembershipLostError } from "../../contract/errors";
import type { TurnQueue } from "../../util/turns";
import type { EventHistory } from "./history";
import type { LeadingMember, LineMember, OlderMembers } from "./line";
import type { MembershipState, RenewalListener, V2Membership } from "./membership-state";
import { TurnWitness, type TurnVerdict } from "./turn-witness";
import { WatchSet } from "./watch-set";

/** The etcd index at which the last older member was seen gone, and whether our key is known to have outlived it. */
export interface Turn {
  readonly turnAt: number;
  readonly proven: boolean;
}

/** After an event: the turn came; or the wait keeps the watch it holds; or it watches the next member, on a later turn of the loop. */
type Next = Turn | "keep-watching" | "watch-next";

/** A heir seen renewing by writing (a 0.0.1 member), which will not announce: where, and under which name. */
interface SilentHeir {
  readonly createdIndex: number;
  readonly seenAt: number;
  readonly name: string;
}

export class Follower implements RenewalListener {
  /** The etcd index the leader was last seen at: the listing's, or its announcement's. */
  private leaderSeenAt: number;
  private silentHeir: SilentHeir | undefined = undefined;
  /** The latest etcd index at which a watched member was seen go or change: where the turn came, once none is left. */
  private turnAt: number;
  /** Set once no older member is left and the witness has yet to vouch for our key at that point. */
  private awaitingWitness = false;
  /** The etcd index the witness watches from: it sees removals at or after it. */
  private witnessFrom = Infinity;
  private readonly watches: WatchSet;

  constructor(
    private readonly membership: V2Membership,
    private readonly state: MembershipState,
    /** The members older than ours, from its listing; taken as they go. */
    private readonly older: OlderMembers,
    private readonly onLeader: LeaderListener,
    private readonly history: EventHistory,
    /** The election directory, which the witness watches. */
    private readonly dir: string,
    /** Where the watch on the next member waits its turn (src/util/turns.ts). */
    private readonly turns: TurnQueue,
    private readonly signal: AbortSignal,
  ) {
    this.leaderSeenAt = older.listedAt;
    this.turnAt = older.listedAt;
    this.watches = new WatchSet(history, signal);
  }

  /** Resolves once no older member is left; throws MembershipLostError if ours goes first. */
  async wait(): Promise<Turn> {
    this.state.follower = this;
    try {
      // The listing named the leader; the first watch can wait its turn too
      // (from where the listing saw the member, it replays what came since).
      if (this.older.size > 1) {
        await this.turns.next();
        this.signal.throwIfAborted();
      }
      this.watchNext();
      this.armWitness();
      for (;;) {
        const seen = await this.watches.next(this.older.size === 1 && !this.watches.hasWitness());
        let next: Next;
        if ("verdict" in seen) {
          next = this.witnessSaw(seen.verdict);
        } else {
          const { member, outcome, at, value } = seen;
          this.turnAt = Math.max(this.turnAt, at);
          const leader = this.older.oldest()!;
          if (member.createdIndex === leader.createdIndex) {
            // The leader: ours is the heir, or the heir is silent.
            next = outcome === "removed" ? this.leaderRemoved(leader, seen.foundByRead ? undefined : at) : this.leaderWrote(leader, at, value);
          } else if (outcome === "removed") {
            next = this.heirRemoved(member);
          } else if (outcome === "announced") {
            // It leads: the leader before it is gone.
            next = this.heirLeads(member, at, value!);
          } else if (outcome === "reread") {
            next = await this.heirFoundByRead(member, leader, at, value!);
          } else {
            next = this.heirRenewedByWriting(member, at, value);
          }
        }
        if (next === "keep-watching") continue;
        if (next !== "watch-next") return next;
        // Every follower in a process gets here from the same answer; the
        // next watch can wait its turn (src/util/turns.ts). Not the heir's, on the
        // leader: the next change of leader is for it to see first, and
        // behind a thousand followers' watches (each a read too, where etcd
        // has forgotten the index to start from) its turn came seconds later.
        if (this.older.size > 1) {
          await this.turns.next();
          this.signal.throwIfAborted();
        }
        this.watchNext();
      }
    } finally {
      this.state.follower = undefined;
      this.watches.close();
    }
  }

  /** Our key was renewed (state.knownAliveAt moved): the member next in line arms its witness from there. */
  ownKeyRenewed(): void {
    this.armWitness();
  }

  /** A write of the leader's key (0.0.1 members renew so, ours announce): the name may be new. */
  private leaderWrote(leader: LeadingMember, at: number, value: string | undefined): Next {
    this.onLeader({ name: value ?? leader.name, token: leader.createdIndex });
    this.leaderSeenAt = at;
    this.watches.follow(leader, at);
    return "keep-watching";
  }

  /** The leader went, at etcd index `removedAt` if its event said (a read that found it gone does not). */
  private leaderRemoved(leader: LeadingMember, removedAt: number | undefined): Next {
    if (this.older.removeLast(leader.createdIndex)) return this.lastOlderMemberGone(removedAt);
    // With a heir behind it, the leader is watched only when that heir is silent: it
    // leads now, named at once, by the name it last wrote.
    const heir = this.older.heir()!;
    const name = this.silentName(heir);
    if (name === undefined) throw new Error(`${this.membership.id}: watched the leader, but the member behind it announces`);
    this.leaderSeenAt = heir.createdIndex === this.silentHeir?.createdIndex ? this.silentHeir.seenAt : this.older.listedAt;
    this.older.heirLeads(heir.createdIndex, name);
    this.onLeader({ name, token: heir.createdIndex });
    return "watch-next";
  }

  /**
   * No older member is left, the last one gone at etcd index `removedAt`
   * (undefined: a read found it gone, at or before turnAt): our turn, once
   * our key is known to have outlived it.
   */
  private lastOlderMemberGone(removedAt: number | undefined): Next {
    const { turnAt } = this;
    // A renewal at or after the removal proves as much as the witness would.
    if (this.state.knownAliveAt >= turnAt) return { turnAt, proven: true };
    // The witness reports the removal, or ours first, only if it watched from
    // before it: not one a renewal armed after the leader went (unseen then),
    // and not for a removal a read found, whose index nobody knows. It would
    // wait for ever, and with it the election: a read proves the turn instead.
    if (!this.watches.hasWitness() || removedAt === undefined || removedAt < this.witnessFrom) return { turnAt, proven: false };
    this.awaitingWitness = true;
    return "keep-watching";
  }

  private heirRemoved(heir: LineMember): Next {
    this.older.removeHeir(heir.createdIndex);
    return "watch-next";
  }

  /** The heir leads, under `name`, as seen at etcd index `at`. */
  private heirLeads(heir: LineMember, at: number, name: string): Next {
    this.older.heirLeads(heir.createdIndex, name);
    this.leaderSeenAt = at;
    this.onLeader({ name, token: heir.createdIndex });
    return "watch-next";
  }

  /** A 0.0.1 heir renewing: watch the leader instead, from where it was last seen. */
  private heirRenewedByWriting(heir: LineMember, at: number, value: string | undefined): Next {
    this.silentHeir = { createdIndex: heir.createdIndex, seenAt: at, name: value ?? "" };
    return "watch-next";
  }

  /**
   * etcd had forgotten the heir's history, and a read at `at` found it still
   * there, with `value`: its announcement may have gone unseen. An
   * announcement comes only after the leader's removal: a leader seen at
   * index L means none came by L, and a watch from L replays one that came
   * after. L is where the leader was last seen, if etcd still has the history
   * from there (after a change it has: L is the announcement's); else a read
   * of the leader tells, and if it found the leader gone the heir is read
   * again: a name is only as fresh as the read it comes from, and the first
   * came a round trip before the leader's.
   */
  private async heirFoundByRead(heir: LineMember, leader: LeadingMember, at: number, value: string): Promise<Next> {
    let leaderAliveAt = this.leaderSeenAt;
    if (this.history.forgot(leaderAliveAt)) {
      const { node, etcdIndex } = await this.history.read(leader.key, this.signal);
      leaderAliveAt = node && node.createdIndex === leader.createdIndex ? etcdIndex : -1;
    }
    if (leaderAliveAt >= 0) {
      this.watches.follow(heir, Math.min(at, leaderAliveAt), true);
      return "keep-watching";
    }
    // The leader is gone: the heir leads, named by its key's value, if it is still there.
    const again = await this.history.read(heir.key, this.signal);
    if (!again.node || again.node.createdIndex !== heir.createdIndex) return this.heirRemoved(heir);
    return this.heirLeads(heir, again.etcdIndex, again.node.value ?? value);
  }

  private witnessSaw(verdict: TurnVerdict): Next {
    if (verdict.kind === "lost") throw new MembershipLostError(`membership ${this.membership.id} was deleted before its turn came`);
    if (verdict.kind === "turn") return { turnAt: Math.max(this.turnAt, verdict.at), proven: true };
    // It gave up (etcd had forgotten its history): a read proves the turn instead.
    if (this.awaitingWitness) return { turnAt: this.turnAt, proven: false };
    return "keep-watching";
  }

  /** Watches the heir, or the leader when the heir will not announce (or there is none but ours). */
  private watchNext(): void {
    const heir = this.older.heir();
    if (heir && this.silentName(heir) === undefined) this.watches.follow(heir, heir.seenAt, true);
    else this.watches.follow(this.older.oldest()!, this.leaderSeenAt);
  }

  /** The member next in line holds a witness of its turn, from an index at which our key was there. */
  private armWitness(): void {
    if (this.older.size !== 1 || this.watches.hasWitness()) return;
    const predecessorKey = this.older.oldest()!.key;
    const { id, token } = this.membership;
    this.witnessFrom = this.state.knownAliveAt + 1;
    this.watches.witness(new TurnWitness(this.history, this.dir, id, token, predecessorKey, this.state.knownAliveAt, this.watches.signal));
  }

  /** The name of a heir that will not announce (a 0.0.1 member, or a key written by hand), else undefined. */
  private silentName(heir: LineMember): string | undefined {
    return heir.createdIndex === this.silentHeir?.createdIndex ? this.silentHeir.name : this.older.permanentName(heir.createdIndex);
  }
}
