// One wait of a v3 follower for the members older than its own to go:
// etcd's waitDeletes (client/v3/concurrency/key.go), which reads the newest
// older key, waits for its deletion and reads again, done with one listing
// and two watches instead of a read per member gone.
//
// Follows the member just before ours (etcd's recipe) and the leader until
// no older member is left; throws MembershipLostError if our key goes first.
//
// Our key and the predecessor's are watched by one watch ("line"), over the
// range of keys from one to the other: etcd delivers one watch's events in
// revision order, and the events of one revision in one answer. So when the
// predecessor's deletion arrives and no deletion of our key came before it or
// with it, our key outlived it, and the turn is ours without a read. Two
// watches would not do: etcd orders the events of one revision across
// watchers as it likes, and `etcdctl del --prefix` removes the whole line in
// one revision. Keys of other members that fall in the range are passed over;
// their joins are not even sent, as the watch takes deletions only unless the
// predecessor leads (whose puts are its Proclaims).
//
// The leader is followed by a second watch ("leader"), over the range of keys
// from the first to the last of the oldest members listed whose lease IDs
// come from the same etcd member as the leader's (MemberKeys.frontRange):
// when the leader goes, its successor is most often in that range already,
// and the follower names it without sending anything. Only a leader outside
// the range, or the predecessor taking its place, costs a watch request or two.
//
// When the predecessor goes, the next one in `older` takes its place and is
// watched from the revision it was last seen at, without a read: a watch from
// a past revision replays what happened since, so a member that went
// meanwhile is reported gone at once and the one after it is watched. Where
// etcd has compacted that history (it cancels the watch), point reads say
// whether our key and the predecessor are still there; the leader's watch,
// cancelled so, lists the line again.
import type { LeaderListener } from "../../contract/backend";
import { MembershipLostError } from "../../contract/errors";
import { untilAborted } from "../../util/abort";
import { log } from "../../util/log";
import type { TurnQueue } from "../../util/turns";
import type { ListedMember, OlderMembers } from "./line";
import { fromLine, leaderOf, type Member } from "./member";
import type { KeysFromTo, MemberKeys } from "./member-keys";
import type { MembershipState, V3Membership } from "./membership";
import { LINE_END_MEMBERS, type LineReader, type MembersAhead } from "./place-in-line";
import type { EtcdV3Port, KeyValue, WatchCancelledError, WatchSet } from "./port";

/** A follower reads the oldest end of a long line again once 1 to this many of its members are left there. */
export const REFILL_SPREAD = 4;

/** How a wait ends: the turn is ours, or the line must be listed again to go on. */
export type WaitOutcome = "first" | "list again";

/** What every wait of one election's followers is given by its backend. */
export interface FollowerSetting {
  readonly port: EtcdV3Port;
  readonly keys: MemberKeys;
  readonly reader: LineReader;
  /** Where followers arm their watches, one per turn of the event loop. */
  readonly turns: TurnQueue;
  /** A number in [0, 1), as Math.random gives. */
  readonly random: () => number;
}

export class Follower {
  /** The members older than ours still in line, as listed (and read again at the oldest end since). */
  private older: OlderMembers;
  /** The member just before ours: watched by "line", with our own key. */
  private predecessor: Member;
  /** The oldest member, which this follower names: watched by "leader", unless it is the predecessor. */
  private leader: Member;
  /** The keys the "leader" watch covers: none while the leader is the predecessor. */
  private leaderRange: KeysFromTo | undefined;
  /** Whether the "line" watch reports puts: only while the predecessor leads. */
  private lineSeesPuts = false;
  /**
   * Older members the "leader" watch saw go that are not at the oldest end
   * yet (create revisions). Made when first needed, as `renamed` is: most
   * followers never see either, and a session may hold ten thousand.
   */
  private gone: Set<number> | undefined;
  /** Names changed in place (a put) of older members not leading yet, by create revision. */
  private renamed: Map<number, string> | undefined;
  /**
   * Down to this many members at the oldest end of a long line, the
   * follower reads that end again, before it runs out. Drawn at random, so
   * that the followers that listed the line together read it again over
   * several changes of leader, not all at the same one.
   */
  private readonly refillAt: number;
  private readonly watches: WatchSet<"line" | "leader">;

  constructor(
    private readonly setting: FollowerSetting,
    private readonly ours: V3Membership,
    /** What the backend knows of our membership; the follower moves knownAliveAt on as it sees our key alive. */
    private readonly state: MembershipState,
    ahead: MembersAhead,
    private readonly onLeader: LeaderListener,
    private readonly signal: AbortSignal,
  ) {
    ({ older: this.older, predecessor: this.predecessor, leader: this.leader } = ahead);
    this.refillAt = 1 + Math.floor(setting.random() * REFILL_SPREAD);
    this.watches = setting.port.watches(signal);
  }

