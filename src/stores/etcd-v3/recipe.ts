// etcd's own election recipe (client/v3/concurrency/election.go) on the v3 API,
// so that our members, `etcdctl elect` and Go programs using
// concurrency.Election share one election. It sees etcd through port.ts only;
// etcd3/ implements that on the etcd3 client.
//
//   join      LeaseGrant(ttl), then Txn If CreateRevision(<key>/<lease id in hex>) = 0
//                                       Then Put(that key, name, lease) and the
//                                            turn's two reads, at the put's revision
//                                       Else Get(that key)
//   renew     one message on the client's shared LeaseKeepAlive stream, and its
//             answer (src/stores/etcd-v3/etcd3/keepalive-stream.ts); a TTL of 0 means the lease is gone
//   turn      Get(<key>/, oldest create revision first, max create revision = ours,
//             limit LINE_END_MEMBERS + 1): our own key and every member before
//             it. None before it: we lead. If the line goes on past the limit,
//             the same read newest first, for its other end. The first turn
//             takes both from the join's transaction. Otherwise watch
//             the member just before ours (etcd's recipe) and our own key, in
//             one watch over the keys from one to the other (deletions only,
//             unless the predecessor leads: other members' keys fall in that
//             range), and the leader with the oldest members after it, in one
//             watch over the keys from the first of them to the last (see
//             frontRange), from the read's revision on; when the predecessor
//             goes, watch the next one from the revision it was last seen at
//             (reads only if etcd compacted that history). The last one's
//             deletion, with no deletion of ours before or with it in that
//             one watch, proves our key outlived it: we lead.
//   loss      the leader watches its own key for its deletion
//   leave     LeaseRevoke, which deletes the key
//   observe   Get(<key>/, oldest create revision first, limit 1), and if that
//             key is no member, the keys from it on; then watch <key>/
//
// Members are only the keys etcd's recipe creates, `<key>/<lease id in hex>`
// (see isLeaseHex). etcd's recipe itself counts every key under `<key>/`, so
// with elections at `a/jobs` and `a/jobs/cleanup` its `a/jobs` members wait
// behind the inner election's members and name them as leader (`etcdctl elect
// -l a/jobs` prints them). Ours skip such keys, and any other key someone
// writes under the prefix, when they read the line, and their observers also
// skip them when they read the leader or watch the prefix. This only makes an
// etcdctl member wait longer than ours would, never lead sooner: it still
// waits for every member of ours older than itself.
//
// The election key is used verbatim, as `etcdctl elect <key>` uses it: members
// are `<key>/<lease id>`. etcd v3 has no directories, so "svc/leader" and
// "/svc/leader" are two different elections here (unlike on the v2 API), each
// shared with etcdctl called with the same string.
//
// Order is the create revision, which every member reads alike. The fencing
// token is the member key's create revision: a later member's is larger.
//
// Waiting costs one listing, made by the join's own transaction: a member
// remembers the members older than itself (no member can become older later;
// of a long line, its two ends), watches the one just before it (etcd's
// recipe) and the oldest ones, and when the one before it goes it watches
// the next one it remembers from the revision it last saw it at. A change of
// leader costs a follower nothing, most often: the new leader's key is in the
// range it watches already. When 1 to 4 members are left at the oldest end it
// listed (drawn at random, so that followers do not all read at the same
// change), it reads that end again, once. (A read sorted by create revision
// makes etcd 3.4 collect and sort every key under the prefix, whatever the
// limit.) It also watches its own key, which
// etcd's Campaign does not (etcd issue 19597): a key deleted by an operator, or
// by its lease expiring, ends the wait at once instead of never.
import type { Claim, ElectionBackend, Leader, LeaderListener, Membership } from "../../contract/backend";
import { processTurns, type TurnQueue } from "../../util/turns";
import { MembershipLostError } from "../../contract/errors";
import { log } from "../../util/log";
import { OlderMembers, type ListedMember } from "./line";
import {
  LeaseNotFoundError,
  WatchCancelledError,
  type CampaignAnswer,
  type EtcdV3Port,
  type KeyValue,
  type RangeAnswer,
  type RangeRequest,
} from "./port";

