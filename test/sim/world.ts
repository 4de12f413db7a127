// The simulated world: virtual time, one seeded random source, and the
// processes that live in it. Everything the real election code does with
// time goes through a Clock (src/util/clock.ts) and a TurnQueue
// (src/util/turns.ts); here both are turned by one scheduler, so that a run is
// a pure function of its seed: the same seed gives the same events in the
// same order, byte for byte.
//
// Between two events the scheduler lets every promise callback and nextTick
// that the last one set off run to the end (one real setImmediate, the only
// real timer a simulation uses), so that an event sees all the effects of the
// ones before it, as on a real event loop, where an answer's continuations
// run before the next I/O.
import type { Clock } from "../../src/util/clock";
import { TurnQueue } from "../../src/util/turns";

/** A small, fast, seedable generator (sfc32, seeded through splitmix32): the same seed, the same numbers. */
export class Random {
  private a: number;
  private b: number;
  private c: number;
  private d: number;

  constructor(seed: number) {
    let s = seed >>> 0;
    const split = () => {
      s = (s + 0x9e3779b9) >>> 0;
      let z = s;
      z = Math.imul(z ^ (z >>> 16), 0x85ebca6b) >>> 0;
      z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35) >>> 0;
      return (z ^ (z >>> 16)) >>> 0;
    };
    this.a = split();
    this.b = split();
    this.c = split();
    this.d = split();
    for (let i = 0; i < 12; i++) this.next();
  }

  /** A number in [0, 1). */
  next(): number {
    const t = (((this.a + this.b) >>> 0) + this.d) >>> 0;
    this.d = (this.d + 1) >>> 0;
    this.a = this.b ^ (this.b >>> 9);
    this.b = (this.c + (this.c << 3)) >>> 0;
    this.c = ((this.c << 21) | (this.c >>> 11)) >>> 0;
    this.c = (this.c + t) >>> 0;
    return t / 4294967296;
  }

  /** An integer in [0, n). */
  below(n: number): number {
    return Math.floor(this.next() * n);
  }

  /** A number in [min, max). */
  between(min: number, max: number): number {
    return min + this.next() * (max - min);
  }

  chance(p: number): boolean {
    return this.next() < p;
  }

  pick<T>(items: readonly T[]): T {
    return items[this.below(items.length)]!;
  }

  /** A generator of its own, drawn from this one: a part of the world that draws numbers without shifting the others'. */
  fork(): Random {
    return new Random(Math.floor(this.next() * 4294967296));
  }

  /** `() => number`, for code that takes a random source. */
  get source(): () => number {
    return () => this.next();
  }
}

interface Scheduled {
  at: number;
  seq: number;
  run: () => void;
  cancelled: boolean;
}

/** Events in virtual time, run in order of time, then of scheduling. */
export class Scheduler {
  private time = 0;
  private seq = 0;
  private readonly heap: Scheduled[] = [];
  /** Events run so far. */
  events = 0;

  get now(): number {
    return this.time;
  }

  /** Runs `run` at virtual time `at` (not before now). */
  at(at: number, run: () => void): Scheduled {
    const event: Scheduled = { at: Math.max(at, this.time), seq: this.seq++, run, cancelled: false };
    this.push(event);
    return event;
  }

  cancel(event: Scheduled | undefined): void {
    if (event) event.cancelled = true;
  }

  /**
   * Runs events until virtual time reaches `until`, or none is left; after
   * each, the promise callbacks it set off run to the end. `afterEach` runs
   * after each event's effects, for the checker; `done`, checked before each
   * event, ends the run early (virtual time then stays where it is).
   */
  async runUntil(until: number, afterEach?: () => void, done?: () => boolean): Promise<void> {
    // What was set off before the call (a member started from outside any
    // event) schedules its events first, even when none is due yet.
    await drain();
    for (;;) {
      if (done?.()) return;
      const next = this.peek();
      if (!next || next.at > until) break;
      this.pop();
      if (next.cancelled) continue;
      this.time = next.at;
      this.events++;
      next.run();
      await drain();
      afterEach?.();
    }
    this.time = Math.max(this.time, until);
  }

  /** Whether any event is left to run. */
  get idle(): boolean {
    while (this.heap.length > 0 && this.heap[0]!.cancelled) this.pop();
    return this.heap.length === 0;
  }

