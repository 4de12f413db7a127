// What an election member (or an observer, or a member of etcd-leader 0.0.1)
// emitted, in order, with the moment each event arrived, for in-process tests
// to assert on and wait for. Members in processes of their own are recorded by
// member-process.ts instead.
import { waitFor } from "./waiting";

export type RecordedEventName = "elected" | "unelected" | "leader" | "error";

export interface RecordedEvent {
  event: RecordedEventName;
  /** The event's argument: a token, a leader's name, an error; undefined for `unelected`. */
  value: unknown;
  /** performance.now() on arrival. */
  at: number;
}

/** Anything that emits the election events: Election, LeaderObserver, etcd-leader 0.0.1. */
export interface ElectionEmitter {
  // Each emitter types its own listeners; the recorder takes whatever they pass.
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  on(event: any, listener: (...args: any[]) => void): unknown;
}

export class EventRecorder {
  /** Every event so far, oldest first. */
  readonly seen: RecordedEvent[] = [];

  /** With `recordErrors: false`, `error` events are left to another listener (or to fail the test). */
  constructor(emitter: ElectionEmitter, private readonly who: string, { recordErrors = true }: { recordErrors?: boolean } = {}) {
    const record = (event: RecordedEventName) => (value?: unknown) => void this.seen.push({ event, value, at: performance.now() });
    emitter.on("elected", record("elected"));
    emitter.on("unelected", record("unelected"));
    emitter.on("leader", record("leader"));
    if (recordErrors) emitter.on("error", record("error"));
  }

  all(event: RecordedEventName): RecordedEvent[] {
    return this.seen.filter((s) => s.event === event);
  }

  values(event: RecordedEventName): unknown[] {
    return this.all(event).map((s) => s.value);
  }

  /** The fencing tokens of the terms won, in order. */
  get elected(): number[] {
    return this.values("elected") as number[];
  }

  /** Each leader named by a `leader` event, in order. */
  get leaders(): Array<string | undefined> {
    return this.values("leader") as Array<string | undefined>;
  }

  get lastLeader(): string | undefined {
    return this.leaders.at(-1);
  }

  get errors(): Error[] {
    return this.values("error") as Error[];
  }

  /** A position in `seen`, to wait for events that come after it. */
  get mark(): number {
    return this.seen.length;
  }

  /** The first `event` recorded at or after position `from` of `seen` that `accept`s, waiting up to `ms` for it. */
  next(event: RecordedEventName, ms: number, from = 0, accept: (value: unknown) => boolean = () => true): Promise<RecordedEvent> {
    return waitFor(`${this.who}: ${event}`, ms, () => this.seen.slice(from).find((s) => s.event === event && accept(s.value)));
  }
}