  /** Resolves "first" once no older member is left, "list again" when the line must be read afresh to go on. */
  async untilNoneOlder(): Promise<WaitOutcome> {
    try {
      // The listing named the leader; unless ours is next in line, the first
      // watches can wait their turn too (from the listing's revision, they
      // replay what came since).
      if (this.predecessor !== this.leader) await this.nextTurn();
      this.watchLine();
      this.watchLeader();
      for (;;) {
        const event = await this.watches.next();
        let departed: Member | "list again" | undefined;
        if (event.type === "cancelled") {
          departed = event.watch === "leader" ? this.onLeaderWatchCancelled(event.error) : await this.onLineWatchCancelled(event.error);
        } else {
          departed = event.watch === "leader" ? this.onLeaderWatchEvent(event.type, event.kv) : this.onLineWatchEvent(event.type, event.kv);
        }
        if (departed === "list again") return departed;
        if (departed === undefined) continue;
        const outcome = await this.onDeparted(departed);
        if (outcome) return outcome;
      }
    } finally {
      this.state.unwatchKey(this);
      if (this.older.isEmpty && this.watches.created("line") && !this.signal.aborted) {
        // Our turn: the "line" watch, from our predecessor's key to ours, goes
        // on as the leader's watch of its own key (awaitLoss), instead of a
        // cancel and a create on the watch stream at each hand-over.
        this.watches.remove("leader");
        this.state.handOver(this.watches);
      } else {
        this.watches.close();
      }
    }
  }

  /** etcd has compacted the history since the listing: the leader's range cannot be watched from there. */
  private onLeaderWatchCancelled(error: WatchCancelledError): "list again" {
    log.v3("%s: %s", this.leader.key, error.message);
    return "list again";
  }

  /** A put or a deletion in the leader's range: the leader, or one of the oldest members after it. */
  private onLeaderWatchEvent(type: "put" | "delete", kv: KeyValue): Member | undefined {
    const key = kv.key;
    const listed = key === this.leader.key ? this.leader : this.older.oldestEnd(LINE_END_MEMBERS + 1).find((m) => m.key === key);
    if (!listed || key === this.ours.id) return undefined; // not a member we follow here
    if (type === "put") {
      if (kv.createRevision !== listed.createRevision) return undefined; // a later key of that name
      // etcd's Proclaim: a member changed its value in place.
      const name = kv.value;
      if (listed !== this.leader) {
        (this.renamed ??= new Map()).set(listed.createRevision, name);
        if (listed.createRevision === this.predecessor.createRevision) this.predecessor.name = name;
      } else if (name !== this.leader.name) {
        this.leader.name = name;
        this.leader.seenAt = kv.modRevision;
        this.onLeader(leaderOf(this.leader));
      }
      return undefined;
    }
    if (listed !== this.leader) {
      // Named later, when it reaches the oldest end; the predecessor is
      // only ever taken off by its own watch, which proves our key outlived it.
      (this.gone ??= new Set()).add(listed.createRevision);
      return undefined;
    }
    return this.leader;
  }

  /** etcd has compacted the history from where we last saw our key and the predecessor: read both. */
  private async onLineWatchCancelled(error: WatchCancelledError): Promise<Member | undefined> {
    const member = this.predecessor;
    log.v3("%s: %s", member.key, error.message);
    await this.confirmAlive();
    if (await this.stillThere(member)) {
      this.watchLine();
      return undefined;
    }
    return member;
  }

  /** A deletion of our key or the predecessor's, or a put on it (its Proclaim, while it leads). */
  private onLineWatchEvent(type: "put" | "delete", kv: KeyValue): Member | undefined {
    const member = this.predecessor;
    const key = kv.key;
    if (key === this.ours.id) {
      if (type === "delete") throw new MembershipLostError(`membership ${this.ours.id} was deleted while waiting`);
      return undefined;
    }
    if (key !== member.key) return undefined; // another member's key inside the range
    if (type === "put" && kv.createRevision !== member.createRevision) return undefined; // a later key of that name
    if (type === "put") {
      // etcd's Proclaim, while the predecessor leads.
      member.name = kv.value;
      member.seenAt = kv.modRevision;
      if (member === this.leader) this.onLeader(leaderOf(this.leader));
      return undefined;
    }
    // Whatever etcd sent with this deletion (the same revision's events) is queued already.
    const ourKey = this.ours.id;
    const oursGoneToo = this.watches.anyQueued((e) => e.watch === "line" && e.type === "delete" && e.kv.key === ourKey);
    if (oursGoneToo) throw new MembershipLostError(`membership ${this.ours.id} was deleted with the member before it`);
    this.state.knownAliveAt = Math.max(this.state.knownAliveAt, kv.modRevision);
    return member;
  }

  /** `departed` has left the line: the next members in line take its place, and the oldest end is read again when it runs low. */
  private async onDeparted(departed: Member): Promise<WaitOutcome | undefined> {
    if (!this.older.remove(departed.createRevision)) return undefined;
    // Members seen going while they were not the oldest go with it, short
    // of the newest: that one leaves by its own watch, the proof that our
    // key outlived it.
    for (;;) {
      const next = this.older.at("oldest");
      if (!next || next.createRevision === this.older.at("newest")!.createRevision || !this.gone?.delete(next.createRevision)) break;
      this.older.remove(next.createRevision);
    }
    let outcome = await this.takeNextInLine();
    if (outcome) return outcome;
    const known = this.older.oldestEndSize;
    if (known !== undefined && known <= this.refillAt) {
      const refilled = await this.setting.reader.readOldestEnd(this.older, this.signal);
      if (!refilled) return "list again";
      this.older = refilled;
      this.leaderRange = undefined; // to take in the members just read
      outcome = await this.takeNextInLine();
      if (outcome) return outcome;
    }
    return undefined;
  }

