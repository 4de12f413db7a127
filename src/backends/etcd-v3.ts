// etcd's own election recipe (client/v3/concurrency/election.go) on the v3 API,
// through the etcd3 client, so that our members, `etcdctl elect` and Go
// programs using concurrency.Election share one election.
//
//   join      LeaseGrant(ttl), then Txn If CreateRevision(<key>/<lease id in hex>) = 0
//                                       Then Put(that key, name, lease) Else Get(that key)
//   renew     one LeaseKeepAlive round trip; a TTL of 0 means the lease is gone
//   turn      Get(<key>/, newest create revision first, max create revision = ours, limit 2):
//             our own key and the member just before it. None before it: we lead.
//             Otherwise watch that member, the leader and our own key from the
//             read's revision on, and read again when the member before us goes.
//   loss      the leader watches its own key for its deletion
//   leave     LeaseRevoke, which deletes the key
//   observe   Get(<key>/, oldest create revision first, limit 1), then watch <key>/
//
// The election key is used verbatim, as `etcdctl elect <key>` uses it: members
// are `<key>/<lease id>`. etcd v3 has no directories, so "svc/leader" and
// "/svc/leader" are two different elections here (unlike on the v2 API), each
// shared with etcdctl called with the same string.
//
// Order is the create revision, which every member reads alike. The fencing
// token is the member key's create revision: a later member's is larger.
//
// Waiting costs no listing: each follower watches the member just before it
// (etcd's recipe) and the leader, so it learns a new leader from one read of
// the oldest key when the leader goes. It also watches its own key, which
// etcd's Campaign does not (etcd issue 19597): a key deleted by an operator, or
// by its lease expiring, ends the wait at once instead of never.
import type { IKeyValue } from "etcd3";
import { untilAborted } from "../abort";
import type { ElectionBackend, LeaderListener, Membership } from "../backend";
import { MembershipLostError } from "../errors";
import { log } from "../log";
import {
  isCancelledByEtcd,
  isLeaseNotFound,
  keepAliveOnce,
  Watches,
  type Etcd3Client,
} from "./etcd3-client";

export interface V3Membership extends Membership {
  /** The member key, `<key>/<lease id in lowercase hex>`. */
  readonly id: string;
  /** The member key's create revision. */
  readonly token: number;
  /** The lease the key is attached to, as etcd3 gives it: an int64 in decimal. */
  readonly leaseId: string;
  /** A revision at which the key was known to exist; watches of it start after it. */
  knownAliveAt: number;
}

interface Member {
  key: string;
  name: string;
  createRevision: number;
}

export class EtcdV3Backend implements ElectionBackend<V3Membership> {
  readonly description: string;
  /** `<key>/`, which every member key starts with. */
  private readonly prefix: string;

  constructor(
    private readonly client: Etcd3Client,
    key: string,
    private readonly name: string,
    private readonly ttlSeconds: number,
  ) {
    this.prefix = `${key}/`;
    this.description = `etcd v3 ${key}`;
  }

  async join(signal: AbortSignal): Promise<V3Membership> {
    const campaign = this.campaign();
    // A membership created after we stopped waiting would hold a place in
    // line until its TTL ran out: give it up as soon as it exists.
    campaign.then(
      (membership) => {
        if (signal.aborted) this.revokeInBackground(membership.leaseId);
      },
      () => undefined,
    );
    return untilAborted("join", campaign, signal);
  }

