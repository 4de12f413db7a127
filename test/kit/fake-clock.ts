// A hand-driven monotonic clock for the state machine's timer logic. Time only
// moves in advance(); between timers, pending promise callbacks get to run.
import type { Clock } from "../../src/util/clock";

interface Timer {
  id: number;
  at: number;
  callback: () => void;
}

export class FakeClock implements Clock {
  private time = 1_000;
  private nextId = 1;
  private readonly timers = new Map<number, Timer>();

  now(): number {
    return this.time;
  }

  setTimeout(callback: () => void, ms: number): unknown {
    const timer = { id: this.nextId++, at: this.time + Math.max(0, ms), callback };
    this.timers.set(timer.id, timer);
    return timer.id;
  }

  clearTimeout(handle: unknown): void {
    this.timers.delete(handle as number);
  }

  get pendingTimers(): number {
    return this.timers.size;
  }

  /** Moves time forward by `ms`, running each timer that falls due, in order. */
  async advance(ms: number): Promise<void> {
    const target = this.time + ms;
    await settle();
    for (;;) {
      const due = [...this.timers.values()].filter((t) => t.at <= target).sort((a, b) => a.at - b.at || a.id - b.id)[0];
      if (!due) break;
      this.timers.delete(due.id);
      this.time = Math.max(this.time, due.at);
      due.callback();
      await settle();
    }
    this.time = target;
    await settle();
  }

  /** Moves time without running any timer: a process frozen by SIGSTOP, seen from inside. */
  jump(ms: number): void {
    this.time += ms;
  }
}

/** Lets every pending promise callback and nextTick run. */
export async function settle(): Promise<void> {
  for (let i = 0; i < 5; i++) await new Promise((resolve) => setImmediate(resolve));
}
