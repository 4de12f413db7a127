// The contract between the election state machine (src/election/election.ts) and a store.
// A backend knows how to hold a membership on its store and how to tell whose
// turn it is; it knows nothing about timers, events, retries or step-down.
//
// Two kinds of store fit:
// - Queue-style (etcd v2 and v3, ZooKeeper): every candidate takes a place in
//   line at once (`join`) and keeps it alive while it waits; the oldest place
//   leads. The fencing token is known from the join.
// - Race-style (a NATS KV key, a Consul session lock, a Kubernetes Lease): the
//   candidates race to write one key and hold nothing until one wins; the
//   winner's token is the revision of its winning write. Such a backend has
//   no `join`: its `awaitTurn` competes and hands back what it won.
//
// Every method takes an AbortSignal and must settle soon after it aborts,
// leaving no request, watch or timer behind. stop() calls `leave` first and
// aborts the signals of the waits on the event loop's next turn, once the
// deletion has gone out; a turn or a win they resolve with meanwhile is not
// led on (what a race-style member won is handed to `leave`). Failures are
// thrown as errors: a MembershipLostError when the store no longer holds the
// membership (the state machine then starts over), anything else counts as
// transient and is retried with back-off.
//
// What a backend answers crosses into the state machine checked
// (answers.ts), because a backend may be the user's own. The rules
// for a claim, from `join` or from an `awaitTurn` that won:
// - `membership` is an object whose `id` is a non-empty string;
// - `token` is a finite number, larger than any earlier leader's;
// - `sentAt` is performance.now() taken during the call, just before the
//   write was sent: not later than the answer, nor `ttlMs` or more before it;
// - `ttlMs` is a positive, finite number of milliseconds;
// - `awaitTurn` handed a claim resolves with that membership and token.
// `renew` may resolve with `{ sentAt }`: the performance.now() time at which
// the write that renewed the membership was sent, which may be before the
// call (a renewal shared by many memberships, such as the one keep-alive of
// an etcd v3 session). It must be a finite number, not later than the
// answer, and not earlier than the send time of the membership's newest
// write confirmed before (its claim, or an earlier renewal). A renewal that
// breaks one is reported (an InvalidClaimError naming `sentAt`), extends no
// term, and is retried like a failed one. Resolving with nothing means the
// write was sent during the call, and its start is taken as the send time.
// A claim that breaks one is reported as an `error` (an InvalidClaimError
// naming the field) and never led on; what it names is handed to `leave`.
// A leader reported to `onLeader` is `{ name: string, token: finite number }`
// or undefined; a malformed one is reported and ignored, and one reported
// after `awaitTurn` resolved, or to a member that leads, is ignored. A
// `join` that does not settle within the request timeout is reported as a
// timeout, and what it resolves with later is handed to `leave`. `observe`
// that returns before its signal aborts is reported and called again after
// a back-off. The conformance suite (test/contract/conformance/claim-cases.ts) checks
// each rule.

/** What the store holds for a member and drops unless renewed: a place in line, or the key it won. */
export interface Membership {
  /** The store's name for it, for logs and errors (the key, for etcd). */
  readonly id: string;
}

/**
 * A membership the store has just shown alive, with what the state machine
 * needs to time a term on it.
 */
export interface Claim<M extends Membership = Membership> {
  readonly membership: M;
  /**
   * The fencing token a term on this membership carries. Strictly larger than
   * that of any earlier leader of the election (an etcd create revision or
   * createdIndex, a NATS KV revision).
   */
  readonly token: number;
  /**
   * `performance.now()` taken just before the write that created (or last
   * renewed) the membership was sent. The store applied that write later, so
   * the membership lives at least until `sentAt + ttlMs`: a leader's deadline
   * counts from here.
   */
  readonly sentAt: number;
  /**
   * How long the store keeps the membership after such a write, in
   * milliseconds, as the store itself applies it (the lease etcd granted, a
   * bucket's max age), which may differ from the TTL asked for.
   */
  readonly ttlMs: number;
}

/**
 * What `renew` may answer: when the write that the store confirmed, and that
 * keeps the membership alive, was sent. A backend whose renewals are shared
 * (one lease keep-alive for every election on an etcd v3 session) answers
 * with the send time of the shared write, which may come before the call.
 */
export interface Renewed {
  /**
   * `performance.now()` taken just before that write was sent: not later
   * than the answer, and not earlier than the send time of the membership's
   * newest write confirmed before. A term's deadline counts from it.
   */
  readonly sentAt: number;
}

