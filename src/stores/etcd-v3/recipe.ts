// etcd's own election recipe (client/v3/concurrency/election.go) on the v3 API,
// so that our members, `etcdctl elect` and Go programs using
// concurrency.Election share one election.
//
//   join      LeaseGrant(ttl) (or a session's lease: member-lease.ts, session/),
//             then Txn If CreateRevision(<key>/<lease id in hex>) = 0
//                                       Then Put(that key, name, lease)
//                                       Else Get(that key)
//   renew     one message on the client's shared LeaseKeepAlive stream, and its
//             answer (src/stores/etcd-v3/etcd3/keepalive-stream.ts); a TTL of 0 means the lease is gone.
//             (on a session, the session's one keep-alive, shared by its members).
//             With no watch of our key that etcd confirmed, also Get(our key):
//             a key deleted while its lease lives is a membership lost
//   turn      Get(<key>/, oldest create revision first, max create revision = ours,
//             limit LINE_END_MEMBERS + 1): our own key and every member before
//             it. None before it: we lead. If the line goes on past the limit,
//             the same read newest first, for its other end. Then watch
//             the member just before ours (etcd's recipe) and our own key, in
//             one watch over the keys from one to the other (deletions only,
//             unless the predecessor leads: other members' keys fall in that
//             range), and the leader with the oldest members after it, in one
//             watch over the keys from the first of them to the last (see
//             MemberKeys.frontRange), from the read's revision on; when the predecessor
//             goes, watch the next one from the revision it was last seen at
//             (reads only if etcd compacted that history). The last one's
//             deletion, with no deletion of ours before or with it in that
//             one watch, proves our key outlived it: we lead.
//   loss      the leader watches its own key for its deletion
//   leave     LeaseRevoke, which deletes the key; on a session, whose lease
//             holds other elections too, Txn If CreateRevision(key) = ours
//             Then Delete(key) (Resign), and one LeaseRevoke at its close
//   observe   Get(<key>/, oldest create revision first, limit 1), and if that
//             key is no member, the keys from it on; then watch <key>/
//
// Members are only the keys etcd's recipe creates, `<key>/<lease id in hex>`
// (see isLeaseHex in member-keys.ts). etcd's recipe itself counts every key under `<key>/`, so
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
// Waiting costs one listing, made when the wait starts: a member
// remembers the members older than itself (no member can become older later;
// of a long line, its two ends), watches the one just before it (etcd's
// recipe) and the oldest ones, and when the one before it goes it watches
// the next one it remembers from the revision it last saw it at. A change of
// leader costs a follower nothing, most often: the new leader's key is in the
// range it watches already. When 1 to 4 members are left at the oldest end it
// listed (drawn at random, so that followers do not all read at the same
// change), it reads that end again, once. (A read sorted by create revision
// makes etcd 3.4 collect and sort every key under the prefix, whatever the
// limit: about 8 ms at 5,000 keys on the machine of bench/README.md. The
// join's transaction used to make both reads, saving a round trip; but etcd
// applies transactions one at a time, and 5,000 members joining at once held
// up every write behind 40 s of sorting, until keep-alives failed with
// "waiting for the applied index took too long" and leases expired: no leader
// for 20 s and 17,000 errors. As reads of their own they hold up no write.)
// It also watches its own key, which
// etcd's Campaign does not (etcd issue 19597): a key deleted by an operator, or
// by its lease expiring, ends the wait at once instead of never.
//
// The files: this one reads next to election.go, join and awaitTurn being its
// Campaign, leave its Resign (with session.go's lease), observe and
// readLeader its Observe and Leader. place-in-line.ts reads the line,
// follower.ts is one wait of waitDeletes, member-keys.ts the key layout. The
// recipe sees etcd through port.ts only; etcd3/ implements it on the etcd3
// client.
import type { Claim, ElectionBackend, FencedWriteResult, Leader, LeaderListener, Renewed } from "../../contract/backend";
import { MembershipLostError } from "../../contract/errors";
import { systemClock, type Clock } from "../../util/clock";
import { log } from "../../util/log";
import { processTurns, type TurnQueue } from "../../util/turns";
import { abortReason } from "../../util/abort";
import { SETTLES_ON_ABORT } from "../../election/store-calls";
import { RENEWED_TOGETHER, type MembershipRenewal, type RenewalListener, type RenewedTogether } from "../../election/renewal";
import { Follower, type FollowerSetting } from "./follower";
import { leaderOf, memberOf, type Member } from "./member";
import { MemberKeys } from "./member-keys";
import { OwnLease, type MemberLease } from "./member-lease";
import { MembershipState, remember, stateOf, type V3Membership } from "./membership";
import { LineReader } from "./place-in-line";
import { WatchCancelledError, type EtcdV3Port } from "./port";

export type { V3Membership } from "./membership";
export { LINE_END_MEMBERS } from "./place-in-line";

export class EtcdV3Backend implements ElectionBackend<V3Membership>, RenewedTogether<V3Membership> {
  readonly description: string;
  private readonly keys: MemberKeys;
  private readonly reader: LineReader;
  private readonly followers: FollowerSetting;

