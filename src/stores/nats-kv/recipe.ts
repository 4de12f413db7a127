// An election on one key of a NATS JetStream KV bucket (nats-server 2.9 and
// later), the race-style protocol of nats-kv-leader-elect, so that its Go
// members and ours share one election:
//
//   campaign  create(key, name): succeeds only if the key is absent, deleted
//             or purged. The winner's token is the create's revision (a
//             stream sequence: it only grows, while the bucket lives).
//             On a replicated bucket: only a create of an absent key, and a
//             marker is waited out until it ages out (below).
//   renew     update(key, name, our last revision), every refreshInterval
//             (holder.ts). A failed revision check is a loss.
//   follow    watch the key (follower.ts): a value names the leader; a delete
//             or purge marker starts the next campaign at once, and the write
//             that wins it names the new leader as it arrives on the watch,
//             even while the answer to our own create is still on its way.
//   expiry    silent on 2.9 (no marker, no watch event), so a follower counts
//             from when it saw the holder's last write arrive, and campaigns
//             once that write must have aged out (follower.ts).
//   leave     delete(key) conditioned on our last revision.
//
// The store is the port (port.ts), which nats/adapter.ts implements on the
// user's bucket handle; time, turns and chance come from the clock, turn
// queue and random source the backend is given.
//
// The TTL is the bucket's max_age, the same for every key: the member reads
// it from the bucket's status and reports it with every claim, and the entry
// (nats.ts) refuses timings it cannot keep.
//
// Why a new leader needs no "announce only after a delay" (the Go
// implementation waits a campaign interval before telling its leader): a
// leader here believes it leads only until S + TTL - stepDownMargin, S being
// when its last confirmed write was *sent* (src/leadership/term.ts). The server stamped that
// write after S and keeps it at least TTL from the stamp, so while the old
// leader believes, its entry exists and no create can succeed. By the time a
// create can succeed, the old leader stopped believing stepDownMargin ago.
// A key deleted or purged from outside is the exception: our old leader
// learns of it from its watch as fast as the winner does, but a Go leader,
// which has no watch, only at its next tick. Where Go members may take part
// (the goMembers option), the winner holds the key until they must have
// stood down (go-members.ts).
//
// Why a replicated bucket is campaigned for with creates alone: on
// nats-server 2.9 the stream's leader checks a write's expected revision
// before it proposes the write, against what it has applied, and the
// replicas apply it unchecked; so of updates conditioned on one marker sent
// together, several can win (32 of 100 races of three). A create checks
// "no entry at all", and every replica makes that check as it applies the
// write, in the log's order: one create of an absent key wins. A marker is
// not made absent by a purge: a server that restarts replays a purge of one
// key as a purge of the whole stream (nats-server issue 4196), and its
// replica loses the leader's entry. So followers wait for a marker to age
// out (max_age applies to markers too), and a clean stop hands over in a
// TTL, not at once. A win is confirmed before it is led on (createAndConfirm).
// The leave stays a revision-checked delete: a late one can remove a
// successor's fresh entry, which makes it step down (a needless change of
// leader, never two leaders); see docs/nats.md.
import { deadline, untilAborted } from "../../util/abort";
import { systemClock, type Clock } from "../../util/clock";
import type { Claim, ElectionBackend, Leader, LeaderListener } from "../../contract/backend";
import { log } from "../../util/log";
import { processTurns, type TurnQueue } from "../../util/turns";
import { Follower, jitter, type Candidate } from "./follower";
import { GoMemberWait, type GoMemberTiming } from "./go-members";
import { KeyHolder, type NatsMembership } from "./holder";
import { holderOf, isValue, readKey, type Holder, type KeyState } from "./key-state";
import type { KvStatus, NatsKvPort } from "./port";
import { KeyWatch } from "./watch";

export type { NatsMembership };

