// One lease shared by many elections, as etcd's concurrency.Session
// (client/v3/concurrency/session.go) owns one for every Election made on it:
// each member key `<key>/<lease id in hex>` is attached to it, one
// LeaseKeepAlive keeps them all, and one LeaseRevoke deletes them all.
//
// The safety of every term on the session rests on one number: the send time
// of the newest keep-alive (or the grant) that etcd confirmed. etcd applied it
// after it was sent, so the lease, and every key on it, lives at least until
// that time plus the TTL; every election's deadline counts from it (each
// member's renewal answers with it, src/contract/backend.ts `Renewed`).
//
// Renewals: the session sends one keep-alive per refresh interval, a refresh
// interval after the last confirmed one was sent, and every member on the
// lease hears its send time (session-renewal.ts); no member has a timer of
// its own. A failed keep-alive reaches them all and is tried again after a
// back-off, as a member of its own lease would retry. A renewal a member asks
// for itself (a new leader proving its membership alive) is answered with the
// last confirmed keep-alive while it is younger than the refresh interval,
// and one asked for while a keep-alive is on its way waits for it.
//
// A lease that etcd no longer has (a keep-alive answered with TTL 0 or "lease
// not found", a put refused for it) is dropped: every renewal on it then
// fails with MembershipLostError, its members step down and join again, and
// the first join grants a new lease (new keys, new fencing tokens).
import { isMembershipLost, MembershipLostError } from "../../../contract/errors";
import { Backoff } from "../../../util/backoff";
import { deadline, untilAborted } from "../../../util/abort";
import { later, type Clock } from "../../../util/clock";
import { log } from "../../../util/log";
import type { LeaseForKey } from "../member-lease";
import { leaseHex } from "../member-keys";
import { LeaseNotFoundError, type GrantedLease, type SessionPort } from "../port";
import { retryCeiling } from "../../../election/renewal";
import type { RenewalSchedule, SessionRenewal } from "./session-renewal";

/** The timing the session keeps its lease on. */
export interface LeaseTiming {
  readonly ttlSeconds: number;
  /** A keep-alive is sent once the last confirmed one is this old (ms). */
  readonly refreshInterval: number;
  /** How long one grant or keep-alive may take (ms). */
  readonly requestTimeout: number;
  /** A failed keep-alive is tried again after a back-off from this (ms)... */
  readonly retryInitialDelay: number;
  /** ...up to this, or a quarter of the refresh interval if less (ms). */
  readonly retryMaxDelay: number;
}

interface HeldLease {
  readonly granted: GrantedLease;
  /** When the newest grant or keep-alive of it that etcd confirmed was sent. */
  confirmedSentAt: number;
}

/** A keep-alive on its way: when it was sent, and its outcome (the send time once confirmed). */
interface KeepAlive {
  readonly leaseId: string;
  readonly done: Promise<number>;
}

/** etcd's session closed: no election can be held on it any more. */
export class SessionClosedError extends Error {
  override readonly name = "SessionClosedError";
  constructor() {
    super("the etcd session is closed");
  }
}

/** Member keys being deleted, by election key: the next campaign at that key waits for its deletion. */
export class Departures {
  private readonly pending = new Map<string, Promise<unknown>>();

  /** `deletion` of the member key at `electionKey` is on its way; resolves and rejects as it does. */
  add(electionKey: string, deletion: Promise<void>): Promise<void> {
    const settled = deletion.catch(() => undefined);
    this.pending.set(electionKey, settled);
    void settled.then(() => {
      if (this.pending.get(electionKey) === settled) this.pending.delete(electionKey);
    });
    return deletion;
  }

  /** Resolves once no deletion at `electionKey` is on its way. */
  async settled(electionKey: string): Promise<void> {
    for (let pending = this.pending.get(electionKey); pending; pending = this.pending.get(electionKey)) await pending;
  }
}

export class LeaseSession implements RenewalSchedule {
  readonly departures = new Departures();
  /** The members renewed by the session's own keep-alives (session-renewal.ts), while any is. */
  private readonly together = new Set<SessionRenewal>();
  /** When the session's next keep-alive for them is due. */
  private renewalTimer: unknown;
  private readonly renewalBackoff: Backoff;
  private held: HeldLease | undefined;
  private granting: Promise<HeldLease> | undefined;
  private keepingAlive: KeepAlive | undefined;
  private closed = false;
  /** The revoke has gone out: nothing on the lease can be renewed any more. */
  private revoked = false;
  /** The revoke close() sent; what members leaving meanwhile wait for. */
  private revoking: Promise<void> | undefined;

  constructor(
    readonly port: SessionPort,
    private readonly timing: LeaseTiming,
    private readonly clock: Clock,
  ) {
    this.renewalBackoff = new Backoff(timing.retryInitialDelay, retryCeiling(timing));
  }

  /** `member` is renewed by the session's keep-alives from now on, until renewApart(). */
  renewTogether(member: SessionRenewal): void {
    this.together.add(member);
    this.scheduleRenewals();
  }

