// redlock 5.0.0-beta.2 used as an election, on one Redis: a member leads
// while it runs inside `using([key], TTL, routine)` and the routine's signal
// has not aborted (using() extends the lock once 500 ms of it are left, and
// aborts the signal when an extension fails after the lock expired). A
// member that did not get the lock tries again after redlock's own default
// retry delay (200 ms plus up to 200 ms of jitter); each try is one
// attempt (retryCount 0), so that a stopped member stops trying at once.
// redlock cannot say who holds a lock: no `leader` events.
import type { Redis } from "ioredis";
import { SUBJECTS } from "./info";
import { REDIS_CLIENT_NOTE, redisClientFor } from "./ours-redis";
import type { Member, MemberListener, MemberSpec, Subject, SubjectRuntime } from "./types";
import { uniform } from "../util";

/** The signal using() hands its routine: aborted, it carries the failed extension's error. */
type RedlockAbortSignal = AbortSignal & { error?: Error };

/** The part of redlock's API used here (its types are not published for require()). */
interface Redlock {
  using(resources: string[], duration: number, routine: (signal: RedlockAbortSignal) => Promise<void>): Promise<void>;
  on(event: "error", listener: (err: Error) => void): void;
}

interface RedlockModule {
  default: new (clients: Redis[], settings: { retryCount: number }) => Redlock;
  /** A try that could not take the lock (every attempt refused). */
  ExecutionError: unknown;
  /** One client's refusal: the lock is taken. */
  ResourceLockedError: unknown;
}

/** Whether `err` is an instance of one of redlock's error classes. */
function isA(err: unknown, type: unknown): boolean {
  return typeof type === "function" && err instanceof type;
}

/** redlock's defaults for retryDelay and retryJitter. */
const RETRY_DELAY_MS = 200;
const RETRY_JITTER_MS = 200;

export const redlockSubject: Subject = {
  ...SUBJECTS.find((s) => s.id === "redlock")!,
  runtime(hosts: string[]): SubjectRuntime {
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    const redlock = require("redlock") as RedlockModule;
    return {
      clientNote: `${REDIS_CLIENT_NOTE}, one Redlock on it`,
      member: (spec, listener) => new RedlockMember(redlock, (spec.hosts ?? hosts)[0]!, spec, listener),
      async close() {},
    };
  },
};

class RedlockMember implements Member {
  readonly name: string;
  private readonly redis: Redis;
  private readonly redlock: Redlock;
  private readonly key: string;
  private readonly ttlMs: number;
  private started = false;
  private stopped = false;
  private leading = false;
  private timer: NodeJS.Timeout | undefined;
  /** Ends the routine: the member resigns, and using() releases the lock. */
  private resign: (() => void) | undefined;
  /** The using() call in flight: close() waits for its release. */
  private running: Promise<void> | undefined;

  private readonly lockTaken: RedlockModule["ExecutionError"];

  constructor(module: RedlockModule, url: string, spec: MemberSpec, private readonly listener: MemberListener) {
    this.name = spec.name;
    this.key = spec.key;
    this.ttlMs = Math.round(spec.ttl * 1000);
    this.lockTaken = module.ExecutionError;
    this.redis = redisClientFor(url, spec, listener);
    this.redlock = new module.default([this.redis], { retryCount: 0 });
    // redlock reports every refused attempt here too; without a listener an `error` event would throw.
    this.redlock.on("error", (err: Error) => {
      if (!isA(err, module.ResourceLockedError)) listener.error(`redlock: ${err.message}`);
    });
  }

  start(): void {
    if (this.started) return;
    this.started = true;
    this.attempt();
  }

  stop(): void {
    if (this.stopped) return;
    this.stopped = true;
    clearTimeout(this.timer);
    if (this.leading) {
      this.leading = false;
      this.listener.unelected("resigned");
    }
    this.resign?.();
  }

  async close(): Promise<void> {
    this.stop();
    await this.running;
    this.redis.disconnect();
  }

  isLeader(): boolean {
    return this.leading;
  }

  isRunning(): boolean {
    return this.started && !this.stopped;
  }

  private attempt(): void {
    this.running = this.redlock.using([this.key], this.ttlMs, (signal) => this.lead(signal)).then(
      () => this.later(),
      (err: Error) => {
        // A try that found the lock taken is the normal way of following.
        if (!isA(err, this.lockTaken)) this.listener.error(`using: ${err.message}`);
        this.later();
      },
    );
  }

  private async lead(signal: RedlockAbortSignal): Promise<void> {
    if (this.stopped) {
      this.listener.note("locked after stop");
      return;
    }
    this.leading = true;
    this.listener.elected();
    await new Promise<void>((resolve) => {
      this.resign = resolve;
      signal.addEventListener("abort", () => resolve());
    });
    this.resign = undefined;
    if (signal.aborted && this.leading) {
      this.leading = false;
      this.listener.unelected(`lock lost: ${signal.error?.message ?? "aborted"}`);
    }
  }

  private later(): void {
    this.running = undefined;
    if (this.stopped) return;
    this.timer = setTimeout(() => this.attempt(), RETRY_DELAY_MS + uniform(0, RETRY_JITTER_MS));
  }
}