export interface V3Membership extends Membership {
  /** The member key, `<key>/<lease id in lowercase hex>`. */
  readonly id: string;
  /** The member key's create revision. */
  readonly token: number;
  /** The lease the key is attached to: etcd's int64 in decimal. */
  readonly leaseId: string;
  /** A revision at which the key was known to exist; watches of it start after it. */
  knownAliveAt: number;
  /** The two ends of the line as the join read them, until the first wait takes them. */
  lineAtJoin?: LineEnds;
}

/** Both ends of the line up to a member's key, oldest first and newest first, at one revision. */
interface LineEnds {
  oldest: RangeAnswer;
  newest: RangeAnswer;
}

interface Member {
  key: string;
  name: string;
  createRevision: number;
  /** A revision at which the member was known to exist; a watch of it starts after it. */
  seenAt: number;
}

/** The members older than ours, from one listing: the leader and the one just before ours in full. */
interface MembersAhead {
  older: OlderMembers;
  leader: Member;
  /** The leader itself when only one member is older. */
  predecessor: Member;
}

/**
 * Members listed at each end of a long line (line.ts), one
 * more at the oldest end. A follower reads the oldest end again before it runs
 * out (REFILL_SPREAD), and lists the whole line again once this many members
 * just before it have gone.
 */
export const LINE_END_MEMBERS = 8;

/** A follower reads the oldest end of a long line again once 1 to this many of its members are left there. */
const REFILL_SPREAD = 4;

export class EtcdV3Backend implements ElectionBackend<V3Membership> {
  readonly description: string;
  /** `<key>/`, which every member key starts with. */
  private readonly prefix: string;

  constructor(
    private readonly port: EtcdV3Port,
    key: string,
    private readonly name: string,
    private readonly ttlSeconds: number,
    /** Where followers arm their watches, one per turn of the event loop. */
    private readonly turns: TurnQueue = processTurns,
  ) {
    this.prefix = `${key}/`;
    this.description = `etcd v3 ${key}`;
  }

  async join(signal: AbortSignal): Promise<Claim<V3Membership>> {
    const campaign = this.campaign();
    // A membership created after we stopped waiting would hold a place in
    // line until its TTL ran out: give it up as soon as it exists.
    campaign.then(
      ({ membership }) => {
        if (signal.aborted) this.port.abandonLease(membership.leaseId);
      },
      () => undefined,
    );
    return this.port.awaitAnswer("join", campaign, signal);
  }

  private async campaign(): Promise<Claim<V3Membership>> {
    // The lease's time to live runs from when etcd grants it.
    const sentAt = performance.now();
    // No automatic keep-alive: the state machine renews, on its own schedule.
    const lease = await this.port.grantLease(this.ttlSeconds);
    if (lease.ttlSeconds !== this.ttlSeconds) {
      log.v3("asked for a %d s lease, etcd granted %s s", this.ttlSeconds, lease.ttlSeconds);
    }
    const key = this.prefix + leaseHex(lease.id);
    try {
      // The same transaction reads both ends of the line, at the revision of
      // our put (a transaction's reads see its own writes): our key is the
      // newest there, so neither read needs our create revision to stop at it,
      // and the first wait needs no read of its own.
      const reads = [this.lineEnd("ascend", LINE_END_MEMBERS + 1), this.lineEnd("descend", LINE_END_MEMBERS + 1)];
      const txn = await this.port.campaign({ key, value: this.name, leaseId: lease.id, reads });
      const revision = txn.revision;
      // A fresh lease has no key yet, so the put succeeds; etcd's recipe
      // still reads the key back otherwise, and so do we.
      const token = txn.existing ? txn.existing.createRevision : revision;
      const membership: V3Membership = { id: key, token, leaseId: lease.id, knownAliveAt: revision, lineAtJoin: lineEnds(key, txn) };
      return { membership, token, sentAt, ttlMs: lease.ttlSeconds * 1000 };
    } catch (err) {
      this.port.abandonLease(lease.id);
      throw err;
    }
  }