  /** The members at the ends of `older` become the predecessor and the leader, named and watched. */
  private async takeNextInLine(): Promise<WaitOutcome | undefined> {
    const older = this.older;
    if (older.isEmpty) return "first";
    if (older.exhausted) return "list again";
    const newest = older.at("newest")!;
    if (newest.createRevision !== this.predecessor.createRevision) {
      this.predecessor = newest.createRevision === this.leader.createRevision ? this.leader : this.fromLine(newest);
      this.watchLine();
    }
    const oldest = older.at("oldest")!;
    if (oldest.createRevision !== this.leader.createRevision) {
      this.leader = oldest.createRevision === this.predecessor.createRevision ? this.predecessor : this.fromLine(oldest);
      // A leader known to be gone already is not named: its deletion is on its way.
      if (!this.gone?.has(this.leader.createRevision) && !this.goneInQueue(this.leader.key)) this.onLeader(leaderOf(this.leader));
      if (this.leaderRangeMisses()) {
        // Named at once; the watch on the new leader can wait its turn (src/util/turns.ts).
        await this.nextTurn();
      }
    }
    if (this.leader === this.predecessor && !this.lineSeesPuts) this.watchLine();
    this.watchLeader();
    return undefined;
  }

  private watchLine(): void {
    const [first, last] = [this.predecessor.key, this.ours.id].sort() as [string, string];
    const from = Math.min(this.predecessor.seenAt, this.state.knownAliveAt) + 1;
    // A put in the range is a member joining whose key falls in it (a third
    // of those that join, on average), or the leader's Proclaim: nothing to
    // wake for unless the predecessor leads. From where it was last seen, a
    // Proclaim since is replayed when it comes to lead.
    this.lineSeesPuts = this.predecessor === this.leader;
    this.watches.add("line", { range: { start: first, end: `${last}\0` }, reportCancel: true, deletesOnly: !this.lineSeesPuts }, from);
    // The range holds our own key: once etcd confirms the watch, a renewal need not read the key.
    this.state.watchKey(this, () => this.watches.created("line"));
  }

  private watchLeader(): void {
    if (this.leader === this.predecessor) {
      if (this.leaderRange) this.watches.remove("leader");
      this.leaderRange = undefined;
    } else if (this.leaderRangeMisses()) {
      const range = this.setting.keys.frontRange(this.leader.key, this.older.oldestEnd(LINE_END_MEMBERS + 1));
      this.leaderRange = range;
      // Every member in it was last seen at the listing (the leader perhaps
      // later): from there, whatever happened to any of them since is replayed.
      this.watches.add("leader", { range: { start: range.first, end: `${range.last}\0` }, reportCancel: true }, this.older.listedAt + 1);
    }
  }

  /** Whether the "leader" watch must be (re)armed before the next event. */
  private leaderRangeMisses(): boolean {
    const { leader, leaderRange } = this;
    return leader !== this.predecessor && !(leaderRange && leader.key >= leaderRange.first && leader.key <= leaderRange.last);
  }

  private goneInQueue(key: string): boolean {
    return this.watches.anyQueued((e) => e.type === "delete" && e.kv.key === key);
  }

  /** Waits in the turn queue; the signal ends the wait at once (awaitTurn settles when it aborts). */
  private async nextTurn(): Promise<void> {
    await untilAborted("wait", this.setting.turns.next(), this.signal);
  }

  /** A member of `older` as the listing saw it, under the name it has since taken if it took one. */
  private fromLine(listed: ListedMember): Member {
    const member = fromLine(listed, this.older.listedAt);
    const name = this.renamed?.get(member.createRevision);
    if (name !== undefined) member.name = name;
    return member;
  }

  /** One read of our own key: throws MembershipLostError if it is gone, else moves knownAliveAt to the read's revision. */
  private async confirmAlive(): Promise<void> {
    const answer = await this.setting.port.range({ key: this.ours.id }, "read membership", this.signal);
    const kv = answer.kvs[0];
    if (!kv || kv.createRevision !== this.ours.token) {
      throw new MembershipLostError(`membership ${this.ours.id} was deleted before its turn came`);
    }
    this.state.knownAliveAt = Math.max(this.state.knownAliveAt, answer.revision);
  }

  /** One point read: whether `member` still exists (and since when it is known to), its name refreshed. */
  private async stillThere(member: Member): Promise<boolean> {
    const answer = await this.setting.port.range({ key: member.key }, "read member", this.signal);
    const kv = answer.kvs[0];
    if (!kv || kv.createRevision !== member.createRevision) return false;
    member.name = kv.value;
    member.seenAt = answer.revision;
    return true;
  }
}
