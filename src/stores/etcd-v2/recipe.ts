// ZooKeeper's in-order election recipe on etcd's v2 API, as etcd-leader 0.0.1
// describes it, through the port (port.ts):
//
//   1. join     POST <dir> value=<name> ttl=<ttl>      -> <dir>/<createdIndex, zero-padded>
//   2. list     GET <dir>?sorted=true
//   3. lead     if ours is the lowest createdIndex
//   4. wait     else watch the member just before ours until it goes, then 2 again
//   5. renew    every TTL/2: PUT <key> ttl=<ttl> refresh=true prevExist=true
//               (no value: wakes no watcher)
//   then        loss: the leader watches its own key for a delete or an expiry;
//               leave: DELETE <key>
//
// The layout and values are those of etcd-leader 0.0.1, so members of both can
// share one election during a rolling upgrade. Where the steps differ:
//
// 4 watches the member that matters, not the one just before ours. The
//   member next in line (the heir) watches the leader; every other member
//   watches the heir. A leader's removal then wakes only the heir, whose
//   proof of turn is the first answer etcd sends and the first this process
//   reads, not one among a hundred. The followers learn the new leader from
//   its announcement a round trip later, and re-arm one watch each, as they
//   would have on the removal.
//
// 4 never goes back to 2: waiting costs no listing. A member remembers the
//   members older than itself from its one listing (no member can become
//   older later, since createdIndex only grows), and when the member it
//   watches goes it watches the next one from the index it was last seen at,
//   which replays its removal if it went meanwhile: one request per change,
//   no read (follower.ts). When etcd has forgotten the history a watch needs
//   (error 401: more than 1000 events since, renewals counted: a refresh
//   takes a place in etcd's history though no watch sees it), a point
//   read of the watched key says whether it is still there; for the member
//   next in line, the watch then goes on from where the leader was last seen
//   (a read cannot show whether that member announced meanwhile; an
//   announcement comes only after the leader's removal), or, if etcd has
//   forgotten that too, a read of the leader tells. A 401 names where etcd's
//   history starts, so the next member last seen before it is read at once,
//   without the watch (history.ts).
//
// 3 after 4 needs our own key: when the last older member goes, the member's
//   witness (turn-witness.ts) or a GET <key> proves our key still exists
//   after that (it may have gone with the whole directory, or been deleted
//   alone) before we lead.
//
// 3 is told: once, a member that waited for its turn announces when it leads,
//   PUT <key> value=<name> ttl=<ttl> prevExist=true: an `update` event, which
//   tells the members watching it that it leads.
//
// No long poll waits unbounded: each is asked again every watchRearmInterval
// (history.ts says why, and why that loop is the recipe's). No read does
// either: a listing or a read unanswered for a TTL is given up, as a create
// is. On node-etcd's HTTP a request lost on a connection that died silently
// is never answered: a member first in line whose listing was lost would
// wait for ever, its renewals keeping its key, and the line, where they are.
import type { Claim, ElectionBackend, Leader, LeaderListener } from "../../contract/backend";
import { MembershipLostError } from "../../contract/errors";
import { untilAborted } from "../../util/abort";
import { systemClock, type Clock } from "../../util/clock";
import { log } from "../../util/log";
import { processTurns, type TurnQueue } from "../../util/turns";
import { Follower } from "./follower";
import { EventHistory, isRemoval } from "./history";
import { electionDirectory } from "./key";
import { OlderMembers } from "./line";
import { isMembershipNode, leaderOf, listMembers, oldest, type Member } from "./listing";
import { MembershipState, type V2Membership } from "./membership-state";
import { V2_REMOVALS, type EtcdV2Port } from "./port";

export type { V2Membership } from "./membership-state";

/**
 * What the backend knows of each membership it joined, kept beside the
 * membership and not on it: the state machine carries the membership (its
 * key and token, read-only) and hands the same object back.
 */
const memberships = new WeakMap<V2Membership, MembershipState>();

const POINT_READ = {} as const;
const QUORUM_READ = { quorum: true } as const;

export class EtcdV2Backend implements ElectionBackend<V2Membership> {
  readonly description: string;
  /** The election directory as etcd names it, in requests and in answers: one leading slash, none trailing. */
  private readonly dir: string;
  private readonly history: EventHistory;
  /** How long a read may go unanswered before it is given up (see the top of this file). */
  private get readBound(): number {
    return this.ttlSeconds * 1000;
  }

  constructor(
    private readonly port: EtcdV2Port,
    key: string,
    private readonly name: string,
    private readonly ttlSeconds: number,
    watchRearmInterval: number,
    /** Where followers re-arm their watches, one per turn of the event loop. */
    private readonly turns: TurnQueue = processTurns,
    /** Where a claim's sentAt is read. */
    private readonly clock: Clock = systemClock,
  ) {
    this.dir = electionDirectory(key);
    this.description = `etcd v2 ${this.dir}`;
    this.history = new EventHistory(port, watchRearmInterval, this.readBound);
  }