  renewApart(member: SessionRenewal): void {
    this.together.delete(member);
    if (this.together.size === 0) this.cancelRenewals();
  }

  get isClosed(): boolean {
    return this.closed;
  }

  /** The lease now, if any: for tests and diagnostics. */
  get leaseId(): string | undefined {
    return this.held?.granted.id;
  }

  /**
   * A lease to attach a new key to, confirmed within the refresh interval:
   * the one held, kept alive first if its last confirmation is older, or a
   * new one if etcd has lost it (or none was granted yet).
   */
  async acquire(): Promise<LeaseForKey> {
    for (;;) {
      if (this.closed) throw new SessionClosedError();
      const held = this.held ?? (await this.grant());
      if (this.held !== held) continue;
      if (this.clock.now() - held.confirmedSentAt < this.timing.refreshInterval) {
        return { lease: held.granted, sentAt: held.confirmedSentAt };
      }
      // A keep-alive that fails for another reason than a lost lease fails the join: it is retried.
      await this.keepAlive(held);
    }
  }

  /**
   * Renews lease `leaseId` for one member: resolves with the send time of a
   * keep-alive that etcd confirmed, the last one if it is recent enough, else
   * the one on its way or a new one. Throws MembershipLostError if the lease
   * is not the session's any more.
   */
  async renew(leaseId: string, signal: AbortSignal): Promise<number> {
    const held = this.held;
    // Renewals go on while the session closes until the revoke goes out: the
    // memberships of leaders draining their routines must not expire meanwhile.
    if (this.revoked) throw new SessionClosedError();
    if (held?.granted.id !== leaseId) throw lost(leaseId);
    const inFlight = this.keepingAlive;
    if (!inFlight && this.clock.now() - held.confirmedSentAt < this.timing.refreshInterval) return held.confirmedSentAt;
    return untilAborted("keep-alive", inFlight?.leaseId === leaseId ? inFlight.done : this.keepAlive(held), signal);
  }

  /** etcd refused a put on `leaseId` for want of the lease: drop it, so that the next join gets a new one. */
  leaseNotFound(leaseId: string, cause?: unknown): void {
    if (this.held?.granted.id !== leaseId) return;
    log.v3("session lease %s is gone: %s", leaseHex(leaseId), (cause as Error | undefined)?.message ?? "not found");
    this.held = undefined;
    // Stops counting it among the keep-alive stream's leases; the revoke of a lease already gone does nothing.
    this.port.abandonLease(leaseId);
  }

  /**
   * Closes the session: revokes its lease, which deletes every key on it at
   * once. `beforeRevoke` runs first, once the session counts as closing (no
   * join is taken any more; the members step down there, and leaving they
   * wait for the revoke instead of deleting their keys one by one), and the
   * revoke waits for what it returns (the leaders' drains), the lease kept
   * alive meanwhile. `afterRevokeSent` runs a turn of the event loop after
   * the revoke was handed to the client (at once if no lease is held): what
   * can wait until the revoke is on its way. Resolves when etcd answered, or
   * the request timed out (the keys then expire with the lease). Never rejects.
   */
  close(beforeRevoke: () => void | Promise<void> = () => undefined, afterRevokeSent: () => void = () => undefined): Promise<void> {
    if (this.revoking) return this.revoking;
    this.closed = true;
    // Set before beforeRevoke runs: members leaving there wait for it (`closing`).
    let go!: (before: void | Promise<void>) => void;
    this.revoking = new Promise<void | Promise<void>>((resolve) => (go = resolve))
      .catch((err: unknown) => log.v3("closing the session: %s", (err as Error).message))
      .then(() => this.revoke(afterRevokeSent));
    try {
      go(beforeRevoke());
    } catch (err) {
      go(Promise.reject(err));
    }
    return this.revoking;
  }

  /** What a member leaving while the session closes waits for instead of deleting its key. */
  get closing(): Promise<void> | undefined {
    return this.revoking;
  }

  /** Revokes the lease held, if any; `sent` runs a turn of the event loop after the request was made (or at once if there is none). */
  private async revoke(sent: () => void): Promise<void> {
    this.revoked = true;
    this.cancelRenewals();
    const granting = this.granting;
    if (granting) await granting.catch(() => undefined);
    const held = this.held;
    this.held = undefined;
    if (!held) return sent();
    const bound = deadline(this.timing.requestTimeout, this.clock);
    try {
      const revoking = this.port.revokeLease(held.granted.id, bound.signal);
      // The client writes the request after this turn: what `sent` does
      // (unwinding every election on the session) must not hold it back.
      later(this.clock, sent);
      await revoking;
      log.v3("session closed: revoked lease %s", leaseHex(held.granted.id));
    } catch (err) {
      log.v3("session closed, but the revoke of lease %s failed (%s): its keys expire with it", leaseHex(held.granted.id), (err as Error).message);
    } finally {
      bound.clear();
    }
  }

