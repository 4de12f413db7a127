// The contract between the election state machine (election.ts) and a store
// protocol (backends/*.ts). A backend knows how to hold a place in line on its
// store; it knows nothing about timers, events, retries or step-down.
//
// Every method takes an AbortSignal and must settle soon after it aborts,
// leaving no request, watch or timer behind. Failures are thrown as errors; the
// state machine classifies them with `isMembershipLost` and treats every other
// error as transient.

/** One place in line: a key (v2), or a lease and its key (v3), or a NATS KV entry. */
export interface Membership {
  /** The store's identifier of this membership (the key, for etcd). */
  readonly id: string;
  /**
   * Strictly increasing across successive memberships of one election: the
   * etcd v2 createdIndex or the etcd v3 create revision. A leader hands it out
   * as its fencing token.
   */
  readonly token: number;
}

/** Who leads an election: the member's name and its fencing token (its membership's token). */
export interface Leader {
  readonly name: string;
  readonly token: number;
}

/** Called with the current leader whenever the backend learns it; undefined when nobody leads. */
export type LeaderListener = (leader: Leader | undefined) => void;

export interface ElectionBackend<M extends Membership = Membership> {
  /** A short description for logs: "etcd v2 /services/master". */
  readonly description: string;

  /**
   * Takes a place at the back of the line. Resolves once the store holds it.
   * If the signal aborts while the request is in flight, the backend still
   * removes a membership the store may have created.
   */
  join(signal: AbortSignal): Promise<M>;

  /**
   * Renews the membership's time to live. Resolves once the store confirmed
   * that the membership is still held; throws MembershipLostError if it is not.
   */
  renew(membership: M, signal: AbortSignal): Promise<void>;

  /**
   * Resolves when `membership` is first in line, and only once the store has
   * shown the membership itself still held at or after the moment the last
   * older member went: an outside delete can take it in the same breath (a
   * whole election deleted at once), and a renewal from before the turn does
   * not show it survived that. Until then it reports the leader (whoever is
   * first) through `onLeader`, each time that changes. Throws
   * MembershipLostError if the membership disappears meanwhile.
   */
  awaitTurn(membership: M, onLeader: LeaderListener, signal: AbortSignal): Promise<void>;

  /**
   * For a member that is first in line: resolves as soon as the store shows
   * that the membership is gone (deleted by an operator, or expired). Never
   * resolves while the membership exists.
   */
  awaitLoss(membership: M, signal: AbortSignal): Promise<void>;

  /** Gives the place up (deletes the key, revokes the lease). */
  leave(membership: M, signal: AbortSignal): Promise<void>;

  /**
   * Follows who leads without taking part: calls `onLeader` with the first
   * member whenever it changes, until the signal aborts. Throws on
   * store errors; the caller retries.
   */
  observe(onLeader: LeaderListener, signal: AbortSignal): Promise<void>;

  /** One read of who leads now, without taking part; undefined when nobody does. */
  readLeader(signal: AbortSignal): Promise<Leader | undefined>;
}
