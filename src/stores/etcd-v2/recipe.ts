// ZooKeeper's in-order election recipe on etcd's v2 API, through the port (port.ts).
//
//   join      POST <dir> value=<name> ttl=<ttl>      -> <dir>/<createdIndex, zero-padded>
//   renew     PUT <key> ttl=<ttl> refresh=true prevExist=true (no value: wakes no watcher)
//   turn      GET <dir>?sorted=true; the lowest createdIndex leads. The
//             member next in line (the heir) watches the leader; every other
//             member watches the heir. When the last older member goes, the
//             member's witness or a GET <key> proves our own key still exists
//             after that (it may have gone with the whole directory, or been
//             deleted alone) before we lead.
//   announce  PUT <key> value=<name> ttl=<ttl> prevExist=true, once, by a
//             member that waited for its turn, when it leads: an `update`
//             event, which tells the members watching it that it leads.
//   loss      the leader watches its own key for a delete or an expiry.
//   leave     DELETE <key>
//
// The layout and values are those of etcd-leader 0.0.1, so members of both can
// share one election during a rolling upgrade.
//
// Waiting costs no listing: a member remembers the members older than itself
// from its one listing (no member can become older later, since createdIndex
// only grows), and when the member it watches goes it watches the next one
// from the index it was last seen at, which replays its removal if it went
// meanwhile: one request per change, no read. When etcd has forgotten the
// history a watch needs (error 401: more than 1000 events since, renewals not
// counted), a point read of the watched key says whether it is still there;
// for the member next in line, the watch then goes on from where the leader
// was last seen (a read cannot show whether that member announced meanwhile;
// an announcement comes only after the leader's removal), or, if etcd has
// forgotten that too, a read of the leader tells. A 401 names where etcd's
// history starts, so the next member last seen before it is read at once,
// without the watch.
//
// Why followers watch the heir and not the leader: a leader's removal then
// wakes only the heir, whose proof of turn is the first answer etcd sends and
// the first this process reads, not one among a hundred. The followers learn
// the new leader from its announcement a round trip later, and re-arm one
// watch each, as they would have on the removal.
//
// No long poll waits unbounded: each is asked again every watchRearmInterval
// (history.ts says why, and why that loop is the recipe's).
import type { Claim, ElectionBackend, Leader, LeaderListener, Membership } from "../../contract/backend";
import { ChildAbortController, untilAborted } from "../../util/abort";
import { MembershipLostError } from "../../contract/errors";
import { processTurns, type TurnQueue } from "../../util/turns";
import { log } from "../../util/log";
import { electionDirectory } from "./key";
import { OlderMembers, type LineMember } from "./line";
import { TurnWitness, type TurnVerdict } from "./turn-witness";
import { EventHistory, isRemoval } from "./history";
import { isMembershipNode, leaderOf, listMembers, oldest, type Member } from "./listing";
import { V2_REMOVALS, type EtcdV2Port } from "./port";

export interface V2Membership extends Membership {
  /** The membership key, `<dir>/<createdIndex>`. */
  readonly id: string;
  /** Its createdIndex: its place in line, and its fencing token. */
  readonly token: number;
  /** An etcd index at which the key was known to exist; watches start after it. */
  knownAliveAt: number;
  /** Told after each renewal that moved knownAliveAt: the wait for the turn may arm its witness then. */
  onRenewed?: (() => void) | undefined;
  /** Set while the member leads without having told the members watching it: its next renewal announces. */
  unannounced?: boolean;
  /** The announcement sent when it came to lead, settled (never rejected) once etcd answered it or it gave up. */
  announcing?: Promise<void> | undefined;
}

const POINT_READ = {} as const;
const QUORUM_READ = { quorum: true } as const;

export class EtcdV2Backend implements ElectionBackend<V2Membership> {
  readonly description: string;
  /** The election directory as etcd names it, in requests and in answers: one leading slash, none trailing. */
  private readonly dir: string;
  private readonly history: EventHistory;

