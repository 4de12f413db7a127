// A simulated server frozen as by SIGSTOP: while it is, what it is asked to
// do waits, in order, and runs when it thaws. Each simulated store keeps one
// and serves its requests through it, and draws the pause as a fault
// (serverPausedFault).
import type { StoreFault } from "../store";

export class FrozenWork {
  /** While frozen: what the server will do when it thaws, in order. */
  private work: Array<() => void> | undefined;

  get frozen(): boolean {
    return this.work !== undefined;
  }

  freeze(): void {
    this.work ??= [];
  }

  /** Thaws: what came meanwhile runs, in order. */
  thaw(): void {
    const work = this.work;
    this.work = undefined;
    for (const run of work ?? []) run();
  }

  /** Runs `operation` now, or once thawed if frozen (the answer is then a promise settled with it). */
  serve<T>(operation: () => T): T | Promise<T> {
    const work = this.work;
    if (!work) return operation();
    return new Promise<T>((resolve, reject) => {
      work.push(() => {
        try {
          resolve(operation());
        } catch (err) {
          reject(err);
        }
      });
    });
  }
}

/** A simulated server that can be paused (SIGSTOP) and resumed. */
export interface PausableServer {
  readonly paused: boolean;
  pause(): void;
  resume(): void;
}

/**
 * The store's fault "server paused": `server` freezes, mostly for a moment
 * (10 to 500 ms), sometimes for up to 1.5 TTLs, and resumes on its own. A
 * server already paused is left as it is.
 */
export function serverPausedFault(server: PausableServer, name: string, ttlMs: number): StoreFault {
  return {
    kind: "server paused",
    weight: 1,
    apply: (context) => {
      if (server.paused) return;
      const ms = context.random.chance(0.7) ? context.random.between(10, 500) : context.random.between(500, 1.5 * ttlMs);
      context.note(`${name} paused (SIGSTOP) for ${ms.toFixed(0)} ms`);
      server.pause();
      context.scheduler.at(context.scheduler.now + ms, () => server.resume());
    },
  };
}
