// What the PostgreSQL recipe asks of its store, in PostgreSQL's own terms: a
// table with one lease row per election (its key, the holder's name, a
// fencing token, and when the lease expires on the server's clock), a
// sequence that hands out the tokens, and LISTEN/NOTIFY on a channel per key.
//
// The recipe (recipe.ts, follower.ts, lease-notices.ts) knows the store only
// through this port. pg/adapter.ts implements it on the user's pg.Pool or
// pg.Client; a simulated store can implement it too, and run the same recipe
// in virtual time.
//
// What the recipe relies on:
// - `acquire` is one statement: it takes the row when the key has none or
//   its lease has expired, both judged on the server's clock at the moment
//   the statement runs, and then answers the new token; else it changes
//   nothing and answers the holder as the server sees it (its name, token,
//   and the milliseconds its lease has left on the server's clock). Of any
//   number of acquires of one key, only one takes a given lease.
// - A token is larger than every token handed out before for the table,
//   whatever happened to the row (released, expired, deleted from outside):
//   it comes from a sequence, not from the row.
// - `renew` extends the lease only if the row still holds `token` and has
//   not expired on the server's clock; `release` deletes the row only if it
//   holds `token`. Each answers whether it did.
// - An acquire that takes the row, and any delete of the row (a release, or
//   an operator's DELETE: the table's trigger), each send a notification in
//   the same transaction: delivered once that transaction commits, never if
//   it does not, in commit order, to every listener whose LISTEN was in
//   place before the commit. A renewal notifies nobody, nor does a lease
//   that expires or is cut short from outside (an UPDATE of its expiry).
// - A listener reports its own end (the connection it listens on was lost),
//   unless the recipe stopped it; notifications sent meanwhile are lost.
// - A table that does not exist fails every request with an error
//   `isTableMissing` recognises. Any other failure (a timeout, a lost
//   connection, a server shutting down) is transient: the state machine
//   retries. A request the recipe stopped waiting for may still be applied,
//   and the recipe undoes such a win itself.

/** The member that holds an election's lease, as the server sees it. */
export interface LeaseHolder {
  readonly name: string;
  readonly token: number;
  /** How long its lease has left, in milliseconds on the server's clock, when the statement ran; above 0. */
  readonly remainingMs: number;
}

/** What an acquire came to: the row taken with a new token, or left to the member that holds it. */
export type Acquired =
  | { readonly won: true; readonly token: number }
  /** `holder` undefined: another member took the row in the same instant, and the statement could not see whom. */
  | { readonly won: false; readonly holder: LeaseHolder | undefined };

/** A notification about an election's row, as a listener receives it. */
export type LeaseNotice =
  /** A member took the row with `token`; its lease lasts `ttlMs` from the commit. */
  | { readonly kind: "acquired"; readonly name: string; readonly token: number; readonly ttlMs: number }
  /** The row holding `token` was deleted: its holder gave it up, or an operator deleted it. */
  | { readonly kind: "released"; readonly token: number };

/** Told of an election's notifications, in commit order, as they arrive. */
export interface LeaseListener {
  onNotice(notice: LeaseNotice): void;
  /** The listening connection was lost, with why. Never after stop(). */
  onEnd(error: Error): void;
}

/** A LISTEN in place for one election. */
export interface LeaseListening {
  /** Stops listening (UNLISTEN) and lets go of the connection if nothing else listens on it. */
  stop(): void;
  /**
   * Checks that the listening connection still answers (a trivial
   * statement), without waiting: if it does not within the request timeout,
   * the listening ends (onEnd), as if the connection had been lost.
   * Optional: a store whose connections cannot go silent leaves it out.
   */
  probe?(): void;
}

/** One table of election leases, as the recipe uses it. */
export interface PostgresPort {
  /** The table's name as the statements use it, for logs: `"public"."etcd_leader_elections"`. */
  readonly table: string;
  /** Takes the row for `name` with a lease of `ttlMs` if it is absent or expired; else answers who holds it. */
  acquire(key: string, name: string, ttlMs: number): Promise<Acquired>;
  /** Extends the lease to `ttlMs` from now if the row holds `token` and has not expired; false if not. */
  renew(key: string, token: number, ttlMs: number): Promise<boolean>;
  /** Deletes the row if it holds `token`, notifying listeners; false if it did not hold it. */
  release(key: string, token: number): Promise<boolean>;
  /** The holder of the row if its lease has not expired; undefined if there is none. */
  read(key: string): Promise<LeaseHolder | undefined>;
  /**
   * Starts listening for the election's notifications; resolves once the
   * LISTEN is in place. A caller that gives up (`signal`) has found the
   * connection it waited on unanswering: the next listen does not wait on it.
   */
  listen(key: string, listener: LeaseListener, signal?: AbortSignal): Promise<LeaseListening>;
  /** Whether a failure says that the table does not exist. */
  isTableMissing(error: unknown): boolean;
}