  private async campaign(): Promise<V3Membership> {
    // No automatic keep-alive: the state machine renews, on its own schedule.
    const lease = await this.client.leaseClient.leaseGrant({ TTL: this.ttlSeconds });
    if (Number(lease.TTL) !== this.ttlSeconds) {
      log.v3("asked for a %d s lease, etcd granted %s s", this.ttlSeconds, lease.TTL);
    }
    const key = this.prefix + leaseHex(lease.ID);
    try {
      const txn = await this.client
        .if(key, "Create", "==", 0)
        .then(this.client.put(key).value(this.name).lease(lease.ID))
        .else(this.client.get(key))
        .commit();
      const revision = Number(txn.header.revision);
      // A fresh lease has no key yet, so the put succeeds; etcd's recipe
      // still reads the key back otherwise, and so do we.
      const existing = txn.succeeded ? undefined : txn.responses[0]?.response_range?.kvs[0];
      const token = existing ? Number(existing.create_revision) : revision;
      return { id: key, token, leaseId: lease.ID, knownAliveAt: revision };
    } catch (err) {
      this.revokeInBackground(lease.ID);
      throw err;
    }
  }

  async renew(membership: V3Membership, signal: AbortSignal): Promise<void> {
    let ttl: number;
    try {
      ttl = Number((await keepAliveOnce(this.client, membership.leaseId, signal)).TTL);
    } catch (err) {
      if (isLeaseNotFound(err)) throw lostLease(membership, err);
      throw err;
    }
    if (!(ttl > 0)) throw lostLease(membership);
  }

  async awaitTurn(membership: V3Membership, onLeader: LeaderListener, signal: AbortSignal): Promise<void> {
    for (;;) {
      const { ours, predecessor, revision } = await this.placeInLine(membership, signal);
      if (!ours) throw new MembershipLostError(`membership ${membership.id} is no longer in line`);
      membership.knownAliveAt = Math.max(membership.knownAliveAt, revision);
      if (!predecessor) return;
      const { leader } = await this.leaderAt(signal, revision);
      await this.waitForPredecessor(membership, predecessor, leader ?? predecessor, revision, onLeader, signal);
    }
  }

  /**
   * Our own key and the member just before it, both as of one revision.
   * etcd's recipe reads only the member before (max create revision ours - 1);
   * reading ours too shows that our key still exists at that revision.
   */
  private async placeInLine(
    membership: V3Membership,
    signal: AbortSignal,
  ): Promise<{ ours: Member | undefined; predecessor: Member | undefined; revision: number }> {
    const request = this.client
      .getAll()
      .prefix(this.prefix)
      .sort("Create", "Descend")
      .maxCreateRevision(membership.token)
      .limit(2);
    const response = await untilAborted("read place in line", request.exec(), signal);
    const [newest, older] = response.kvs.map(toMember);
    const ours = newest?.key === membership.id ? newest : undefined;
    return { ours, predecessor: ours ? older : undefined, revision: Number(response.header.revision) };
  }

  /**
   * Returns once the member just before ours is gone, or our place in line may
   * otherwise have changed; throws MembershipLostError if our key goes. Reports
   * the leader meanwhile. Watches at most three keys, each from `revision` on.
   */
  private async waitForPredecessor(
    membership: V3Membership,
    predecessor: Member,
    leader: Member,
    revision: number,
    onLeader: LeaderListener,
    signal: AbortSignal,
  ): Promise<void> {
    onLeader(leader.name);
    const watches = new Watches<"ours" | "predecessor" | "leader">(this.client, signal);
    try {
      watches.add("ours", { key: membership.id, deletesOnly: true }, revision + 1);
      watches.add("predecessor", { key: predecessor.key }, revision + 1);
      if (leader.key !== predecessor.key) watches.add("leader", { key: leader.key }, revision + 1);
      for (;;) {
        const { watch, type, kv } = await watches.next();
        if (watch === "ours") {
          throw new MembershipLostError(`membership ${membership.id} was deleted while waiting`);
        }
        if (type === "put") {
          // etcd's Proclaim: the leader changed its value in place.
          if (kv.key.toString() === leader.key) onLeader((leader = toMember(kv)).name);
          continue;
        }
        if (watch === "predecessor") return;
        // The leader left while the member before ours stays: the oldest key
        // as of that deletion leads now, and later events follow from the watches.
        const deletedAt = Number(kv.mod_revision);
        const next = (await this.leaderAt(signal, deletedAt)).leader;
        if (!next || next.createRevision >= membership.token) return;
        onLeader((leader = next).name);
        if (leader.key === predecessor.key) watches.remove("leader");
        else watches.add("leader", { key: leader.key }, deletedAt + 1);
      }
    } finally {
      watches.close();
    }
  }

