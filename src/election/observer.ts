// Discovery without campaigning: follows who leads an election without taking
// part in it, for services that only need to know where the leader is.
import { EventEmitter } from "eventemitter3";
import { checkOptions, checkSignal, emitSafely, onAbort, sleep, untilAborted } from "../util/abort";
import type { ElectionBackend, Leader } from "../contract/backend";
import { callBackend, leaderProblem } from "../contract/answers";
import { Backoff } from "../util/backoff";
import { systemClock, type Clock } from "../util/clock";
import { publishError, publishRetry } from "./diagnostics";
import { defineAsyncDispose } from "../util/dispose";
import { ElectionError } from "../contract/errors";
import { LeaderFeed, type LeaderChanges } from "../leadership/leader-feed";
import { log } from "../util/log";
import type { ResolvedOptions } from "./options";

export interface ObserverStartOptions {
  /** Ties the observer's life to this signal: when it aborts, the observer stops. */
  signal?: AbortSignal | undefined;
}

export interface ObserverEvents {
  /**
   * The leader's name and fencing token each time the leader changes (another
   * member, or the same name in a new term); both undefined while nobody leads.
   */
  leader: (name: string | undefined, token: number | undefined) => void;
  /** A store request failed; the observer retries by itself. */
  error: (error: ElectionError) => void;
}

export class LeaderObserver extends EventEmitter<ObserverEvents> {
  private controller: AbortController | undefined;
  private readonly leaders = new LeaderFeed();
  /** The follow loop under way, for asyncDispose to wait on. */
  private following: Promise<void> | undefined;
  private detachStartSignal: (() => void) | undefined;
  /** Iterators holding the observer open because an iterator started it. */
  private iterationHolds = 0;
  private startedByIteration = false;

  constructor(
    private readonly backend: ElectionBackend,
    private readonly options: ResolvedOptions,
    private readonly clock: Clock = systemClock,
    /** The jitter of its retries; a simulated world brings its own. */
    private readonly random: () => number = Math.random,
  ) {
    super();
  }

  /**
   * Starts following on the next tick. Calling it while running does nothing
   * (but an iterator's `break` no longer stops it); with a signal that has
   * aborted already, neither does it. Throws a TypeError, and changes
   * nothing, for options that are not an object or a signal that is not an
   * AbortSignal.
   */
  start(options?: ObserverStartOptions): this {
    const signal = checkSignal(checkOptions(options, "observer.start()").signal, "observer.start()");
    // Started by hand: an iterator's `break` no longer stops it.
    this.startedByIteration = false;
    if (this.controller) return this;
    if (signal?.aborted) return this;
    const controller = new AbortController();
    this.controller = controller;
    if (signal) this.detachStartSignal = onAbort(signal, () => this.stop());
    process.nextTick(() => {
      if (controller.signal.aborted) return;
      const following = this.follow(controller.signal);
      this.following = following;
      void following.finally(() => {
        if (this.following === following) this.following = undefined;
      });
    });
    return this;
  }

  stop(): this {
    this.controller?.abort(new Error("observer stopped"));
    this.controller = undefined;
    this.detachStartSignal?.();
    this.detachStartSignal = undefined;
    this.startedByIteration = false;
    this.leaders.forget();
    return this;
  }

  isRunning(): boolean {
    return this.controller !== undefined;
  }

  /** The leader's name as last seen; undefined while nobody leads or before the first answer. */
  currentLeader(): string | undefined {
    return this.leaders.latest.leader?.name;
  }

  /**
   * The leader as last seen (once known), then each change: `{ name, token }`,
   * or undefined while nobody leads. Unbounded buffer: a slow reader misses
   * nothing. Starts the observer if it is not running, and then stops it when
   * the last such iterator ends (`break`, or its signal aborts, after which
   * the next read rejects with an AbortError).
   */
  changes(options?: { signal?: AbortSignal | undefined }): LeaderChanges {
    const signal = checkSignal(checkOptions(options, "observer.changes()").signal, "observer.changes()");
    if (!this.isRunning() && !signal?.aborted) {
      this.start();
      this.startedByIteration = true;
    }
    const holds = this.startedByIteration;
    if (holds) this.iterationHolds++;
    return this.leaders.iterate({
      signal,
      onClose: () => {
        if (!holds) return;
        this.iterationHolds--;
        if (this.iterationHolds === 0 && this.startedByIteration) this.stop();
      },
    });
  }

  /** `for await (const leader of observer)`: see changes(). */
  [Symbol.asyncIterator](): LeaderChanges {
    return this.changes();
  }

  /** For `await using`: stops, and resolves once its watch is released (Symbol.asyncDispose). */
  declare [Symbol.asyncDispose]: () => Promise<void>;

  private async follow(signal: AbortSignal): Promise<void> {
    const backoff = new Backoff(this.options.retryInitialDelay, this.options.retryMaxDelay, this.random);
    while (!signal.aborted) {
      try {
        const onLeader = (leader: Leader | undefined) => {
          if (signal.aborted) return;
          const problem = leaderProblem(leader);
          if (problem) return this.report(new TypeError(`${this.store} reported a leader that ${problem}; it is ignored`), 1);
          backoff.reset();
          if (!this.leaders.publish(leader)) return;
          emitSafely(() => this.emit("leader", leader?.name, leader?.token));
        };
        // Cut short at the signal, even for a backend of the user's own that ignores it.
        await untilAborted("observe", callBackend(() => this.backend.observe(onLeader, signal)), signal);
        // observe() runs until its signal aborts: one that returns early would spin here.
        if (!signal.aborted) throw new Error(`${this.store}'s observe() returned before its signal aborted`);
      } catch (err) {
        if (signal.aborted) return;
        this.report(err, backoff.attempts + 1);
        const delayMs = backoff.next();
        publishRetry(() => ({ source: this, member: undefined, store: this.store, phase: "observe", attempt: backoff.attempts, delayMs, error: err }));
        await sleep(this.clock, delayMs, signal).catch(() => undefined);
      }
    }
  }

  private report(err: unknown, attempt: number): void {
    const error = new ElectionError("observe", attempt, err);
    log.observer("%s", error.message);
    publishError(() => ({ source: this, member: undefined, store: this.store, error }));
    emitSafely(() => this.emit("error", error));
  }

  private get store(): string {
    return this.backend.description ?? "custom backend";
  }
}

defineAsyncDispose(LeaderObserver, async function (this: LeaderObserver) {
  this.stop();
  // The follow loop settles soon after stop(); waiting for it means its watch is gone.
  await this["following"];
});