  constructor(
    private readonly port: EtcdV2Port,
    key: string,
    private readonly name: string,
    private readonly ttlSeconds: number,
    watchRearmInterval: number,
    /** Where followers re-arm their watches, one per turn of the event loop. */
    private readonly turns: TurnQueue = processTurns,
  ) {
    this.dir = electionDirectory(key);
    this.description = `etcd v2 ${this.dir}`;
    this.history = new EventHistory(port, watchRearmInterval);
  }

  async join(signal: AbortSignal): Promise<Claim<V2Membership>> {
    const sentAt = performance.now();
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
    const membership = { id: node.key, token: node.createdIndex, knownAliveAt: etcdIndex };
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

  async renew(membership: V2Membership, signal: AbortSignal): Promise<void> {
    if (membership.unannounced) return this.announce(membership, signal);
    await this.write(membership, "refresh membership", null, signal);
  }

  /**
   * Tells the members watching ours that it leads: a write of its value
   * (with prevExist, an `update` event; 0.0.1 members renew with
   * compareAndSwap, and a refresh wakes nobody). It renews the key too. Until
   * one succeeds, each renewal announces instead of refreshing.
   */
  private async announce(membership: V2Membership, signal: AbortSignal | undefined, abandonAfterMs?: number): Promise<void> {
    membership.unannounced = true;
    await this.write(membership, "announce leadership", this.name, signal, abandonAfterMs);
    membership.unannounced = false;
  }

  /** A refresh (value null: no watcher wakes) or a write of our value, of our own key only. */
  private async write(
    membership: V2Membership,
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
    membership.knownAliveAt = Math.max(membership.knownAliveAt, etcdIndex);
    membership.onRenewed?.();
  }

  async awaitTurn(
    joined: Claim<V2Membership> | undefined,
    onLeader: LeaderListener,
    signal: AbortSignal,
  ): Promise<Claim<V2Membership>> {
    if (!joined) throw new TypeError("etcd v2 elections are queues: join before awaiting the turn");
    const { membership } = joined;
    const older = await this.placeInLine(membership, signal);
    if (!older) return joined;
    onLeader(leaderOf(older.oldest()));
    const { turnAt, proven } = await this.waitForOlderMembers(membership, older, onLeader, signal);
    if (!proven) await this.confirmAlive(membership, turnAt, signal);
    // Members behind ours watch it, not the leader that went: tell them at
    // once, but after `elected`, which the election emits in this turn's
    // microtasks: building node-etcd's request costs a third of a
    // millisecond, and the write goes out at the end of the turn either way.
    // The write gets a TTL, and a renewal announces again if it fails.
    membership.unannounced = true;
    membership.announcing = new Promise<void>((resolve) => process.nextTick(resolve))
      .then(() => this.announce(membership, undefined, this.ttlSeconds * 1000))
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
  private async placeInLine(membership: V2Membership, signal: AbortSignal): Promise<OlderMembers | undefined> {
    const { members, etcdIndex } = await listMembers(this.port, this.dir, signal);
    const position = members.findIndex((m) => m.key === membership.id);
    if (position < 0) throw new MembershipLostError(`membership ${membership.id} is no longer listed`);
    if (position === 0) return undefined;
    membership.knownAliveAt = Math.max(membership.knownAliveAt, etcdIndex);
    return new OlderMembers(this.dir, members.slice(0, position), etcdIndex);
  }

  /**
   * Our turn came at etcd index `turnAt` (the removal of the last older
   * member). A recent renewal does not show that our key outlived that index:
   * it may have been deleted alone, or with the whole directory, in the same
   * breath. One read at an index at or after `turnAt` does; a server that has
   * not caught up yet is asked again with a quorum read.
   */
  private async confirmAlive(membership: V2Membership, turnAt: number, signal: AbortSignal): Promise<void> {
    for (const quorum of [false, true]) {
      const { node, etcdIndex } = await this.port.get("read member", membership.id, quorum ? QUORUM_READ : POINT_READ, signal);
      if (!node || node.createdIndex !== membership.token) {
        throw new MembershipLostError(`membership ${membership.id} was deleted before its turn came`);
      }
      if (etcdIndex >= turnAt) {
        membership.knownAliveAt = Math.max(membership.knownAliveAt, etcdIndex);
        return;
      }
    }
    throw new Error(`etcd answered a quorum read of ${membership.id} at an index before ${turnAt}`);
  }

  /**
   * Waits until no older member is left, then resolves with the etcd index
   * at which the last one was seen gone, and whether our key is known to
   * have outlived it.
   *
   * One member is watched at a time, from the index it was last seen at, so
   * a change since then is replayed at once:
   * - while another member stands between ours and the leader, the heir (the
   *   member next in line after the leader). Its removal moves the watch to
   *   the member behind it; its announcement (it leads, so the leader before
   *   it is gone) names it the leader.
   * - once ours is the heir, the leader: its removal is our turn.
   * A change of leader costs a follower one request, and the leader's
   * removal wakes only the heir. A member that leaves from further back is
   * passed over when the watch comes to it: its removal is replayed at once.
   * One long poll per follower (a socket and some 11 KiB here, and a watcher
   * at etcd), not two as in ZooKeeper's recipe.
   *
   * 0.0.1 members do not announce; they renew by writing their value (a
   * compareAndSwap event). A follower that sees its heir do so watches the
   * leader instead, from where it was last seen, and when the leader goes
   * names the heir at once, from memory. Only before that heir's first
   * renewal (within half its TTL of the listing) does a follower learn of its
   * leadership late: at that renewal. A key written by hand without a TTL
   * (no member writes one) never writes again: the listing shows it, and it
   * is a silent heir from the start.
   *
   * The heir also holds a witness (turn-witness.ts) that proves the
   * turn without a read: from its listing if that shows it next, else from
   * its first renewal after it became next (a renewal says at which index
   * our key was there, so the witness has nothing to replay).
   */
  private async waitForOlderMembers(
    membership: V2Membership,
    older: OlderMembers,
    onLeader: LeaderListener,
    signal: AbortSignal,
  ): Promise<{ turnAt: number; proven: boolean }> {
    const watches = new WatchSet(this.history, signal);
    const armWitness = () => {
      if (older.size !== 1 || watches.hasWitness()) return;
      const predecessorKey = older.oldest()!.key;
      watches.witness(new TurnWitness(this.history, this.dir, membership.id, membership.token, predecessorKey, membership.knownAliveAt, watches.signal));
    };
    /** The etcd index the leader was last seen at: the listing's, or its announcement's. */
    let leaderSeenAt = older.listedAt;
    /** A heir seen renewing by writing (a 0.0.1 member), which will not announce: where, and under which name. */
    let silentHeir: { createdIndex: number; seenAt: number; name: string } | undefined;
    /** The name of a heir that will not announce (a 0.0.1 member, or a key written by hand), else undefined. */
    const silentName = (heir: LineMember) =>
      heir.createdIndex === silentHeir?.createdIndex ? silentHeir.name : older.permanentName(heir.createdIndex);
    const watchNext = () => {
      const heir = older.heir();
      if (heir && silentName(heir) === undefined) watches.follow(heir, heir.seenAt, true);
      else watches.follow(older.oldest()!, leaderSeenAt);
    };
    membership.onRenewed = armWitness;
    try {
      // The listing named the leader; the first watch can wait its turn too
      // (from where the listing saw the member, it replays what came since).
      if (older.size > 1) {
        await this.turns.next();
        signal.throwIfAborted();
      }
      watchNext();
      armWitness();
      let turnAt = older.listedAt;
      /** Set once no older member is left and the witness has yet to vouch for our key at that point. */
      let awaitingWitness = false;
      for (;;) {
        const result = await watches.next(older.size === 1 && !watches.hasWitness());
        if ("verdict" in result) {
          const { verdict } = result;
          if (verdict.kind === "lost") throw new MembershipLostError(`membership ${membership.id} was deleted before its turn came`);
          if (verdict.kind === "turn") return { turnAt: Math.max(turnAt, verdict.at), proven: true };
          if (awaitingWitness) return { turnAt, proven: false };
          continue;
        }
        const { member, outcome, at, value } = result;
        turnAt = Math.max(turnAt, at);
        const leader = older.oldest()!;
        if (member.createdIndex === leader.createdIndex) {
          // The leader: ours is the heir, or the heir is silent.
          if (outcome !== "removed") {
            // A write (0.0.1 members renew so, ours announce): the name may be new.
            onLeader({ name: value ?? leader.name, token: leader.createdIndex });
            leaderSeenAt = at;
            watches.follow(member, leaderSeenAt);
            continue;
          }
          if (older.removeLast(member.createdIndex)) {
            // A renewal at or after the removal proves as much as the witness would.
            if (membership.knownAliveAt >= turnAt) return { turnAt, proven: true };
            if (!watches.hasWitness()) return { turnAt, proven: false };
            // The witness watches from before that removal: it will report it, or ours first.
            awaitingWitness = true;
            continue;
          }
          // With a heir behind it, the leader is watched only when that heir is silent: it
          // leads now, named at once, by the name it last wrote.
          const heir = older.heir()!;
          const name = silentName(heir);
          if (name === undefined) throw new Error(`${membership.id}: watched the leader, but the member behind it announces`);
          leaderSeenAt = heir.createdIndex === silentHeir?.createdIndex ? silentHeir.seenAt : older.listedAt;
          older.heirLeads(heir.createdIndex, name);
          onLeader({ name, token: heir.createdIndex });
        } else if (outcome === "removed") {
          older.removeHeir(member.createdIndex);
        } else if (outcome === "reread") {
          // The heir is there, but its announcement may have gone unseen. An
          // announcement comes only after the leader's removal: a leader seen
          // at index L means none came by L, and a watch from L replays one
          // that came after. L is where the leader was last seen, if etcd
          // still has the history from there (after a change it has: L is
          // the announcement's); else a read of the leader tells.
          let leaderAliveAt = leaderSeenAt;
          if (this.history.forgot(leaderAliveAt)) {
            const { node, etcdIndex } = await this.history.read(leader.key, signal);
            leaderAliveAt = node && node.createdIndex === leader.createdIndex ? etcdIndex : -1;
          }
          if (leaderAliveAt >= 0) {
            watches.follow(member, Math.min(at, leaderAliveAt), true);
            continue;
          }
          // The leader is gone: the heir leads, named by its key's value.
          older.heirLeads(member.createdIndex, value!);
          leaderSeenAt = at;
          onLeader({ name: value!, token: member.createdIndex });
        } else if (outcome === "announced") {
          // It leads: the leader before it is gone.
          older.heirLeads(member.createdIndex, value!);
          leaderSeenAt = at;
          onLeader({ name: value!, token: member.createdIndex });
        } else {
          // A 0.0.1 heir renewing: watch the leader instead, from where it was last seen.
          silentHeir = { createdIndex: member.createdIndex, seenAt: at, name: value ?? "" };
        }
        // Every follower in a process gets here from the same answer; the
        // next watch can wait its turn (src/util/turns.ts). Not the heir's, on the
        // leader: the next change of leader is for it to see first, and
        // behind a thousand followers' watches (each a read too, where etcd
        // has forgotten the index to start from) its turn came seconds later.
        if (older.size > 1) {
          await this.turns.next();
          signal.throwIfAborted();
        }
        watchNext();
      }
    } finally {
      membership.onRenewed = undefined;
      watches.close();
    }
  }

  async awaitLoss(membership: V2Membership, signal: AbortSignal): Promise<void> {
    // Watching from after the announcement saves a wake-up on our own write.
    if (membership.announcing) await untilAborted("announce leadership", membership.announcing, signal);
    membership.announcing = undefined;
    let from = membership.knownAliveAt + 1;
    for (;;) {
      const change = await this.history.nextChange(membership.id, from, signal);
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
      const { members, etcdIndex } = await listMembers(this.port, this.dir, signal);
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
    const { members } = await listMembers(this.port, this.dir, signal);
    return leaderOf(members[0]);
  }
}

/**
 * What became of a watched member: gone, announced that it leads (a write
 * with prevExist: an `update`), written otherwise (possibly renamed), or
 * found still there by a read where etcd had forgotten its history (a read
 * cannot tell whether it announced meanwhile).
 */
type WatchOutcome = "removed" | "announced" | "changed" | "reread";

/** A watch's outcome, the etcd index it happened at, and the value written (always, when announced). */
interface WatchResult {
  member: LineMember;
  outcome: WatchOutcome;
  at: number;
  value?: string | undefined;
}

/** The watches one waiting member holds (one member's, and a witness), all cancelled together. */
class WatchSet {
  private readonly controller: ChildAbortController;
  readonly signal: AbortSignal;
  /** The watch on one member, until its outcome comes out of next(). */
  private watched: Promise<WatchResult> | undefined;
  /** The witness's verdict, until it comes out of next(). */
  private witnessed: Promise<{ verdict: TurnVerdict }> | undefined;
  /**
   * Ends a race in next() that started before the witness was added (a
   * renewal arms it while the wait runs), so that the race takes it too.
   */
  private addedDuringRace: (() => void) | undefined;

  constructor(private readonly history: EventHistory, parent: AbortSignal) {
    this.controller = new ChildAbortController(parent);
    this.signal = this.controller.signal;
  }

  /**
   * Watches `member`, which was seen alive at etcd index `knownAliveAt`,
   * unless a member is watched already. `reportGap`: see WatchOutcome.
   */
  follow(member: LineMember, knownAliveAt: number, reportGap = false): void {
    if (this.watched) return;
    // Called only between races (from the wait's loop): no race to wake.
    const watching = reportGap
      ? this.history.nextChange(member.key, knownAliveAt + 1, this.signal, true)
      : this.history.nextChange(member.key, knownAliveAt + 1, this.signal);
    const watched = watching.then((change): WatchResult => {
      if (isRemoval(change)) return { member, outcome: "removed", at: change.removedAt };
      if ("rereadAt" in change) return { member, outcome: "reread", at: change.rereadAt, value: change.value };
      const { value, modifiedIndex: at } = change.node;
      return { member, outcome: change.action === "update" && value !== undefined ? "announced" : "changed", at, value };
    });
    // Rejections surface through next(); keep an unobserved one from being reported as unhandled.
    watched.catch(() => undefined);
    this.watched = watched;
  }

  /** Adds the witness; its verdict comes out of next() once. */
  witness(witness: TurnWitness): void {
    const witnessed = witness.verdict.then((verdict) => ({ verdict }));
    // As for the watch: a rejection surfaces through next(), never as unhandled.
    witnessed.catch(() => undefined);
    this.witnessed = witnessed;
    this.addedDuringRace?.();
  }

  /** Whether a witness is still watching (one that gave up is not). */
  hasWitness(): boolean {
    return this.witnessed !== undefined;
  }

  /**
   * The next change of the watched member, or the witness's verdict; it is
   * no longer watched then. `witnessMayCome`: a renewal may add the witness
   * while this waits. (A promise chain, not an async function: a waiting
   * member holds it for as long as it waits, and an async frame is bigger.)
   */
  next(witnessMayCome: boolean): Promise<WatchResult | { verdict: TurnVerdict }> {
    const { watched, witnessed } = this;
    if (watched && !witnessed && !witnessMayCome) return watched.then((result) => this.took(result));
    const sources: Array<Promise<WatchResult | { verdict: TurnVerdict } | "added">> = [];
    if (watched) sources.push(watched);
    if (witnessed) sources.push(witnessed);
    else sources.push(new Promise<"added">((resolve) => (this.addedDuringRace = () => resolve("added"))));
    return Promise.race(sources).then((result) => {
      this.addedDuringRace = undefined;
      return result === "added" ? this.next(false) : this.took(result);
    });
  }

  close(): void {
    this.controller.release(new Error("watches closed"));
  }

  private took<T extends WatchResult | { verdict: TurnVerdict }>(result: T): T {
    if ("verdict" in result) this.witnessed = undefined;
    else this.watched = undefined;
    return result;
  }
}