  async renew(membership: V3Membership, signal: AbortSignal): Promise<void> {
    let ttl: number;
    try {
      ttl = await this.port.keepAlive(membership.leaseId, signal);
    } catch (err) {
      if (err instanceof LeaseNotFoundError) throw lostLease(membership, err.cause);
      throw err;
    }
    if (!(ttl > 0)) throw lostLease(membership);
  }

  async awaitTurn(
    joined: Claim<V3Membership> | undefined,
    onLeader: LeaderListener,
    signal: AbortSignal,
  ): Promise<Claim<V3Membership>> {
    if (!joined) throw new TypeError("etcd v3 elections are queues: join before awaiting the turn");
    await this.untilFirstInLine(joined.membership, onLeader, signal);
    return joined;
  }

  private async untilFirstInLine(membership: V3Membership, onLeaderChange: LeaderListener, signal: AbortSignal): Promise<void> {
    // A listing made again may find the leader last named: not a change.
    let named: Leader | undefined;
    const onLeader: LeaderListener = (leader) => {
      if (named && leader && named.token === leader.token && named.name === leader.name) return;
      named = leader;
      onLeaderChange(leader);
    };
    for (;;) {
      const { ours, ahead, revision } = await this.placeInLine(membership, signal);
      if (!ours) throw new MembershipLostError(`membership ${membership.id} is no longer in line`);
      membership.knownAliveAt = Math.max(membership.knownAliveAt, revision);
      if (!ahead) return;
      onLeader(leaderOf(ahead.leader));
      if ((await this.waitForOlderMembers(membership, ahead, onLeader, signal)) === "first") return;
      log.v3("%s: listing the line again", membership.id);
    }
  }

  /** One read of our own key: throws MembershipLostError if it is gone, else moves knownAliveAt to the read's revision. */
  private async confirmAlive(membership: V3Membership, signal: AbortSignal): Promise<void> {
    const answer = await this.port.range({ key: membership.id }, "read membership", signal);
    const kv = answer.kvs[0];
    if (!kv || kv.createRevision !== membership.token) {
      throw new MembershipLostError(`membership ${membership.id} was deleted before its turn came`);
    }
    membership.knownAliveAt = Math.max(membership.knownAliveAt, answer.revision);
  }

  /**
   * The members older than ours, oldest first: all of them, or in a long line
   * its two ends (LINE_END_MEMBERS each), and whether our own key is still
   * there. No member can become older later (create revisions only grow), so
   * this serves the wait until an end runs out of members.
   *
   * The oldest come first, by one read that ends at our own key; a line that
   * read does not reach the end of takes a second read, from our own key
   * backwards. Each member listed costs its decoding and memory in every
   * follower: listing all of a line of a thousand, a hundred thousand members
   * in all, is most of the work a thousand members starting in one process do.
   * (etcd 3.4 still collects and sorts every key under the prefix for either
   * read, whatever the limit.)
   */
  private async placeInLine(
    membership: V3Membership,
    signal: AbortSignal,
  ): Promise<{ ours: boolean; ahead: MembersAhead | undefined; revision: number }> {
    const atJoin = membership.lineAtJoin;
    membership.lineAtJoin = undefined;
    const oldest = atJoin
      ? this.membersOf(atJoin.oldest, LINE_END_MEMBERS + 1)
      : await this.listLine(membership, "ascend", LINE_END_MEMBERS + 1, signal);
    let older = oldest.members;
    let ours = older.at(-1)?.key === membership.id;
    let gapAt: number | undefined;
    const revision = oldest.revision;
    if (ours) {
      older.pop();
    } else if (oldest.full) {
      // The line goes on past what was read: read its other end, ours included.
      const newest = atJoin
        ? this.membersOf(atJoin.newest, LINE_END_MEMBERS + 1)
        : await this.listLine(membership, "descend", LINE_END_MEMBERS + 1, signal);
      ours = newest.members[0]?.key === membership.id;
      const back = newest.members.slice(ours ? 1 : 0).reverse();
      if (older.length > 0 && back.length > 0) {
        const lastOfFront = older.at(-1)!.createRevision;
        const behindFront = back.filter((m) => m.createRevision > lastOfFront);
        // No member read twice: there may be others between the two ends.
        if (behindFront.length === back.length) gapAt = older.length;
        older = older.concat(behindFront);
      } else {
        // An end that held nothing but keys of no member (or whose members
        // all left between the reads): list the whole line instead.
        const all = await this.listLine(membership, "ascend", 0, signal);
        older = all.members;
        ours = older.at(-1)?.key === membership.id;
        if (ours) older.pop();
      }
    }
    if (older.length === 0) return { ours, ahead: undefined, revision };
    // Only the two ends are kept whole; the line keeps numbers (line.ts).
    const leader = fromLine(older[0]!, revision);
    const predecessor = older.length === 1 ? leader : fromLine(older.at(-1)!, revision);
    const line = new OlderMembers(this.prefix, older, revision, gapAt);
    return { ours, ahead: { older: line, leader, predecessor }, revision };
  }

