// A follower's wait in the Redis election: from its first acquire until it
// wins the key, racing whenever nobody holds it and following whoever does.
//
//   race      one acquire script: it wins, or names the holder and the
//             key's remaining time (PTTL).
//   follow    an announced acquire names the new leader at once; an
//             announced release starts the next race, on our turn among
//             the process's followers (src/util/turns.ts).
//   due       an expiry is silent on the channel, so a follower schedules
//             ONE check for when the holder's key must have run out: PTTL
//             counted from when the read was *sent* (the server answered
//             later, so the key cannot run out before that moment). The
//             check is the next race: while the leader renews, it finds the
//             key held and schedules the next one. Where keyspace
//             notifications are on, an expiry or outside DEL starts the race
//             at once, and each renewal's PEXPIRE pushes the check back, so
//             a healthy election costs followers no request at all.
//
// Nothing here polls: every wait ends on an event or on the one moment the
// holder's key must have run out. A due check that finds a holder we never
// heard win makes the subscription show that its connection still answers
// (a connection gone silent hears nothing, and says nothing).
import type { Claim, LeaderListener } from "../../contract/backend";
import type { Clock } from "../../util/clock";
import type { TurnQueue } from "../../util/turns";
import type { KeyEvents } from "./events";
import type { RedisMembership } from "./holder";

/** Whoever holds the key, as far as a follower or observer knows. */
export interface Holder {
  readonly name: string;
  readonly token: number;
  /** When (on the member's clock) its key must have run out, unless renewed since. */
  goneBy: number;
  /** How long its acquire set the key to live, where known; else the member's own TTL. */
  readonly ttlMs: number;
}

/** What one race came to: the claim if we won, else the holder it named. */
export type RaceResult = { readonly claim: Claim<RedisMembership> } | { readonly holder: Holder };

/** The member a follower races for (the backend, recipe.ts), and what it runs on. */
export interface Candidate {
  readonly name: string;
  readonly clock: Clock;
  /** A number in [0, 1), as Math.random. */
  readonly random: () => number;
  readonly turns: TurnQueue;
  /** One acquire. */
  race(signal: AbortSignal): Promise<RaceResult>;
}

export class Follower {
  private holder: Holder | undefined;
  /** The leader last reported to onLeader: a due check that finds the same holder is no news. */
  private named: { name: string; token: number } | undefined;
  /** The holder whose key was due when the last race went out, if it was a due check. */
  private overdue: Holder | undefined;

  constructor(
    private readonly candidate: Candidate,
    /** Subscribed before our first acquire, so no announcement after it goes unheard. */
    private readonly events: KeyEvents,
    private readonly ttlMs: number,
    private readonly onLeader: LeaderListener,
    private readonly signal: AbortSignal,
  ) {}

  /** Resolves with the claim to lead on, once we won the key. */
  async follow(): Promise<Claim<RedisMembership>> {
    const { candidate, events, signal } = this;
    for (;;) {
      const holder = this.holder;
      if (!holder) {
        const result = await candidate.race(signal);
        if ("claim" in result) return result.claim;
        this.found(result.holder);
        this.checkHeard(result.holder);
        continue;
      }
      const event = await events.next(holder.goneBy + jitter(this.ttlMs, candidate.random), signal);
      if (!event) {
        // Its key must have run out by now, unless renewed unheard: the race tells.
        this.overdue = holder;
        this.holder = undefined;
        continue;
      }
      switch (event.kind) {
        case "acquired":
          if (event.token > holder.token) this.found({ name: event.name, token: event.token, goneBy: event.seenAt + event.ttlMs, ttlMs: event.ttlMs });
          break;
        case "renewed":
          holder.goneBy = event.seenAt + holder.ttlMs;
          break;
        case "released":
          if (event.token < holder.token) break;
          await this.vacant();
          break;
        case "gone":
          await this.vacant();
          break;
      }
    }
  }

  /**
   * The key is free. Every follower in a process heard the same release: they
   * race one per turn of the event loop, and one whose turn comes after the
   * winner's announcement arrived follows it instead of sending an acquire
   * that can only lose.
   */
  private async vacant(): Promise<void> {
    const previous = this.holder;
    this.holder = undefined;
    this.named = undefined;
    this.onLeader(undefined);
    await this.candidate.turns.next();
    this.signal.throwIfAborted();
    const since = this.events.newestAcquire(previous?.token ?? 0);
    if (since) this.found({ name: since.name, token: since.token, goneBy: since.seenAt + since.ttlMs, ttlMs: since.ttlMs });
  }

  /**
   * After a due check: a holder newer than the one that was due won the key
   * without our hearing its announcement. It may still be on its way (the
   * race's answer came on another connection); or the subscription's
   * connection went silent, and would miss every announcement from now on:
   * ask it to show that it still answers (one PING, only then).
   */
  private checkHeard(holder: Holder): void {
    const overdue = this.overdue;
    this.overdue = undefined;
    if (overdue && holder.token > overdue.token) this.events.probe();
  }

  /** `holder` holds the key: name it, if it is news. */
  private found(holder: Holder): void {
    this.holder = holder;
    const named = this.named;
    if (named?.token === holder.token && named.name === holder.name) return;
    this.named = { name: holder.name, token: holder.token };
    this.onLeader(this.named);
  }
}

/**
 * A follower's moment to race is spread over a few per cent of the TTL (at
 * most 50 ms), so that many followers do not all send their acquire in the
 * same millisecond; one wins either way.
 */
export function jitter(ttlMs: number, random: () => number): number {
  return random() * Math.min(50, ttlMs / 20);
}
