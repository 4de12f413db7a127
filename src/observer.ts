// Discovery without campaigning: follows who leads an election without taking
// part in it, for services that only need to know where the leader is.
import { EventEmitter } from "eventemitter3";
import { emitSafely, sleep } from "./abort";
import type { ElectionBackend } from "./backend";
import { Backoff } from "./backoff";
import { systemClock, type Clock } from "./clock";
import { ElectionError } from "./errors";
import { log } from "./log";
import type { ResolvedOptions } from "./options";

export interface ObserverEvents {
  /** The leader's name each time it changes; undefined while nobody leads. */
  leader: (name: string | undefined) => void;
  /** A store request failed; the observer retries by itself. */
  error: (error: ElectionError) => void;
}

export class LeaderObserver extends EventEmitter<ObserverEvents> {
  private controller: AbortController | undefined;
  private leaderName: string | undefined;
  private known = false;

  constructor(
    private readonly backend: ElectionBackend,
    private readonly options: ResolvedOptions,
    private readonly clock: Clock = systemClock,
  ) {
    super();
  }

  start(): this {
    if (this.controller) return this;
    const controller = new AbortController();
    this.controller = controller;
    process.nextTick(() => void this.follow(controller.signal));
    return this;
  }

  stop(): this {
    this.controller?.abort(new Error("observer stopped"));
    this.controller = undefined;
    this.leaderName = undefined;
    this.known = false;
    return this;
  }

  isRunning(): boolean {
    return this.controller !== undefined;
  }

  /** The leader's name as last seen; undefined while nobody leads or before the first answer. */
  currentLeader(): string | undefined {
    return this.leaderName;
  }

  private async follow(signal: AbortSignal): Promise<void> {
    const backoff = new Backoff(this.options.retryInitialDelay, this.options.retryMaxDelay);
    while (!signal.aborted) {
      try {
        await this.backend.observe((name) => {
          if (signal.aborted) return;
          backoff.reset();
          if (this.known && name === this.leaderName) return;
          this.known = true;
          this.leaderName = name;
          emitSafely(() => this.emit("leader", name));
        }, signal);
      } catch (err) {
        if (signal.aborted) return;
        const error = new ElectionError("observe", backoff.attempts + 1, err);
        log.observer("%s", error.message);
        emitSafely(() => this.emit("error", error));
        await sleep(this.clock, backoff.next(), signal).catch(() => undefined);
      }
    }
  }
}