  /**
   * One read of the line up to our own key by create revision, from its start
   * or backwards from ours, at most `limit` keys (0: all). `full` when the
   * limit was reached. Keys of nested elections and foreign keys are left
   * out: etcd cannot leave them out itself, they come back too, names and all.
   */
  private async listLine(
    membership: V3Membership,
    order: "ascend" | "descend",
    limit: number,
    signal: AbortSignal,
  ): Promise<{ members: ListedMember[]; revision: number; full: boolean }> {
    const request = this.lineEnd(order, limit, { max: membership.token });
    return this.membersOf(await this.port.range(request, "read place in line", signal), limit);
  }

  /** A read of the line sorted by create revision, at most `limit` keys (0: all). */
  private lineEnd(order: "ascend" | "descend", limit: number, createRevisions?: { min?: number; max?: number }): RangeRequest {
    return {
      prefix: this.prefix,
      sortByCreate: order,
      limit,
      minCreateRevision: createRevisions?.min,
      maxCreateRevision: createRevisions?.max,
    };
  }

  /** The members a read of the line found, and whether it stopped at `limit` keys. */
  private membersOf(answer: RangeAnswer, limit: number): { members: ListedMember[]; revision: number; full: boolean } {
    const members: ListedMember[] = [];
    for (const kv of answer.kvs) {
      const key = kv.key;
      if (this.isMemberKey(key)) members.push({ key, name: kv.value, createRevision: kv.createRevision });
    }
    return { members, revision: answer.revision, full: limit > 0 && answer.kvs.length === limit };
  }

