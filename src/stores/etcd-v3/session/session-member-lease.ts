// The lease of one election's member on an etcd v3 session: the session's
// (lease-session.ts). Renewing is the session's shared keep-alive, answered
// with its send time; leaving deletes the member's key only (etcd's Resign),
// since the lease holds the session's other elections too; and while the
// session closes, leaving is the session's one LeaseRevoke.
import type { Renewed } from "../../../contract/backend";
import { untilAborted } from "../../../util/abort";
import type { LeaseForKey, MemberLease, RenewsAlone } from "../member-lease";
import type { V3Membership } from "../membership";
import type { MembershipRenewal, RenewalListener } from "../../../election/renewal";
import { SessionRenewal, type SessionRenewalSetting } from "./session-renewal";
import { LeaseNotFoundError, type GrantedLease } from "../port";
import type { LeaseSession } from "./lease-session";

export class SessionMemberLease implements MemberLease {
  /** This member's last campaign, settled once it has its answer. */
  private previous: Promise<void> = Promise.resolve();

  constructor(
    private readonly session: LeaseSession,
    /** The election's key: its member key on the session is always `<key>/<lease id>`. */
    private readonly electionKey: string,
    /** The election's timing, for its renewal; `requestTimeout` also bounds the deletion of an abandoned key. */
    private readonly timing: SessionRenewalSetting,
  ) {}

  /** The session's keep-alives renew the member (session-renewal.ts). */
  renewalOf(membership: V3Membership, listener: RenewalListener, backend: RenewsAlone): MembershipRenewal {
    return new SessionRenewal(this.session, membership, backend, listener, this.timing);
  }

  async acquire(signal: AbortSignal): Promise<LeaseForKey> {
    // The member key's name is the lease's, so every campaign of this member
    // is for the same key: one that went on after its join gave up creates
    // the key the next one would find (and take for its own) just before
    // its deletion. So a campaign waits for the one before to have its
    // answer, and for any deletion at this key (an earlier member leaving, a
    // campaign undone) to be done.
    // (How many joins go to etcd at once is the process's join window's
    // business: src/election/join-window.ts, in front of every join.)
    await untilAborted("join", this.previous, signal);
    await this.session.departures.settled(this.electionKey);
    let campaigned!: () => void;
    this.previous = new Promise<void>((resolve) => (campaigned = resolve));
    try {
      return { ...(await this.session.acquire()), campaigned };
    } catch (err) {
      campaigned();
      throw err;
    }
  }

  async keepAlive(membership: V3Membership, signal: AbortSignal): Promise<Renewed> {
    return { sentAt: await this.session.renew(membership.leaseId, signal) };
  }

  leave(membership: V3Membership, signal: AbortSignal): Promise<void> {
    const closing = this.session.closing;
    if (closing) return closing;
    if (this.session.leaseId !== membership.leaseId) return Promise.resolve(); // gone with its lease
    return this.session.departures.add(this.electionKey, this.session.port.deleteMember(membership.id, membership.token, signal));
  }

  abandon(lease: GrantedLease, key: string, cause?: unknown): void {
    if (cause instanceof LeaseNotFoundError) return this.session.leaseNotFound(lease.id, cause);
    if (this.session.closing || this.session.leaseId !== lease.id) return;
    // The campaign may have created the key, or not (its answer was lost):
    // only our lease's member can have this key's name, so delete it whatever its revision.
    const removal = AbortSignal.timeout(this.timing.requestTimeout);
    this.session.departures.add(this.electionKey, this.session.port.deleteMember(key, undefined, removal)).catch(() => undefined);
  }
}