/** A member's timing, as natsLeader resolved it against the bucket. */
export interface NatsTiming extends GoMemberTiming {
  readonly stepDownMargin: number;
  /** What is wrong with a bucket TTL of `ttlMs` for this timing, as a RangeError naming it; undefined if nothing. */
  ttlProblem(ttlMs: number): RangeError | undefined;
}

export class NatsKvBackend implements ElectionBackend<NatsMembership>, Candidate {
  private readonly holder: KeyHolder;
  private ttl: number | undefined;
  /** The bucket's name, once its status was read. */
  private bucketName = "";
  /** How many servers hold the bucket's stream, as its status said when last read. */
  private replicas = 1;
  /** The member's timing, from natsLeader: a win is led on only with the bucket's TTL of the moment, if it fits. */
  private timing: NatsTiming | undefined;
  /** Set where Go members may take part (useTiming): a win is led on only once they must have stood down. */
  goMembers: GoMemberWait | undefined;

  /** On a replicated bucket (its status said so): followers wait markers out (follower.ts). */
  get waitsOutMarkers(): boolean {
    return this.replicas > 1;
  }

  constructor(
    private readonly kv: NatsKvPort,
    private readonly key: string,
    readonly name: string,
    /** Where followers that saw the leader leave take their turn to campaign. */
    readonly turns: TurnQueue = processTurns,
    /** What the member's waits, deadlines and `sentAt` are read on: the election's clock. */
    readonly clock: Clock = systemClock,
    /** A number in [0, 1), for the followers' jitter and the retries' back-off. */
    readonly random: () => number = Math.random,
  ) {
    this.holder = new KeyHolder(kv, key, name, clock);
  }

  /** "NATS KV <bucket>/<key>", for logs and diagnostics. */
  get description(): string {
    return `NATS KV ${this.bucketName ? `${this.bucketName}/` : ""}${this.key}`;
  }

  /**
   * The member's timing (natsLeader sets it): from now on a win is checked
   * against the bucket's TTL as it is then, and, where Go members may take
   * part, held until a Go leader that lost the key must have noticed.
   */
  useTiming(timing: NatsTiming, options: { goMembers: boolean }): void {
    this.timing = timing;
    this.goMembers = options.goMembers ? new GoMemberWait(this.holder, timing, this.clock, this.random) : undefined;
  }

  /**
   * The bucket's TTL in ms (its max_age), read once and again after the
   * bucket went missing (it may come back with another TTL). 0: no expiry.
   */
  async bucketTtl(signal: AbortSignal): Promise<number> {
    return (await this.bucketStatus(signal)).ttlMs;
  }

  /** The bucket's name, TTL and replicas, read as bucketTtl() reads them. */
  async bucketStatus(signal: AbortSignal): Promise<{ name: string; ttlMs: number; replicas: number }> {
    if (this.ttl === undefined) {
      const status = await untilAborted("read bucket status", this.kv.status(), signal);
      this.bucketName = status.bucket;
      this.ttl = status.ttl;
      this.replicas = status.replicas;
    }
    return { name: this.bucketName, ttlMs: this.ttl, replicas: this.replicas };
  }

  /** The revision of our latest confirmed write to the key `membership` won. */
  lastRevision(membership: NatsMembership): number {
    return this.holder.lastRevision(membership);
  }

  async awaitTurn(held: Claim<NatsMembership> | undefined, onLeader: LeaderListener, signal: AbortSignal): Promise<Claim<NatsMembership>> {
    // The state machine passes back what we won when it starts a phase over
    // (after a store outage): still ours, it is our turn again; else lost.
    if (held) {
      await this.holder.confirm(held.membership, signal);
      return held;
    }
    try {
      let ttlMs = await this.bucketTtl(signal);
      if (this.timing?.ttlProblem(ttlMs)) {
        // A win found the bucket made again with a TTL that does not fit: look
        // again (it may have been fixed), and win nothing until it fits.
        this.ttl = undefined;
        ttlMs = await this.bucketTtl(signal);
        const problem = this.timing.ttlProblem(ttlMs);
        if (problem) throw problem;
      }
      // Opened before the first create, so no write after it goes unseen.
      const watch = await KeyWatch.open(this.kv, this.key, this.clock, signal, this.watchAttemptMs(ttlMs));
      try {
        return await new Follower(this, watch, ttlMs, onLeader, signal).follow();
      } finally {
        watch.close();
      }
    } catch (err) {
      if (this.kv.isBucketMissing(err)) this.ttl = undefined;
      throw err;
    }
  }