  /**
   * Follows the member just before ours (etcd's recipe) and the leader until
   * no older member is left; throws MembershipLostError if our key goes first.
   *
   * Our key and the predecessor's are watched by one watch, over the range of
   * keys from one to the other: etcd delivers one watch's events in revision
   * order, and the events of one revision in one answer. So when the
   * predecessor's deletion arrives and no deletion of our key came before it
   * or with it, our key outlived it, and the turn is ours without a read. Two
   * watches would not do: etcd orders the events of one revision across
   * watchers as it likes, and `etcdctl del --prefix` removes the whole line
   * in one revision. Keys of other members that fall in the range are passed
   * over; their joins are not even sent, as the watch takes deletions only
   * unless the predecessor leads (whose puts are its Proclaims).
   *
   * The leader is followed by a second watch, over the range of keys from the
   * first to the last of the oldest members listed whose lease IDs come from
   * the same etcd member as the leader's (frontRange): when the leader goes,
   * its successor is most often in that range already, and the follower names
   * it without sending anything. Only a leader outside the range, or the
   * predecessor taking its place, costs a watch request or two.
   *
   * When the predecessor goes, the next one in `older` takes its place and
   * is watched from the revision it was last seen at, without a read: a
   * watch from a past revision replays what happened since, so a member
   * that went meanwhile is reported gone at once and the one after it is
   * watched. Where etcd has compacted that history (it cancels the watch),
   * point reads say whether our key and the predecessor are still there; the
   * leader's watch, cancelled so, lists the line again.
   */
  private async waitForOlderMembers(
    membership: V3Membership,
    ahead: MembersAhead,
    onLeader: LeaderListener,
    signal: AbortSignal,
  ): Promise<"first" | "list again"> {
    let { older } = ahead;
    // Down to this many members at the oldest end of a long line, the
    // follower reads that end again, before it runs out. Drawn at random, so
    // that the followers that listed the line together read it again over
    // several changes of leader, not all at the same one.
    const refillAt = 1 + Math.floor(Math.random() * REFILL_SPREAD);
    const watches = this.port.watches<"line" | "leader">(signal);
    let { predecessor, leader } = ahead;
    /** The keys the "leader" watch covers: none while the leader is the predecessor. */
    let leaderRange: KeyRange | undefined;
    /** Whether the "line" watch reports puts: only while the predecessor leads. */
    let lineSeesPuts = false;
    /** Older members the "leader" watch saw go that are not at the oldest end yet (create revisions). */
    const gone = new Set<number>();
    /** Names changed in place (a put) of older members not leading yet, by create revision. */
    const renamed = new Map<number, string>();
    const watchLine = () => {
      const [start, end] = [predecessor.key, membership.id].sort() as [string, string];
      const from = Math.min(predecessor.seenAt, membership.knownAliveAt) + 1;
      // A put in the range is a member joining whose key falls in it (a third
      // of those that join, on average), or the leader's Proclaim: nothing to
      // wake for unless the predecessor leads. From where it was last seen, a
      // Proclaim since is replayed when it comes to lead.
      lineSeesPuts = predecessor === leader;
      watches.add("line", { range: { start, end: `${end}\0` }, reportCancel: true, deletesOnly: !lineSeesPuts }, from);
    };
    /** Whether the "leader" watch must be (re)armed before the next event. */
    const leaderRangeMisses = () =>
      leader !== predecessor && !(leaderRange && leader.key >= leaderRange.start && leader.key <= leaderRange.end);
    const watchLeader = () => {
      if (leader === predecessor) {
        if (leaderRange) watches.remove("leader");
        leaderRange = undefined;
      } else if (leaderRangeMisses()) {
        leaderRange = frontRange(this.prefix, leader, older.oldestEnd(LINE_END_MEMBERS + 1));
        // Every member in it was last seen at the listing (the leader perhaps
        // later): from there, whatever happened to any of them since is replayed.
        const range = { start: leaderRange.start, end: `${leaderRange.end}\0` };
        watches.add("leader", { range, reportCancel: true }, older.listedAt + 1);
      }
    };
    const goneInQueue = (key: string) => watches.anyQueued((e) => e.type === "delete" && e.kv.key === key);
    /** The members at the ends of `older` become the predecessor and the leader, named and watched. */
    const takeNextInLine = async (): Promise<"first" | "list again" | undefined> => {
      if (older.isEmpty) return "first";
      if (older.exhausted) return "list again";
      const newest = older.at("newest")!;
      if (newest.createRevision !== predecessor.createRevision) {
        predecessor = newest.createRevision === leader.createRevision ? leader : this.fromLine(newest, older, renamed);
        watchLine();
      }
      const oldest = older.at("oldest")!;
      if (oldest.createRevision !== leader.createRevision) {
        leader = oldest.createRevision === predecessor.createRevision ? predecessor : this.fromLine(oldest, older, renamed);
        // A leader known to be gone already is not named: its deletion is on its way.
        if (!gone.has(leader.createRevision) && !goneInQueue(leader.key)) onLeader(leaderOf(leader));
        if (leaderRangeMisses()) {
          // Named at once; the watch on the new leader can wait its turn (src/util/turns.ts).
          await this.turns.next();
          signal.throwIfAborted();
        }
      }
      if (leader === predecessor && !lineSeesPuts) watchLine();
      watchLeader();
      return undefined;
    };
    try {
      // The listing named the leader; unless ours is next in line, the first
      // watches can wait their turn too (from the listing's revision, they
      // replay what came since).
      if (predecessor !== leader) {
        await this.turns.next();
        signal.throwIfAborted();
      }
      watchLine();
      watchLeader();
      for (;;) {
        const event = await watches.next();
        let departed: Member;
        if (event.watch === "leader") {
          if (event.type === "cancelled") {
            // etcd has compacted the history since the listing.
            log.v3("%s: %s", leader.key, event.error.message);
            return "list again";
          }
          const key = event.kv.key;
          const listed = key === leader.key ? leader : older.oldestEnd(LINE_END_MEMBERS + 1).find((m) => m.key === key);
          if (!listed || key === membership.id) continue; // not a member we follow here
          if (event.type === "put") {
            if (event.kv.createRevision !== listed.createRevision) continue; // a later key of that name
            // etcd's Proclaim: a member changed its value in place.
            const name = event.kv.value;
            if (listed !== leader) {
              renamed.set(listed.createRevision, name);
              if (listed.createRevision === predecessor.createRevision) predecessor.name = name;
            } else if (name !== leader.name) {
              leader.name = name;
              leader.seenAt = event.kv.modRevision;
              onLeader(leaderOf(leader));
            }
            continue;
          }
          if (listed !== leader) {
            // Named later, when it reaches the oldest end; the predecessor is
            // only ever taken off by its own watch, which proves our key outlived it.
            gone.add(listed.createRevision);
            continue;
          }
          departed = leader;
        } else {
          const member = predecessor;
          if (event.type === "cancelled") {
            // etcd has compacted the history from where we last saw them.
            log.v3("%s: %s", member.key, event.error.message);
            await this.confirmAlive(membership, signal);
            if (await this.stillThere(member, signal)) {
              watchLine();
              continue;
            }
          } else {
            const key = event.kv.key;
            if (key === membership.id) {
              if (event.type === "delete") throw new MembershipLostError(`membership ${membership.id} was deleted while waiting`);
              continue;
            }
            if (key !== member.key) continue; // another member's key inside the range
            if (event.type === "put" && event.kv.createRevision !== member.createRevision) continue; // a later key of that name
            if (event.type === "put") {
              // etcd's Proclaim, while the predecessor leads.
              member.name = event.kv.value;
              member.seenAt = event.kv.modRevision;
              if (member === leader) onLeader(leaderOf(leader));
              continue;
            }
            // Whatever etcd sent with this deletion (the same revision's events) is queued already.
            const oursGoneToo = watches.anyQueued((e) => e.watch === "line" && e.type === "delete" && e.kv.key === membership.id);
            if (oursGoneToo) throw new MembershipLostError(`membership ${membership.id} was deleted with the member before it`);
            membership.knownAliveAt = Math.max(membership.knownAliveAt, event.kv.modRevision);
          }
          departed = member;
        }
        if (!older.remove(departed.createRevision)) continue;
        // Members seen going while they were not the oldest go with it, short
        // of the newest: that one leaves by its own watch, the proof that our
        // key outlived it.
        for (;;) {
          const next = older.at("oldest");
          if (!next || next.createRevision === older.at("newest")!.createRevision || !gone.delete(next.createRevision)) break;
          older.remove(next.createRevision);
        }
        let outcome = await takeNextInLine();
        if (outcome) return outcome;
        const known = older.oldestEndSize;
        if (known !== undefined && known <= refillAt) {
          const refilled = await this.readOldestEnd(older, signal);
          if (!refilled) return "list again";
          older = refilled;
          leaderRange = undefined; // to take in the members just read
          outcome = await takeNextInLine();
          if (outcome) return outcome;
        }
      }
    } finally {
      // Our turn: the cancels (a message each on the watch stream) can wait
      // until the election has said so, and the leader's watch of its own
      // key (awaitLoss) has joined the stream.
      if (older.isEmpty) watches.closeSoon();
      else watches.close();
    }
  }

