// What the v2 backend knows of a membership it holds, beyond what names it.
// The membership the state machine carries holds only its key and token;
// this is kept by the backend beside it (recipe.ts), where join, renew, the
// wait for the turn and awaitLoss share it.
import type { Membership } from "../../contract/backend";

export interface V2Membership extends Membership {
  /** The membership key, `<dir>/<createdIndex>`. */
  readonly id: string;
  /** Its createdIndex: its place in line, and its fencing token. */
  readonly token: number;
}

/** Told after each renewal of our key: the wait for the turn, which may arm its witness then. */
export interface RenewalListener {
  ownKeyRenewed(): void;
}

export class MembershipState {
  /** An etcd index at which the key was known to exist; watches start after it. */
  knownAliveAt: number;
  /** The wait for the turn, while it runs. */
  follower: RenewalListener | undefined = undefined;
  /** Set while the member leads without having told the members watching it: its next renewal announces. */
  unannounced = false;
  /** The announcement sent when it came to lead, settled (never rejected) once etcd answered it or it gave up. */
  announcing: Promise<void> | undefined = undefined;

  constructor(knownAliveAt: number) {
    this.knownAliveAt = knownAliveAt;
  }

  /** The key was seen to exist at etcd index `index`. */
  aliveAt(index: number): void {
    if (index > this.knownAliveAt) this.knownAliveAt = index;
  }
}
