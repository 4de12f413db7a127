// A v3 membership: what identifies it, which the state machine holds, and
// what the backend knows about it besides, which stays the backend's.
import type { Membership } from "../../contract/backend";
import type { WatchSet } from "./port";

export interface V3Membership extends Membership {
  /** The member key, `<key>/<lease id in lowercase hex>`. */
  readonly id: string;
  /** The member key's create revision. */
  readonly token: number;
  /** The lease the key is attached to: etcd's int64 in decimal. */
  readonly leaseId: string;
}

/** What the backend has learnt about one of its memberships. */
export class MembershipState {
  constructor(
    /** A revision at which the key was known to exist; watches of it start after it. */
    public knownAliveAt: number,
  ) {}

  /** The watch that sees our key now (a follower's watch of its line, the leader's of its key), if any. */
  private keyWatch: { readonly owner: object; readonly confirmed: () => boolean } | undefined;

  /**
   * A watch whose events include our key's deletion, left by the follower
   * whose wait ended with our turn, for the leader's wait for its loss to go
   * on with (recipe.ts awaitLoss) instead of closing it and creating another:
   * at a hand-over of many elections at once, a cancel and a create each.
   */
  private handedOver: WatchSet<"line" | "leader"> | undefined;

  /** The follower's watches (its "line" watch covers our key) are the leader's from now on. */
  handOver(watches: WatchSet<"line" | "leader">): void {
    this.handedOver?.close();
    this.handedOver = watches;
  }

  /** The watches a follower handed over, if any: the caller owns them from now on. */
  takeHandedOver(): WatchSet<"line" | "leader"> | undefined {
    const watches = this.handedOver;
    this.handedOver = undefined;
    return watches;
  }

  /** `owner` watches our key; `confirmed` says whether etcd has confirmed that watch and it still runs. */
  watchKey(owner: object, confirmed: () => boolean): void {
    this.keyWatch = { owner, confirmed };
  }

  /** `owner` no longer watches our key (unless another has taken over). */
  unwatchKey(owner: object): void {
    if (this.keyWatch?.owner === owner) this.keyWatch = undefined;
  }

  /**
   * Whether a watch etcd has confirmed sees every change to our key now, so
   * that a deletion of the key reaches us within a watch's delivery. Without
   * one, a renewal of the lease says nothing of the key, which can be deleted
   * while its lease lives.
   */
  get keyWatched(): boolean {
    return this.keyWatch?.confirmed() ?? false;
  }
}

/** Kept apart from the membership, which the state machine (or a user's code) holds. */
const states = new WeakMap<V3Membership, MembershipState>();

export function remember(membership: V3Membership, state: MembershipState): void {
  states.set(membership, state);
}

/**
 * What the backend knows of `membership`. One it did not make (a membership
 * handed back from elsewhere) is known alive at its creation, which is where
 * a watch of it replays from.
 */
export function stateOf(membership: V3Membership): MembershipState {
  let state = states.get(membership);
  if (!state) states.set(membership, (state = new MembershipState(membership.token)));
  return state;
}