  /**
   * `older` with its oldest end read again: the members from the oldest one
   * known on, up to the newest end, by one read. Undefined when that end
   * cannot be told from the read (line.ts): list it all again.
   */
  private async readOldestEnd(older: OlderMembers, signal: AbortSignal): Promise<OlderMembers | undefined> {
    const from = older.at("oldest");
    const to = older.newestEndStart;
    if (!from || to === undefined) return undefined;
    const request = this.lineEnd("ascend", LINE_END_MEMBERS + 1, { min: from.createRevision, max: to - 1 });
    const { members, full } = this.membersOf(await this.port.range(request, "read the line's oldest end", signal), LINE_END_MEMBERS + 1);
    return older.withOldestEnd(members, full);
  }

  /** A member of `older` as the listing saw it, under the name it has since taken if it took one. */
  private fromLine(listed: ListedMember, older: OlderMembers, renamed: Map<number, string>): Member {
    const member = fromLine(listed, older.listedAt);
    const name = renamed.get(member.createRevision);
    if (name !== undefined) member.name = name;
    return member;
  }

  /** One point read: whether `member` still exists (and since when it is known to), its name refreshed. */
  private async stillThere(member: Member, signal: AbortSignal): Promise<boolean> {
    const answer = await this.port.range({ key: member.key }, "read member", signal);
    const kv = answer.kvs[0];
    if (!kv || kv.createRevision !== member.createRevision) return false;
    member.name = kv.value;
    member.seenAt = answer.revision;
    return true;
  }