  /** Step 1: a place at the back of the line. */
  async join(signal: AbortSignal): Promise<Claim<V2Membership>> {
    const sentAt = this.clock.now();
    // etcd may apply a create whose answer comes after we stopped waiting, and
    // only that answer names the key: keep listening for it (up to a TTL, after
    // which the key is gone anyway) and delete what it names.
    const creating = this.port.createInOrder("create membership", this.dir, this.name, this.ttlSeconds, undefined, this.ttlSeconds * 1000);
    creating.then(
      ({ node }) => {
        if (signal.aborted) this.abandon(node.key);
      },
      () => undefined,
    );
    const { node, etcdIndex } = await untilAborted("create membership", creating, signal);
    const membership: V2Membership = { id: node.key, token: node.createdIndex };
    memberships.set(membership, new MembershipState(etcdIndex));
    // etcd v2 applies the TTL it was given, to the second.
    return { membership, token: node.createdIndex, sentAt, ttlMs: this.ttlSeconds * 1000 };
  }

  private abandon(key: string): void {
    this.port.delete("delete abandoned membership", key, undefined, this.ttlSeconds * 1000).then(
      (deleted) =>
        deleted
          ? log.v2("deleted %s, created after its member stopped waiting", key)
          : log.v2("abandoned %s, created after its member stopped waiting, was gone already", key),
      (err: unknown) => log.v2("could not delete abandoned %s: %s", key, (err as Error).message),
    );
  }

  /** Steps 2 to 4: lead at once if ours is first in line, else wait for the members before it to go. */
  async awaitTurn(
    joined: Claim<V2Membership> | undefined,
    onLeader: LeaderListener,
    signal: AbortSignal,
  ): Promise<Claim<V2Membership>> {
    if (!joined) throw new TypeError("etcd v2 elections are queues: join before awaiting the turn");
    const { membership } = joined;
    const state = stateOf(membership);
    const older = await this.placeInLine(membership, state, signal);
    if (!older) return joined;
    onLeader(leaderOf(older.oldest()));
    const follower = new Follower(membership, state, older, onLeader, this.history, this.dir, this.turns, signal);
    const { turnAt, proven } = await follower.wait();
    if (!proven) await this.confirmAlive(membership, state, turnAt, signal);
    // Members behind ours watch it, not the leader that went: tell them at
    // once, but after `elected`, which the election emits in this turn's
    // microtasks: building node-etcd's request costs a third of a
    // millisecond, and the write goes out at the end of the turn either way.
    // The write gets a TTL, and a renewal announces again if it fails.
    state.unannounced = true;
    state.announcing = new Promise<void>((resolve) => process.nextTick(resolve))
      .then(() => this.announce(membership, state, undefined, this.ttlSeconds * 1000))
      .catch((err: unknown) =>
        log.v2("%s: announcing failed, the next renewal announces: %s", membership.id, (err as Error).message),
      );
    return joined;
  }

  /**
   * The members older than ours, from one listing; undefined when none is.
   * The listing itself is not kept: the wait holds only what it needs
   * (line.ts).
   */
  private async placeInLine(membership: V2Membership, state: MembershipState, signal: AbortSignal): Promise<OlderMembers | undefined> {
    const { members, etcdIndex } = await listMembers(this.port, this.dir, signal, this.readBound);
    const position = members.findIndex((m) => m.key === membership.id);
    if (position < 0) throw new MembershipLostError(`membership ${membership.id} is no longer listed`);
    if (position === 0) return undefined;
    state.aliveAt(etcdIndex);
    return new OlderMembers(this.dir, members.slice(0, position), etcdIndex);
  }

  /**
   * Our turn came at etcd index `turnAt` (the removal of the last older
   * member). A recent renewal does not show that our key outlived that index:
   * it may have been deleted alone, or with the whole directory, in the same
   * breath. One read at an index at or after `turnAt` does; a server that has
   * not caught up yet is asked again with a quorum read.
   */
  private async confirmAlive(membership: V2Membership, state: MembershipState, turnAt: number, signal: AbortSignal): Promise<void> {
    for (const quorum of [false, true]) {
      const { node, etcdIndex } = await this.port.get("read member", membership.id, quorum ? QUORUM_READ : POINT_READ, signal, this.readBound);
      if (!node || node.createdIndex !== membership.token) {
        throw new MembershipLostError(`membership ${membership.id} was deleted before its turn came`);
      }
      if (etcdIndex >= turnAt) {
        state.aliveAt(etcdIndex);
        return;
      }
    }
    throw new Error(`etcd answered a quorum read of ${membership.id} at an index before ${turnAt}`);
  }

