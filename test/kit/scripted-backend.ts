// A backend whose every answer the test decides, for the state machine's
// timer logic only. Tests of behaviour against a store use a real etcd.
import type { Claim, ElectionBackend, Leader, LeaderListener, Membership } from "../../src/contract/backend";
import { MembershipLostError } from "../../src/contract/errors";

import type { Clock } from "../../src/util/clock";

export type RenewAnswer = "ok" | "fail" | "lost" | "hang";

/**
 * A queue-style store by default: a member joins, then waits for its turn.
 * As a race-style store (`new ScriptedBackend("race")`) it has no join, and a
 * member holds nothing until awaitTurn hands it what it won.
 */
export class ScriptedBackend implements ElectionBackend {
  /** Queue-style only: a place in line. */
  join?: () => Promise<Claim>;
  joins = 0;
  /** Race-style only: how many times a member won. */
  wins = 0;
  /** The TTL the store reports applying, in ms. */
  ttlMs = 10_000;
  renewals = 0;
  leaves: string[] = [];
  renewAnswer: RenewAnswer = "ok";
  /** With a clock: how long each successful renewal takes to be answered. */
  renewLatency = 0;
  clock: Clock | undefined;
  /** When false, awaitTurn waits until `grantTurn()`. */
  firstInLine = true;
  /** "fail": awaitTurn cannot reach the store; "lost": it finds the membership gone. */
  turnAnswer: "ok" | "fail" | "lost" = "ok";
  /** The signal of the leader's last wait for the loss of its membership. */
  lossSignal: AbortSignal | undefined;
  /** Called as leave() is, before it answers. */
  onLeave: ((membership: Membership) => void) | undefined;
  private turnWaiters: Array<() => void> = [];
  private lossWaiters: Array<() => void> = [];

  constructor(style: "queue" | "race" = "queue") {
    if (style === "queue") {
      this.join = async () => {
        this.joins++;
        return this.claim(`member-${this.joins}`, this.joins * 10);
      };
    }
  }

  private claim(id: string, token: number): Claim {
    return { membership: { id }, token, sentAt: this.now(), ttlMs: this.ttlMs };
  }

  private now(): number {
    return this.clock ? this.clock.now() : performance.now();
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

  async awaitTurn(joined: Claim | undefined, onLeader: LeaderListener, signal: AbortSignal): Promise<Claim> {
    if (this.turnAnswer === "fail") throw new Error("connection refused");
    if (this.turnAnswer === "lost") throw new MembershipLostError("gone");
    if (!this.firstInLine) {
      onLeader({ name: "someone-else", token: 1 });
      await this.pending(this.turnWaiters, signal);
    }
    if (joined) return joined;
    this.wins++;
    return this.claim(`won-${this.wins}`, this.wins * 10);
  }

  awaitLoss(_m: Membership, signal: AbortSignal): Promise<void> {
    this.lossSignal = signal;
    return this.pending(this.lossWaiters, signal);
  }

  async leave(m: Membership): Promise<void> {
    this.onLeave?.(m);
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