  private peek(): Scheduled | undefined {
    return this.heap[0];
  }

  private before(x: Scheduled, y: Scheduled): boolean {
    return x.at < y.at || (x.at === y.at && x.seq < y.seq);
  }

  private push(event: Scheduled): void {
    const heap = this.heap;
    heap.push(event);
    let i = heap.length - 1;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (!this.before(heap[i]!, heap[parent]!)) break;
      [heap[i], heap[parent]] = [heap[parent]!, heap[i]!];
      i = parent;
    }
  }

  private pop(): Scheduled | undefined {
    const heap = this.heap;
    const top = heap[0];
    const last = heap.pop();
    if (heap.length > 0 && last) {
      heap[0] = last;
      let i = 0;
      for (;;) {
        const l = 2 * i + 1;
        const r = l + 1;
        let m = i;
        if (l < heap.length && this.before(heap[l]!, heap[m]!)) m = l;
        if (r < heap.length && this.before(heap[r]!, heap[m]!)) m = r;
        if (m === i) break;
        [heap[i], heap[m]] = [heap[m]!, heap[i]!];
        i = m;
      }
    }
    return top;
  }
}

/** Lets every promise callback and nextTick set off so far run to the end. */
export function drain(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}

/** The wall-clock date a simulated run starts at, for what is reported as a date. */
const EPOCH_MS = Date.UTC(2026, 0, 1);

/**
 * A process of the world: its own monotonic clock, which may run a little
 * fast or slow against virtual time, and may be paused (SIGSTOP, a long GC):
 * while it is, nothing of it runs, and what was due runs when it resumes,
 * its clock having moved on meanwhile, as a real process finds it on waking.
 */
export class SimProcess implements Clock {
  private pausedUntil = 0;
  private dead = false;
  /** Events held while the process was paused, in the order they came due. */
  private held: Array<() => void> = [];
  readonly turns: TurnQueue;

  constructor(
    readonly name: string,
    private readonly scheduler: Scheduler,
    /** How fast this process's clock runs against virtual time (1 ± a little). */
    readonly rate = 1,
    /** Where its monotonic clock starts. */
    private readonly origin = 1_000,
  ) {
    this.turns = new TurnQueue((callback) => this.later(callback));
  }

  /** This process's monotonic clock. */
  now(): number {
    return this.origin + this.scheduler.now * this.rate;
  }

  wallNow(): number {
    return EPOCH_MS + this.scheduler.now;
  }

  setTimeout(callback: () => void, ms: number): unknown {
    // A timer that came due while the process was paused waits among what it
    // holds; cleared meanwhile (by what ran before it on waking), it does not
    // run, as a cleared Node.js timer never does.
    const timer: Scheduled = this.scheduler.at(this.scheduler.now + Math.max(0, ms) / this.rate, () =>
      this.run(() => {
        if (!timer.cancelled) callback();
      }),
    );
    return timer;
  }

  clearTimeout(handle: unknown): void {
    this.scheduler.cancel(handle as Scheduled);
  }

  later(callback: () => void): void {
    this.scheduler.at(this.scheduler.now, () => this.run(callback));
  }

  /** Runs `callback` as this process: now, or when it resumes if it is paused; never once it is dead. */
  run(callback: () => void): void {
    if (this.dead) return;
    if (this.scheduler.now < this.pausedUntil) this.held.push(callback);
    else callback();
  }

  /** Dies where it stands (SIGKILL): nothing of it runs again. */
  kill(): void {
    this.dead = true;
    this.held = [];
  }

  get alive(): boolean {
    return !this.dead;
  }

  get paused(): boolean {
    return this.scheduler.now < this.pausedUntil;
  }

  /** Freezes the process for `ms` of virtual time. */
  pause(ms: number): void {
    const until = this.scheduler.now + ms;
    if (until <= this.pausedUntil) return;
    this.pausedUntil = until;
    this.scheduler.at(until, () => this.resume());
  }

  private resume(): void {
    if (this.paused) return;
    const held = this.held;
    this.held = [];
    // What came due while frozen runs now, in order, each a turn of its own.
    for (const callback of held) this.scheduler.at(this.scheduler.now, callback);
  }
}