  /** Step 5, and once after the turn came, the announcement. */
  async renew(membership: V2Membership, signal: AbortSignal): Promise<void> {
    const state = stateOf(membership);
    if (state.unannounced) return this.announce(membership, state, signal);
    await this.write(membership, state, "refresh membership", null, signal);
  }

  /**
   * Tells the members watching ours that it leads: a write of its value
   * (with prevExist, an `update` event; 0.0.1 members renew with
   * compareAndSwap, and a refresh wakes nobody). It renews the key too. Until
   * one succeeds, each renewal announces instead of refreshing.
   */
  private async announce(membership: V2Membership, state: MembershipState, signal: AbortSignal | undefined, abandonAfterMs?: number): Promise<void> {
    state.unannounced = true;
    await this.write(membership, state, "announce leadership", this.name, signal, abandonAfterMs);
    state.unannounced = false;
  }

  /** A refresh (value null: no watcher wakes) or a write of our value, of our own key only. */
  private async write(
    membership: V2Membership,
    state: MembershipState,
    operation: string,
    value: string | null,
    signal: AbortSignal | undefined,
    abandonAfterMs?: number,
  ): Promise<void> {
    const { node, etcdIndex } = await this.port.setIfExists(operation, membership.id, value, this.ttlSeconds, signal, abandonAfterMs);
    if (!node) throw new MembershipLostError(`membership ${membership.id} has expired or was deleted`);
    if (node.createdIndex !== membership.token) {
      // Ours was removed and someone wrote a key of the same name since: that
      // one is not our place in line.
      throw new MembershipLostError(`membership ${membership.id} was replaced by a key created at ${node.createdIndex}`);
    }
    state.aliveAt(etcdIndex);
    state.follower?.ownKeyRenewed();
  }

  async awaitLoss(membership: V2Membership, signal: AbortSignal): Promise<void> {
    const state = stateOf(membership);
    // Watching from after the announcement saves a wake-up on our own write.
    if (state.announcing) await untilAborted("announce leadership", state.announcing, signal);
    state.announcing = undefined;
    let from = state.knownAliveAt + 1;
    for (;;) {
      // A node written in our key's place is its removal too: a member that
      // lists the line now goes by createdIndex, and finds itself before it.
      const change = await this.history.nextChange(membership.id, membership.token, from, signal);
      if (isRemoval(change)) return;
      from = change.node.modifiedIndex + 1;
    }
  }

  async leave(membership: V2Membership, signal: AbortSignal): Promise<void> {
    // A key already gone is left as well.
    await this.port.delete("delete membership", membership.id, signal);
  }

  async observe(onLeader: LeaderListener, signal: AbortSignal): Promise<void> {
    // Observers are few, so each keeps the whole line from a recursive watch
    // of the directory: one listing, then every join and departure as it comes.
    for (;;) {
      const { members, etcdIndex } = await listMembers(this.port, this.dir, signal, this.readBound);
      if (etcdIndex === 0) throw new Error("etcd did not say which index its answer is at; cannot watch");
      const line = new Map(members.map((m) => [m.key, m]));
      onLeader(leaderOf(oldest(line)));
      let from = etcdIndex + 1;
      for (;;) {
        const event = await this.history.nextEvent(this.dir, from, true, signal);
        if (event.kind === "history-gone") break;
        const node = event.node;
        from = node.modifiedIndex + 1;
        if (V2_REMOVALS.has(event.action)) {
          // Removal events carry no value; the election directory's own removal empties the line.
          if (node.key === this.dir) line.clear();
          else line.delete(node.key);
        } else if (isMembershipNode(node, this.dir)) {
          line.set(node.key, { key: node.key, name: node.value!, createdIndex: node.createdIndex } satisfies Member);
        } else {
          continue;
        }
        onLeader(leaderOf(oldest(line)));
      }
    }
  }

  async readLeader(signal: AbortSignal): Promise<Leader | undefined> {
    const { members } = await listMembers(this.port, this.dir, signal, this.readBound);
    return leaderOf(members[0]);
  }

  /** Every member in line, oldest (the leader) first. */
  async readCandidates(signal: AbortSignal): Promise<readonly Leader[]> {
    const { members } = await listMembers(this.port, this.dir, signal, this.readBound);
    return members.map((member) => leaderOf(member)!);
  }
}

function stateOf(membership: V2Membership): MembershipState {
  const state = memberships.get(membership);
  if (!state) throw new TypeError(`etcd v2: ${membership.id} is not a membership this store joined`);
  return state;
}