  constructor(
    private readonly port: EtcdV3Port,
    key: string,
    private readonly name: string,
    ttlSeconds: number,
    /** Where followers arm their watches, one per turn of the event loop. */
    turns: TurnQueue = processTurns,
    /** Whose now() a claim's sentAt is taken from. */
    clock: Clock = systemClock,
    /** Where followers draw when to read the oldest end of a long line again (follower.ts). */
    random: () => number = mathRandom,
    /** Where the member's lease comes from: its own (the default), or an etcd v3 session's. */
    private readonly lease: MemberLease = new OwnLease(port, ttlSeconds, clock),
  ) {
    this.description = `etcd v3 ${key}`;
    this.keys = new MemberKeys(key);
    this.reader = new LineReader(port, this.keys);
    this.followers = { port, keys: this.keys, reader: this.reader, turns, random };
  }

  /** awaitTurn and awaitLoss settle once their signal aborts: every read and watch they wait on does. */
  get [SETTLES_ON_ABORT](): true {
    return true;
  }

  async join(signal: AbortSignal): Promise<Claim<V3Membership>> {
    return this.port.awaitAnswer("join", this.campaign(signal), signal);
  }

  /** session.go's lease (or a session's), then Campaign's transaction. */
  private async campaign(signal: AbortSignal): Promise<Claim<V3Membership>> {
    const { lease, sentAt, campaigned } = await this.lease.acquire(signal);
    const key = this.keys.keyOf(lease.id);
    try {
      const txn = await this.port.campaign({ key, value: this.name, leaseId: lease.id });
      // A membership created after we stopped waiting would hold a place in
      // line until its TTL ran out: give it up as soon as it exists (before
      // the next campaign of this member may start: member-lease.ts).
      if (signal.aborted) throw abortReason("join", signal);
      // A fresh lease has no key yet, so the put succeeds; etcd's recipe
      // still reads the key back otherwise, and so do we.
      const token = txn.existing ? txn.existing.createRevision : txn.revision;
      const membership: V3Membership = { id: key, token, leaseId: lease.id };
      remember(membership, new MembershipState(txn.revision));
      return { membership, token, sentAt, ttlMs: lease.ttlSeconds * 1000 };
    } catch (err) {
      this.lease.abandon(lease, key, err);
      throw err;
    } finally {
      campaigned?.();
    }
  }

  /** On a session, the session's keep-alives renew the member (session/session-renewal.ts); else it renews alone (undefined). */
  [RENEWED_TOGETHER](membership: V3Membership, listener: RenewalListener): MembershipRenewal | undefined {
    return this.lease.renewalOf?.(membership, listener, this);
  }