  async awaitLoss(membership: V3Membership, signal: AbortSignal): Promise<void> {
    // Watching from just after the revision the key was last seen at also
    // delivers a deletion that happened before the watch was set up.
    let from = membership.knownAliveAt + 1;
    for (let justRead = false; ; justRead = true) {
      const watches = this.port.watches<"ours">(signal);
      try {
        watches.add("ours", { key: membership.id, deletesOnly: true }, from);
        await watches.next();
        return;
      } catch (err) {
        // A watch from a revision just read cannot have lost its history to
        // a compaction: etcd cancelled it for some other reason.
        if (justRead || !(err instanceof WatchCancelledError)) throw err;
      } finally {
        watches.close();
      }
      // etcd no longer has the history since then: look at the key itself.
      const answer = await this.port.range({ key: membership.id }, "read membership", signal);
      const kv = answer.kvs[0];
      if (!kv || kv.createRevision !== membership.token) return;
      membership.knownAliveAt = answer.revision;
      from = membership.knownAliveAt + 1;
    }
  }

  leave(membership: V3Membership, signal: AbortSignal): Promise<void> {
    return this.port.revokeLease(membership.leaseId, signal);
  }

  async observe(onLeader: LeaderListener, signal: AbortSignal): Promise<void> {
    let { leader, revision } = await this.leaderAt(signal);
    onLeader(leaderOf(leader));
    const watches = this.port.watches<"line">(signal);
    try {
      watches.add("line", { prefix: this.prefix }, revision + 1);
      for (;;) {
        const event = await watches.next();
        if (event.type === "cancelled") continue; // not asked for: a cancel fails the set
        const { type, kv } = event;
        const key = kv.key;
        if (!this.isMemberKey(key)) continue;
        if (type === "put") {
          // The first key into an empty line leads; a put on the leader's key renames it.
          if (!leader || key === leader.key) onLeader(leaderOf((leader = toMember(kv))));
        } else if (key === leader?.key) {
          ({ leader } = await this.leaderAt(signal, kv.modRevision));
          onLeader(leaderOf(leader));
        }
      }
    } finally {
      watches.close();
    }
  }

  async readLeader(signal: AbortSignal): Promise<Leader | undefined> {
    return leaderOf((await this.leaderAt(signal)).leader);
  }

