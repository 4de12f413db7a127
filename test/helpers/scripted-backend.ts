// A backend whose every answer the test decides, for the state machine's
// timer logic only. Tests of behaviour against a store use a real etcd.
import type { ElectionBackend, Leader, LeaderListener, Membership } from "../../src/backend";
import { MembershipLostError } from "../../src/errors";

import type { Clock } from "../../src/clock";

export type RenewAnswer = "ok" | "fail" | "lost" | "hang";

export class ScriptedBackend implements ElectionBackend {
  readonly description = "scripted";
  joins = 0;
  renewals = 0;
  leaves: string[] = [];
  renewAnswer: RenewAnswer = "ok";
  /** With a clock: how long each successful renewal takes to be answered. */
  renewLatency = 0;
  clock: Clock | undefined;
  /** When false, awaitTurn waits until `grantTurn()`. */
  firstInLine = true;
  private turnWaiters: Array<() => void> = [];
  private lossWaiters: Array<() => void> = [];

  async join(): Promise<Membership> {
    this.joins++;
    return { id: `member-${this.joins}`, token: this.joins * 10 };
  }

  renew(_membership: Membership, signal: AbortSignal): Promise<void> {
    this.renewals++;
    switch (this.renewAnswer) {
      case "ok":
        if (this.clock && this.renewLatency > 0) {
          const clock = this.clock;
          return new Promise((resolve) => clock.setTimeout(resolve, this.renewLatency));
        }
        return Promise.resolve();
      case "fail":
        return Promise.reject(new Error("connection refused"));
      case "lost":
        return Promise.reject(new MembershipLostError("gone"));
      case "hang":
        return new Promise((_, reject) => signal.addEventListener("abort", () => reject(signal.reason), { once: true }));
    }
  }

  awaitTurn(_m: Membership, onLeader: LeaderListener, signal: AbortSignal): Promise<void> {
    if (this.firstInLine) return Promise.resolve();
    onLeader({ name: "someone-else", token: 1 });
    return this.pending(this.turnWaiters, signal);
  }

  awaitLoss(_m: Membership, signal: AbortSignal): Promise<void> {
    return this.pending(this.lossWaiters, signal);
  }

  async leave(m: Membership): Promise<void> {
    this.leaves.push(m.id);
  }

  observe(_onLeader: LeaderListener, signal: AbortSignal): Promise<void> {
    return this.pending([], signal);
  }

  async readLeader(): Promise<Leader | undefined> {
    return this.firstInLine ? { name: "me", token: this.joins * 10 } : { name: "someone-else", token: 1 };
  }

  grantTurn(): void {
    this.firstInLine = true;
    for (const resolve of this.turnWaiters.splice(0)) resolve();
  }

  removeMembership(): void {
    for (const resolve of this.lossWaiters.splice(0)) resolve();
  }

  private pending(waiters: Array<() => void>, signal: AbortSignal): Promise<void> {
    return new Promise((resolve, reject) => {
      waiters.push(resolve);
      signal.addEventListener("abort", () => reject(signal.reason), { once: true });
    });
  }
}