  async renew(membership: V3Membership, signal: AbortSignal): Promise<Renewed | void> {
    // A keep-alive renews the lease, not the key, which can be deleted while
    // its lease lives. A watch of the key that etcd has confirmed reports a
    // deletion within a delivery; without one (a term just begun, etcd
    // restarting, a connection reset) the key is read beside the keep-alive,
    // so that no renewal counts for a key already gone.
    const state = stateOf(membership);
    const reading = state.keyWatched ? undefined : this.port.range({ key: membership.id }, "read membership", signal);
    reading?.catch(() => undefined);
    const renewed = await this.lease.keepAlive(membership, signal);
    if (!reading) return renewed;
    const answer = await reading;
    const kv = answer.kvs[0];
    if (!kv || kv.createRevision !== membership.token) {
      throw new MembershipLostError(`membership ${membership.id} was deleted while its lease lived`);
    }
    state.knownAliveAt = Math.max(state.knownAliveAt, answer.revision);
    return renewed;
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

  /** Campaign's waitDeletes: until no member older than ours is left. */
  private async untilFirstInLine(membership: V3Membership, onLeaderChange: LeaderListener, signal: AbortSignal): Promise<void> {
    const state = stateOf(membership);
    // A listing made again may find the leader last named: not a change.
    let named: Leader | undefined;
    const onLeader: LeaderListener = (leader) => {
      if (named && leader && named.token === leader.token && named.name === leader.name) return;
      named = leader;
      onLeaderChange(leader);
    };
    for (;;) {
      const { ours, ahead, revision } = await this.reader.placeInLine(membership, signal);
      if (!ours) throw new MembershipLostError(`membership ${membership.id} is no longer in line`);
      state.knownAliveAt = Math.max(state.knownAliveAt, revision);
      if (!ahead) return;
      onLeader(leaderOf(ahead.leader));
      const follower = new Follower(this.followers, membership, state, ahead, onLeader, signal);
      if ((await follower.untilNoneOlder()) === "first") return;
      log.v3("%s: listing the line again", membership.id);
    }
  }

  async awaitLoss(membership: V3Membership, signal: AbortSignal): Promise<void> {
    const state = stateOf(membership);
    if (await this.lossOnHandedOverWatch(membership, state, signal)) return;
    // Watching from just after the revision the key was last seen at also
    // delivers a deletion that happened before the watch was set up.
    let from = state.knownAliveAt + 1;
    for (let justRead = false; ; justRead = true) {
      const watches = this.port.watches<"ours">(signal);
      try {
        watches.add("ours", { key: membership.id, deletesOnly: true }, from);
        state.watchKey(watches, () => watches.created("ours"));
        await watches.next();
        return;
      } catch (err) {
        // A watch from a revision just read cannot have lost its history to
        // a compaction: etcd cancelled it for some other reason.
        if (justRead || !(err instanceof WatchCancelledError)) throw err;
      } finally {
        state.unwatchKey(watches);
        watches.close();
      }
      // etcd no longer has the history since then: look at the key itself.
      const answer = await this.port.range({ key: membership.id }, "read membership", signal);
      const kv = answer.kvs[0];
      if (!kv || kv.createRevision !== membership.token) return;
      state.knownAliveAt = answer.revision;
      from = state.knownAliveAt + 1;
    }
  }

  /**
   * A write etcd applies only while our key is the one our term began on:
   * Txn If CreateRevision(our key) = our token Then operations. Once the
   * term is over (the key deleted, expired with its lease, or made anew by a
   * later campaign) etcd refuses it, however late it arrives.
   */
  fencedWrite(membership: V3Membership, operations: readonly unknown[], signal: AbortSignal): Promise<FencedWriteResult> {
    if (!this.port.fencedTransaction) return Promise.reject(new TypeError(`${this.description}: this port cannot make fenced writes`));
    return this.port.fencedTransaction(membership.id, membership.token, operations, signal);
  }

  /**
   * The leader's wait for its loss on the watch its follower handed over
   * (follower.ts), whose range holds our key: true once our key's deletion
   * came; false, having closed it, if there is none to go on with (not
   * handed over, closed with an earlier phase, or cancelled by etcd), and
   * awaitLoss watches our key afresh from where it was last seen alive.
   */
  private async lossOnHandedOverWatch(membership: V3Membership, state: MembershipState, signal: AbortSignal): Promise<boolean> {
    const watches = state.takeHandedOver();
    if (!watches) return false;
    try {
      if (!watches.created("line") || signal.aborted) return false;
      state.watchKey(watches, () => watches.created("line"));
      for (;;) {
        const event = await watches.next();
        if (event.type === "cancelled") return false;
        // Other members' keys fall in the range too: only our key's deletion is news.
        if (event.type === "delete" && event.kv.key === membership.id) return true;
      }
    } finally {
      state.unwatchKey(watches);
      watches.close();
    }
  }

  /** Resign: the member's own lease is revoked, a session's member key deleted (member-lease.ts). */
  leave(membership: V3Membership, signal: AbortSignal): Promise<void> {
    return this.lease.leave(membership, signal);
  }

  /** Observe: the leader, then every change of it, from one watch of the prefix. */
  async observe(onLeader: LeaderListener, signal: AbortSignal): Promise<void> {
    let { leader, revision } = await this.leaderAt(signal);
    onLeader(leaderOf(leader));
    const watches = this.port.watches<"line">(signal);
    try {
      watches.add("line", { prefix: this.keys.prefix }, revision + 1);
      for (;;) {
        const event = await watches.next();
        if (event.type === "cancelled") continue; // not asked for: a cancel fails the set
        const { type, kv } = event;
        const key = kv.key;
        if (!this.keys.isMember(key)) continue;
        if (type === "put") {
          // The first key into an empty line leads; a put on the leader's key renames it.
          if (!leader || key === leader.key) onLeader(leaderOf((leader = memberOf(kv))));
        } else if (key === leader?.key) {
          ({ leader } = await this.leaderAt(signal, kv.modRevision));
          onLeader(leaderOf(leader));
        }
      }
    } finally {
      watches.close();
    }
  }

  /** Every member in line, oldest (the leader) first: etcdctl's members are skipped, as everywhere (see above). */
  async readCandidates(signal: AbortSignal): Promise<readonly Leader[]> {
    const { kvs } = await this.port.range({ prefix: this.keys.prefix, sortByCreate: "ascend" }, "read candidates", signal);
    return kvs.filter((kv) => this.keys.isMember(kv.key)).map((kv) => leaderOf(memberOf(kv))!);
  }

  /** Leader. */
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
    const { prefix } = this.keys;
    const answer = await this.port.range({ prefix, sortByCreate: "ascend", limit: 1, revision }, "read leader", signal);
    const readAt = revision ?? answer.revision;
    let kvs = answer.kvs;
    const first = kvs[0];
    if (first && !this.keys.isMember(first.key)) {
      // No limit: paging would save only what is sent, not etcd's work (3.4
      // collects and sorts every key under the prefix whatever the limit),
      // and only observers read this, when a leader goes.
      const rest = { prefix, sortByCreate: "ascend", minCreateRevision: first.createRevision, revision: readAt } as const;
      kvs = (await this.port.range(rest, "read leader", signal)).kvs;
    }
    const leader = kvs.find((kv) => this.keys.isMember(kv.key));
    return { leader: leader && memberOf(leader), revision: readAt };
  }
}

/** Math.random, looked up when drawn. */
const mathRandom = (): number => Math.random();