  /**
   * The campaign: one create; the claim if it won, else the key's current
   * revision. Over a delete or purge marker seen at revision `marker`, the
   * create is the write conditioned on that revision, which is what the
   * client's create sends after a failed first try and a read: one round
   * trip instead of three. On a replicated bucket, where such writes are not
   * serialized, it is a create of the absent key alone, confirmed, which a
   * marker makes fail (the follower waits markers out there).
   */
  async tryCreate(ttlMs: number, marker: number | undefined, signal: AbortSignal): Promise<Claim<NatsMembership> | number> {
    // The entry lives TTL from when the server stamps it, which is after this.
    const sentAt = this.clock.now();
    const create = this.replicas > 1 ? this.createAndConfirm() : marker ? this.kv.update(this.key, this.name, marker) : this.kv.create(this.key, this.name);
    // Read beside the create, so that it costs no round trip of its own: the
    // bucket may have been deleted and made again with another TTL since we
    // read it (a watch of the old one goes silent, and followers go on
    // counting with the old TTL), and a term counted on a TTL longer than
    // the one NATS applies would outlast the key.
    const status = this.timing ? this.kv.status() : undefined;
    status?.catch(() => undefined);
    // A create that wins after we stopped waiting would hold the key for a
    // whole TTL with nobody renewing it: give it back.
    create.then(
      (revision) => {
        if (signal.aborted) this.leaveInBackground(this.holder.membership(revision));
      },
      () => undefined,
    );
    let revision: number;
    try {
      revision = await untilAborted("create election key", create, signal);
    } catch (err) {
      const current = this.kv.wrongLastSequence(err);
      if (current !== undefined) return current;
      throw err;
    }
    const membership = this.holder.membership(revision);
    return { membership, token: revision, sentAt, ttlMs: status ? await this.ttlToLeadOn(status, membership, signal) : ttlMs };
  }

  /**
   * On a replicated bucket: a create of the absent key, confirmed by a second
   * one, which must fail and name our first as the key's last revision.
   * Answers the revision of the entry that is ours.
   *
   * Why the confirmation. A leader's renewal is checked against what the
   * stream's leader has applied before it is proposed, and applied without a
   * check. One checked just before the leader's entry aged out there can be
   * proposed after our create and applied after it, writing over it: both
   * would believe they lead. The second create is proposed once our first
   * is applied (its answer comes then), so after any such renewal; every
   * replica checks it as it applies it, and it fails naming whatever is the
   * key's last write then: ours, or the renewal that overtook ours.
   */
  private async createAndConfirm(): Promise<number> {
    const created = await this.kv.createIfAbsent(this.key, this.name);
    try {
      // Absent again (its stream purged from outside meanwhile): this one is ours.
      return await this.kv.createIfAbsent(this.key, this.name);
    } catch (err) {
      if (this.kv.wrongLastSequence(err) === created) return created;
      throw err;
    }
  }