/**
 * Who leads an election: the member's name, and a token that only grows from
 * one leader to the next (on etcd, the leader's fencing token; on a
 * race-style store it may be the revision of the leader's latest renewal).
 */
export interface Leader {
  readonly name: string;
  readonly token: number;
}

/** Called with the current leader whenever the backend learns it; undefined when nobody leads. */
export type LeaderListener = (leader: Leader | undefined) => void;

export interface ElectionBackend<M extends Membership = Membership> {
  /** A short description for logs and diagnostics ("etcd v3 services/billing"); optional. */
  readonly description?: string;

  /**
   * Queue-style stores only: takes a place at the back of the line, held from
   * now on (the state machine renews it). If the signal aborts while the
   * request is in flight, the backend still removes a membership the store
   * may have created. Race-style stores leave this out.
   */
  join?(signal: AbortSignal): Promise<Claim<M>>;

  /**
   * Resolves once this member may lead, with the claim to lead on. Until then
   * it reports whoever leads through `onLeader`, each time that changes.
   *
   * Queue-style: `joined` is the claim `join` gave. Resolve when it is first
   * in line, and only once the store has shown the membership itself still
   * held at or after the moment the last older member went: an outside
   * delete can take it in the same breath (a whole election deleted at once),
   * and a renewal from before the turn does not show it survived that. Throw
   * MembershipLostError if it goes meanwhile.
   *
   * Race-style: `joined` is undefined. Compete, wait while another member
   * holds the election, and resolve with what the winning write created. A
   * write that succeeds after the signal aborted must be undone. When the
   * state machine starts a phase over while it still holds what an earlier
   * call won (after a store outage, or a watch that ended), `joined` is that
   * claim: resolve with it if the store still holds it as ours, and throw
   * MembershipLostError if not; never compete against our own key.
   */
  awaitTurn(joined: Claim<M> | undefined, onLeader: LeaderListener, signal: AbortSignal): Promise<Claim<M>>;

  /**
   * Renews the membership's time to live. Resolves once the store confirmed
   * that it still holds the membership; throws MembershipLostError if not.
   * Resolves with nothing when the renewing write was sent during the call,
   * or with `{ sentAt }` when it was sent earlier (see Renewed).
   * Where the store keeps the time to live apart from the membership (an etcd
   * v3 lease, which outlives a key deleted from outside), one request can only
   * confirm the time to live: a deletion is then reported by awaitTurn and
   * awaitLoss, which must watch for it.
   */
  renew(membership: M, signal: AbortSignal): Promise<void | Renewed>;

  /**
   * For a member that leads: resolves as soon as the store shows that the
   * membership is gone (deleted by an operator, or expired). Never resolves
   * while the membership exists.
   */
  awaitLoss(membership: M, signal: AbortSignal): Promise<void>;

  /** Gives the membership up (deletes the key, revokes the lease), only if the store still holds it as ours. */
  leave(membership: M, signal: AbortSignal): Promise<void>;

  /**
   * Follows who leads without taking part: calls `onLeader` with the leader
   * whenever it changes, until the signal aborts. Throws on store errors;
   * the caller retries.
   */
  observe(onLeader: LeaderListener, signal: AbortSignal): Promise<void>;

  /** One read of who leads now, without taking part; undefined when nobody does. */
  readLeader(signal: AbortSignal): Promise<Leader | undefined>;

  /**
   * Queue-style stores, optionally: one read of every member in line, in
   * order (the leader first), each with its name and token, without taking
   * part. A backend without it is asked `readLeader` instead, and its
   * candidates are the leader alone (a race-style store holds nothing for a
   * member that does not lead).
   */
  readCandidates?(signal: AbortSignal): Promise<readonly Leader[]>;

  /**
   * Stores that can refuse a write themselves once a term is over (etcd v3),
   * optionally: sends `operations` (the store client's own, such as etcd3's
   * put and delete builders) in one transaction that the store applies only
   * while `membership` still holds the election as it did when the term
   * began, and says whether it did. For whileLeading's `fenced`.
   */
  fencedWrite?(membership: M, operations: readonly unknown[], signal: AbortSignal): Promise<FencedWriteResult>;
}

/** What a fenced write came to. */
export interface FencedWriteResult {
  /** True if the store applied the operations: the term still held when the store checked. */
  readonly succeeded: boolean;
  /** The store's revision after the transaction. */
  readonly revision: number;
  /** The store's own answer (etcd3: the ITxnResponse), for the operations' results. */
  readonly response: unknown;
}