  async awaitLoss(membership: V3Membership, signal: AbortSignal): Promise<void> {
    // Watching from just after the revision the key was last seen at also
    // delivers a deletion that happened before the watch was set up.
    let from = membership.knownAliveAt + 1;
    for (let justRead = false; ; justRead = true) {
      const watches = new Watches<"ours">(this.client, signal);
      try {
        watches.add("ours", { key: membership.id, deletesOnly: true }, from);
        await watches.next();
        return;
      } catch (err) {
        // A watch from a revision just read cannot have lost its history to
        // a compaction: etcd cancelled it for some other reason.
        if (justRead || !isCancelledByEtcd(err)) throw err;
      } finally {
        watches.close();
      }
      // etcd no longer has the history since then: look at the key itself.
      const response = await untilAborted("read membership", this.client.get(membership.id).exec(), signal);
      const kv = response.kvs[0];
      if (!kv || Number(kv.create_revision) !== membership.token) return;
      membership.knownAliveAt = Number(response.header.revision);
      from = membership.knownAliveAt + 1;
    }
  }

  async leave(membership: V3Membership, signal: AbortSignal): Promise<void> {
    try {
      await untilAborted("revoke lease", this.client.leaseClient.leaseRevoke({ ID: membership.leaseId }), signal);
    } catch (err) {
      if (!isLeaseNotFound(err)) throw err;
    }
  }

  async observe(onLeader: LeaderListener, signal: AbortSignal): Promise<void> {
    let { leader, revision } = await this.leaderAt(signal);
    onLeader(leader?.name);
    const watches = new Watches<"line">(this.client, signal);
    try {
      watches.add("line", { prefix: this.prefix }, revision + 1);
      for (;;) {
        const { type, kv } = await watches.next();
        const key = kv.key.toString();
        if (type === "put") {
          // The first key into an empty line leads; a put on the leader's key renames it.
          if (!leader || key === leader.key) onLeader((leader = toMember(kv)).name);
        } else if (key === leader?.key) {
          ({ leader } = await this.leaderAt(signal, Number(kv.mod_revision)));
          onLeader(leader?.name);
        }
      }
    } finally {
      watches.close();
    }
  }

  /** The member with the oldest create revision (at `revision`, or now), and the revision read at. */
  private async leaderAt(signal: AbortSignal, revision?: number): Promise<{ leader: Member | undefined; revision: number }> {
    let request = this.client.getAll().prefix(this.prefix).sort("Create", "Ascend").limit(1);
    if (revision !== undefined) request = request.revision(revision);
    const response = await untilAborted("read leader", request.exec(), signal);
    const first = response.kvs[0];
    return { leader: first && toMember(first), revision: revision ?? Number(response.header.revision) };
  }

  private revokeInBackground(leaseId: string): void {
    this.client.leaseClient.leaseRevoke({ ID: leaseId }).then(
      () => log.v3("revoked abandoned lease %s", leaseHex(leaseId)),
      (err: unknown) => log.v3("could not revoke abandoned lease %s: %s", leaseHex(leaseId), (err as Error).message),
    );
  }
}

/** etcd's key suffix for a lease: the int64 ID in lowercase hex, unpadded (Go's %x). */
function leaseHex(leaseId: string): string {
  return BigInt(leaseId).toString(16);
}

function toMember(kv: IKeyValue): Member {
  return { key: kv.key.toString(), name: kv.value.toString(), createRevision: Number(kv.create_revision) };
}

function lostLease(membership: V3Membership, cause?: unknown): MembershipLostError {
  return new MembershipLostError(
    `lease ${leaseHex(membership.leaseId)} of ${membership.id} has expired or was revoked`,
    cause === undefined ? undefined : { cause },
  );
}