  /**
   * The bucket's TTL as `status` read it beside a winning create; the key is
   * given back, and the win not led on, if it cannot be read or the timing
   * does not fit it.
   */
  private async ttlToLeadOn(status: Promise<KvStatus>, won: NatsMembership, signal: AbortSignal): Promise<number> {
    try {
      const { ttl, replicas } = await untilAborted("read bucket status", status, signal);
      if (ttl !== this.ttl) log.nats("%s: the bucket's TTL is now %d ms, not %d ms (made again?)", this.description, ttl, this.ttl);
      this.ttl = ttl;
      this.replicas = replicas;
      const problem = this.timing?.ttlProblem(ttl);
      if (problem) throw problem;
      return ttl;
    } catch (err) {
      this.leaveInBackground(won);
      throw err;
    }
  }

  renew(membership: NatsMembership, signal: AbortSignal): Promise<void> {
    return this.holder.renew(membership, signal);
  }

  awaitLoss(membership: NatsMembership, signal: AbortSignal): Promise<void> {
    return this.holder.awaitLoss(membership, signal, this.watchAttemptMs(this.ttl));
  }

  /**
   * How long a try at opening a watch of the key waits for its answer
   * before it asks again (KeyWatch.open): on a replicated bucket, the
   * member's request timeout, or its default for the bucket's TTL (5 s where
   * that is not known); on one server, undefined (one try).
   */
  private watchAttemptMs(ttlMs: number | undefined): number | undefined {
    if (this.replicas <= 1) return undefined;
    return this.timing?.requestTimeout ?? Math.min((ttlMs ?? Infinity) / 2, 5_000);
  }

  leave(membership: NatsMembership, signal: AbortSignal): Promise<void> {
    return this.holder.leave(membership, signal);
  }

  async observe(onLeader: LeaderListener, signal: AbortSignal): Promise<void> {
    const ttlMs = await this.bucketTtl(signal);
    const watch = await KeyWatch.open(this.kv, this.key, this.clock, signal, this.watchAttemptMs(ttlMs));
    try {
      let holder = toHolder(await this.read(signal), undefined, ttlMs);
      onLeader(leaderOf(holder));
      for (;;) {
        const entry = await watch.next(holder ? holder.goneBy + jitter(ttlMs, this.random) : Infinity, signal);
        // Due: its entry has aged out, unless we missed a write. Look.
        const state = entry ?? (await this.read(signal));
        if (holder && state.revision !== 0 && state.revision <= holder.revision) {
          // Nothing newer: the server has yet to age it out; look again soon.
          if (!entry) holder.goneBy = this.clock.now() + Math.min(ttlMs / 4, 100);
          continue;
        }
        const next = toHolder(state, holder, ttlMs);
        if (leaderOf(next)?.token !== leaderOf(holder)?.token || next?.name !== holder?.name) onLeader(leaderOf(next));
        holder = next;
      }
    } finally {
      watch.close();
    }
  }

  async readLeader(signal: AbortSignal): Promise<Leader | undefined> {
    const state = await this.read(signal);
    return state.name === undefined ? undefined : { name: state.name, token: state.revision };
  }

  read(signal: AbortSignal): Promise<KeyState> {
    return readKey(this.kv, this.key, this.clock, signal);
  }

  private leaveInBackground(membership: NatsMembership): void {
    const bound = deadline(5_000, this.clock);
    this.holder.leave(membership, bound.signal).then(
      () => {
        bound.clear();
        log.nats("gave back %s (revision %d) won after the campaign stopped", this.key, this.holder.lastRevision(membership));
      },
      (err: unknown) => {
        bound.clear();
        log.nats("could not give back %s: %s", this.key, (err as Error).message);
      },
    );
  }
}

/** The holder `state` shows: the same term as `previous` if the name is the same, else a new one. */
function toHolder(state: KeyState, previous: Holder | undefined, ttlMs: number): Holder | undefined {
  if (!isValue(state)) return undefined;
  if (previous?.name !== state.name) return holderOf(state, ttlMs);
  return { name: state.name, token: previous.token, revision: state.revision, goneBy: state.seenAt + ttlMs };
}

function leaderOf(holder: Holder | undefined): Leader | undefined {
  return holder && { name: holder.name, token: holder.token };
}
