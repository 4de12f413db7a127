// Where a member's lease comes from, and so what renewing and giving up its
// membership mean. etcd's recipe attaches each campaign key to a session's
// lease (session.go): a member may own its lease alone (OwnLease, below: one
// lease per member, as etcd-leader always did), or share one with every
// election on an etcd v3 session (session/session-lease.ts), where renewing
// is the session's one keep-alive and leaving deletes the key, not the lease.
import type { Renewed } from "../../contract/backend";
import type { MembershipRenewal, RenewalListener } from "../../election/renewal";
import { MembershipLostError } from "../../contract/errors";
import type { Clock } from "../../util/clock";
import { log } from "../../util/log";
import { leaseHex } from "./member-keys";
import type { V3Membership } from "./membership";
import { LeaseNotFoundError, type EtcdV3Port, type GrantedLease } from "./port";

/** A lease to attach a new member key to, and when the write that keeps it alive was last sent. */
export interface LeaseForKey {
  readonly lease: GrantedLease;
  /** performance.now() before the confirmed write (grant or keep-alive) that the lease lives on from. */
  readonly sentAt: number;
  /**
   * Called once the campaign on it has its answer (or failed), and what it may
   * have left is being given up: the member's next campaign may go then.
   */
  readonly campaigned?: () => void;
}

export interface MemberLease {
  /** A lease for a new key; `signal` is the join's, which may stop waiting before the campaign goes out. */
  acquire(signal: AbortSignal): Promise<LeaseForKey>;
  /** Renews the lease `membership` is on; throws MembershipLostError when etcd no longer has it. */
  keepAlive(membership: V3Membership, signal: AbortSignal): Promise<Renewed | void>;
  /** Gives the membership up: its key is deleted. */
  leave(membership: V3Membership, signal: AbortSignal): Promise<void>;
  /**
   * The campaign on `lease` for `key` failed (`cause`), or its member stopped
   * waiting for it: whatever it may have created nobody will hold.
   */
  abandon(lease: GrantedLease, key: string, cause?: unknown): void;
  /**
   * Optionally, where one lease keeps many members alive (a session's): the
   * renewal of `membership` by the lease's own schedule. `backend` renews
   * the membership alone, for when a keep-alive of the lease does not show
   * the key alive.
   */
  renewalOf?(membership: V3Membership, listener: RenewalListener, backend: RenewsAlone): MembershipRenewal;
}

/** What renews one member alone: the backend, which keeps its lease alive and reads its key. */
export interface RenewsAlone {
  renew(membership: V3Membership, signal: AbortSignal): Promise<Renewed | void>;
}

/** One lease per member: granted at the join, kept alive by the member alone, revoked when it leaves. */
export class OwnLease implements MemberLease {
  constructor(
    private readonly port: EtcdV3Port,
    private readonly ttlSeconds: number,
    private readonly clock: Clock,
  ) {}

  async acquire(): Promise<LeaseForKey> {
    // The lease's time to live runs from when etcd grants it.
    const sentAt = this.clock.now();
    // No automatic keep-alive: the state machine renews, on its own schedule.
    const lease = await this.port.grantLease(this.ttlSeconds);
    if (lease.ttlSeconds !== this.ttlSeconds) {
      log.v3("asked for a %d s lease, etcd granted %s s", this.ttlSeconds, lease.ttlSeconds);
    }
    return { lease, sentAt };
  }

  async keepAlive(membership: V3Membership, signal: AbortSignal): Promise<void> {
    let ttl: number;
    try {
      ttl = await this.port.keepAlive(membership.leaseId, signal);
    } catch (err) {
      if (err instanceof LeaseNotFoundError) throw lostLease(membership, err.cause);
      throw err;
    }
    if (!(ttl > 0)) throw lostLease(membership);
  }

  /** Resign, as a session's close does it: revoking the lease deletes the key. */
  leave(membership: V3Membership, signal: AbortSignal): Promise<void> {
    return this.port.revokeLease(membership.leaseId, signal);
  }

  abandon(lease: GrantedLease): void {
    this.port.abandonLease(lease.id);
  }
}

export function lostLease(membership: V3Membership, cause?: unknown): MembershipLostError {
  return new MembershipLostError(
    `lease ${leaseHex(membership.leaseId)} of ${membership.id} has expired or was revoked`,
    cause === undefined ? undefined : { cause },
  );
}