  /**
   * The next keep-alive for the members renewed together: a refresh interval
   * after the last confirmed one was sent (or `delayMs` after a failure).
   */
  private scheduleRenewals(delayMs?: number): void {
    if (this.renewalTimer !== undefined || this.together.size === 0 || this.revoked) return;
    const held = this.held;
    const due = delayMs ?? (held ? held.confirmedSentAt + this.timing.refreshInterval - this.clock.now() : 0);
    this.renewalTimer = this.clock.setTimeout(() => {
      this.renewalTimer = undefined;
      void this.renewTogetherNow();
    }, Math.max(0, due));
  }

  private cancelRenewals(): void {
    if (this.renewalTimer === undefined) return;
    this.clock.clearTimeout(this.renewalTimer);
    this.renewalTimer = undefined;
  }

  /**
   * One keep-alive (or the one on its way, or the last one if it is recent
   * enough), whose confirmation every member on the lease hears; a failure
   * they all hear too, and it is tried again after a back-off.
   */
  private async renewTogetherNow(): Promise<void> {
    const held = this.held;
    const leaseId = held?.granted.id;
    try {
      if (!held) throw lost(undefined);
      const inFlight = this.keepingAlive;
      const recent = !inFlight && this.clock.now() - held.confirmedSentAt < this.timing.refreshInterval;
      const sentAt = recent ? held.confirmedSentAt : await (inFlight && inFlight.leaseId === leaseId ? inFlight.done : this.keepAlive(held));
      const recovered = this.renewalBackoff.attempts > 0;
      this.renewalBackoff.reset();
      for (const member of [...this.together]) {
        if (member.leaseId !== leaseId) {
          member.lost(lost(member.leaseId));
          continue;
        }
        member.confirmed(sentAt);
        if (recovered) member.recovered();
      }
      this.scheduleRenewals();
    } catch (err) {
      if (this.revoked) return;
      if (isMembershipLost(err)) {
        // The lease is gone: its members hear it, and join again on a new one.
        for (const member of [...this.together]) if (member.leaseId === leaseId || leaseId === undefined) member.lost(err);
        this.scheduleRenewals();
        return;
      }
      const delayMs = this.renewalBackoff.next();
      for (const member of [...this.together]) member.failed(err, this.renewalBackoff.attempts, delayMs);
      this.scheduleRenewals(delayMs);
    }
  }

  /** One grant at a time, whoever asks. */
  private grant(): Promise<HeldLease> {
    this.granting ??= this.grantOnce().finally(() => (this.granting = undefined));
    return this.granting;
  }

  private async grantOnce(): Promise<HeldLease> {
    // The lease's time to live runs from when etcd grants it.
    const sentAt = this.clock.now();
    const bound = deadline(this.timing.requestTimeout, this.clock);
    let granted: GrantedLease;
    try {
      granted = await this.port.awaitAnswer("grant session lease", this.port.grantLease(this.timing.ttlSeconds), bound.signal);
    } finally {
      bound.clear();
    }
    if (this.closed) {
      // close() came while the grant was on its way: nothing may live on it.
      this.port.abandonLease(granted.id);
      throw new SessionClosedError();
    }
    if (granted.ttlSeconds !== this.timing.ttlSeconds) {
      log.v3("asked for a %d s session lease, etcd granted %s s", this.timing.ttlSeconds, granted.ttlSeconds);
    }
    log.v3("session lease %s granted", leaseHex(granted.id));
    this.held = { granted, confirmedSentAt: sentAt };
    return this.held;
  }

  /** One keep-alive of `held`, shared by every member that asks while it is on its way. */
  private keepAlive(held: HeldLease): Promise<number> {
    const leaseId = held.granted.id;
    const done = this.sendKeepAlive(held).finally(() => {
      if (this.keepingAlive?.done === done) this.keepingAlive = undefined;
    });
    this.keepingAlive = { leaseId, done };
    done.catch(() => undefined);
    return done;
  }

  private async sendKeepAlive(held: HeldLease): Promise<number> {
    const leaseId = held.granted.id;
    const sentAt = this.clock.now();
    // The session's own bound: a member that stops waiting leaves it to the others.
    const bound = deadline(this.timing.requestTimeout, this.clock);
    let ttl: number;
    try {
      ttl = await this.port.keepAlive(leaseId, bound.signal);
    } catch (err) {
      if (err instanceof LeaseNotFoundError) {
        this.leaseNotFound(leaseId, err);
        throw lost(leaseId, err);
      }
      throw err;
    } finally {
      bound.clear();
    }
    if (!(ttl > 0)) {
      this.leaseNotFound(leaseId);
      throw lost(leaseId);
    }
    // A keep-alive sent later (acquire()'s) may have been confirmed first:
    // the lease lives from the newest confirmed send, whichever answered last.
    held.confirmedSentAt = Math.max(held.confirmedSentAt, sentAt);
    return held.confirmedSentAt;
  }
}

function lost(leaseId: string | undefined, cause?: unknown): MembershipLostError {
  return new MembershipLostError(
    leaseId === undefined ? "the session's lease has expired or was revoked" : `the session's lease ${leaseHex(leaseId)} has expired or was revoked`,
    cause === undefined ? undefined : { cause },
  );
}