  /**
   * The member with the oldest create revision (at `revision`, or now), and
   * the revision read at. Usually one read of one key; only when the oldest
   * key under the prefix is not a member (a nested election's, or a foreign
   * one) does a second read, at the same revision, list the keys from it on.
   */
  private async leaderAt(signal: AbortSignal, revision?: number): Promise<{ leader: Member | undefined; revision: number }> {
    const prefix = this.prefix;
    const answer = await this.port.range({ prefix, sortByCreate: "ascend", limit: 1, revision }, "read leader", signal);
    const readAt = revision ?? answer.revision;
    let keys = answer.kvs;
    const first = keys[0];
    if (first && !this.isMemberKey(first.key)) {
      // No limit: paging would save only what is sent, not etcd's work (3.4
      // collects and sorts every key under the prefix whatever the limit),
      // and only observers read this, when a leader goes.
      const rest = { prefix, sortByCreate: "ascend", minCreateRevision: first.createRevision, revision: readAt } as const;
      keys = (await this.port.range(rest, "read leader", signal)).kvs;
    }
    const leader = keys.find((kv) => this.isMemberKey(kv.key));
    return { leader: leader && toMember(leader), revision: readAt };
  }

  /** Whether `key` is one of this election's members, not a nested election's key or a foreign one. */
  private isMemberKey(key: string): boolean {
    return key.startsWith(this.prefix) && isLeaseHex(key.slice(this.prefix.length));
  }
}

/**
 * The line's two ends as the join's transaction read them, or none if they
 * are not what they should be: our own key, newest at that revision, first
 * in the newest-first read.
 */
function lineEnds(key: string, txn: CampaignAnswer): LineEnds | undefined {
  const [oldest, newest] = txn.reads;
  if (!txn.succeeded || !oldest || !newest || newest.kvs[0]?.key !== key) return undefined;
  return { oldest, newest };
}

/** etcd's key suffix for a lease: the int64 ID in lowercase hex, unpadded (Go's %x). */
export function leaseHex(leaseId: string): string {
  return BigInt(leaseId).toString(16);
}

/**
 * Whether `suffix` is what leaseHex makes of a lease ID etcd grants, a
 * positive int64 in Go's %x: lowercase hex digits, no leading zero, no sign,
 * at most 7fffffffffffffff. Keys of a nested election (`cleanup/1041a2…`) or
 * that users write (`junk`, `0`) are not.
 */
function isLeaseHex(suffix: string): boolean {
  return /^(?:[1-9a-f][0-9a-f]{0,14}|[1-7][0-9a-f]{15})$/.test(suffix);
}

/** Keys from `start` to `end`, both included. */
interface KeyRange {
  start: string;
  end: string;
}

/**
 * The keys from the first to the last of `front` (the oldest members, the
 * leader first) whose lease IDs came from the etcd member that granted the
 * leader's. etcd makes a lease ID of the granting member's ID, in its top 16
 * bits, and a count that only grows (pkg/idutil), so these keys sort as the
 * leases were granted, about as their members joined: the range holds the
 * oldest members and rarely any other key. Leases from other etcd members
 * sort elsewhere, and a range stretched over them would take in the keys of
 * most members that join later.
 */
function frontRange(prefix: string, leader: Member, front: readonly ListedMember[]): KeyRange {
  const source = leaseSource(leader.key.slice(prefix.length));
  let start = leader.key;
  let end = leader.key;
  for (const { key } of front) {
    if (leaseSource(key.slice(prefix.length)) !== source) continue;
    if (key < start) start = key;
    else if (key > end) end = key;
  }
  return { start, end };
}

/** What tells apart the lease IDs of different etcd members in leaseHex's form: length and all but the last 48 bits. */
function leaseSource(hex: string): string {
  return `${hex.length}:${hex.slice(0, -12)}`;
}

/** A member as the leader it is: its name and its fencing token. */
function leaderOf(member: Member | undefined): Leader | undefined {
  return member && { name: member.name, token: member.createRevision };
}

/** A member from the line, as the listing saw it: watched from there, a removal since is replayed. */
function fromLine({ key, name, createRevision }: ListedMember, listedAt: number): Member {
  return { key, name, createRevision, seenAt: listedAt };
}

function toMember(kv: KeyValue, seenAt = kv.modRevision): Member {
  return { key: kv.key, name: kv.value, createRevision: kv.createRevision, seenAt };
}

function lostLease(membership: V3Membership, cause?: unknown): MembershipLostError {
  return new MembershipLostError(
    `lease ${leaseHex(membership.leaseId)} of ${membership.id} has expired or was revoked`,
    cause === undefined ? undefined : { cause },
  );
}
