// What one election member reported, in order, with when: the one record of a
// member's events that tests assert on and wait for, and that the history
// checker (leadership-history.ts) reads.
//
// An in-process member (an Election, a LeaderObserver, a member of
// etcd-leader 0.0.1) is recorded from the events it emits, stamped with
// performance.now() on arrival. A member that runs as the `etcd-leader`
// command (cli-process.ts, member-process.ts) is recorded from the state
// reports it prints (run --json; --verbose adds the renewals and the
// command's steps), stamped with the time the CLI wrote in each (Date.now()
// scale, so that members in different processes compare), and with its exit.
import type { HistoryEvent, MemberHistory } from "./leadership-history";
import { waitFor } from "./waiting";

/** What an election emits. */
export type ElectionEventName = "elected" | "unelected" | "leader" | "error";

/** The command's other state reports (src/cli/commands/run.ts), kept with their fields as printed. */
export type CliStepName =
  | "joining"
  | "left"
  | "command-start"
  | "command-stop"
  | "command-runs-on"
  | "command-exit"
  | "hook-start"
  | "hook-ok"
  | "hook-failed"
  | "error-state"
  | "health"
  | "metrics"
  | "yield"
  | "yielded";

export type RecordedEventName = ElectionEventName | "renewed" | "exit" | CliStepName;

/** A report of the command other than the election's own events: what it printed, its fields as they are. */
export type CliStepEvent = { event: CliStepName; value: undefined; at: number } & Record<string, unknown>;

export type RecordedEvent =
  /** `value`: the term's fencing token. From the command also `until`: the lease deadline it believes (ms). */
  | { event: "elected"; value: number; at: number; until?: number }
  | { event: "unelected"; value: undefined; at: number }
  /** `value`: whom it names as the leader (undefined: an observer that sees nobody lead). */
  | { event: "leader"; value: string | undefined; at: number }
  /** `value`: the error (from the command, an Error with the message it printed). */
  | { event: "error"; value: Error; at: number }
  /** The command renewed its lease: it believes it leads until `until` (ms). */
  | { event: "renewed"; value: undefined; at: number; until: number }
  /** The command's process ended: recorded last, once its output has been read. */
  | { event: "exit"; value: undefined; at: number; code: number | null; signal: NodeJS.Signals | null }
  | CliStepEvent;

/** The recorded event named `N`, typed. */
export type EventNamed<N extends RecordedEventName> = N extends CliStepName ? CliStepEvent : Extract<RecordedEvent, { event: N }>;

/** Anything that emits the election events: Election, LeaderObserver, etcd-leader 0.0.1. */
export interface ElectionEmitter {
  // Each emitter types its own listeners; the recorder takes whatever they pass.
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  on(event: any, listener: (...args: any[]) => void): unknown;
}

export interface WaitForEventOptions {
  /** Only events at or after this position of `seen` count (default 0: those already recorded count too). */
  from?: number;
  /** Ends the wait early. */
  signal?: AbortSignal;
}

export class EventRecorder {
  /** Every event so far, oldest first. */
  readonly seen: RecordedEvent[] = [];

  /**
   * Records what `emitter` emits from now on; without one, the events come
   * through record() (a process's reports). With `recordErrors: false`,
   * `error` events are left to another listener (or to fail the test).
   */
  constructor(emitter: ElectionEmitter | undefined, readonly who: string, { recordErrors = true }: { recordErrors?: boolean } = {}) {
    if (!emitter) return;
    const at = () => performance.now();
    emitter.on("elected", (token: number) => this.record({ event: "elected", value: token, at: at() }));
    emitter.on("unelected", () => this.record({ event: "unelected", value: undefined, at: at() }));
    emitter.on("leader", (leader: string | undefined) => this.record({ event: "leader", value: leader, at: at() }));
    if (recordErrors) emitter.on("error", (error: Error) => this.record({ event: "error", value: error, at: at() }));
  }

  record(event: RecordedEvent): void {
    this.seen.push(event);
  }

  /** Every `event` recorded (at or after position `from` of `seen`), oldest first. */
  all<N extends RecordedEventName>(event: N, from = 0): Array<EventNamed<N>> {
    return this.seen.slice(from).filter((s): s is EventNamed<N> => s.event === event);
  }

  values(event: RecordedEventName): unknown[] {
    return this.all(event).map((s) => s.value);
  }

  count(event: RecordedEventName): number {
    return this.all(event).length;
  }

  /** When it last reported `event`; throws if it never did. */
  lastAt(event: RecordedEventName): number {
    const found = this.all(event).at(-1);
    if (!found) throw new Error(`${this.who} never reported ${event}`);
    return found.at;
  }

  /** The fencing tokens of the terms won, in order. */
  get elected(): number[] {
    return this.all("elected").map((s) => s.value);
  }

  /** Each leader named by a `leader` event, in order. */
  get leaders(): Array<string | undefined> {
    return this.all("leader").map((s) => s.value);
  }

  get lastLeader(): string | undefined {
    return this.leaders.at(-1);
  }

  get errors(): Error[] {
    return this.all("error").map((s) => s.value);
  }

  /** A position in `seen`, to wait for events that come after it. */
  get mark(): number {
    return this.seen.length;
  }

  /** True if its latest word on leadership is that it leads. */
  isLeaderNow(): boolean {
    for (let i = this.seen.length - 1; i >= 0; i--) {
      const { event } = this.seen[i]!;
      if (event === "elected") return true;
      if (event === "unelected" || event === "exit") return false;
    }
    return false;
  }

  /** What bears on leadership, for checkHistories: terms, the deadlines believed, errors, the exit. */
  history(): MemberHistory {
    return { member: this.who, events: this.seen.flatMap(historyEvents) };
  }

  /** The first `event` recorded at or after position `from` of `seen` that `accept`s its value, waiting up to `ms` for it. */
  next<N extends RecordedEventName>(event: N, ms: number, from = 0, accept: (value: EventNamed<N>["value"]) => boolean = () => true): Promise<EventNamed<N>> {
    return this.nextMatching(event, ms, (s): s is EventNamed<N> => s.event === event && accept(s.value as EventNamed<N>["value"]), { from });
  }

  /** The first event (from position `from` on) that `matches`, waiting up to `ms`; `what` names it in the failure. */
  nextMatching<E extends RecordedEvent = RecordedEvent>(
    what: string,
    ms: number,
    matches: ((event: RecordedEvent) => event is E) | ((event: RecordedEvent) => boolean),
    { from = 0, signal }: WaitForEventOptions = {},
  ): Promise<E> {
    let checked = from;
    return this.until(what, ms, () => {
      for (; checked < this.seen.length; checked++) {
        const event = this.seen[checked]!;
        if (matches(event)) return event as E;
      }
      return undefined;
    }, signal);
  }

  /** Waits for `probe` (kit waitFor), failing early, with this member's recent output, once it can report nothing more. */
  until<T>(what: string, ms: number, probe: () => T, signal?: AbortSignal): Promise<NonNullable<T>> {
    return waitFor(`${this.who}: ${what}`, ms, probe, {
      ...(signal ? { signal } : {}),
      hopeless: () => (this.ended() ? "it exited first" : undefined),
      detail: () => this.describe(),
    });
  }

  /** For failure messages: its latest events (a process adds its output). */
  describe(): string {
    return this.seen
      .slice(-10)
      .map((s) => `  ${this.who}| ${s.event}${s.value === undefined ? "" : ` ${s.value instanceof Error ? s.value.message : String(s.value)}`}`)
      .join("\n");
  }

  /** Whether it can report nothing more: a process's exit is recorded. */
  protected ended(): boolean {
    return this.seen.at(-1)?.event === "exit";
  }
}

/**
 * The first event matching `matches` among `members`' events (those already
 * recorded count), waiting up to `ms`: the member and the event.
 */
export function firstOf<M extends EventRecorder>(
  members: readonly M[],
  what: string,
  ms: number,
  matches: (event: RecordedEvent, member: M) => boolean,
  { signal }: { signal?: AbortSignal } = {},
): Promise<{ member: M; event: RecordedEvent }> {
  return waitFor(
    what,
    ms,
    () => {
      for (const member of members) {
        const event = member.seen.find((e) => matches(e, member));
        if (event) return { member, event };
      }
      return undefined;
    },
    {
      ...(signal ? { signal } : {}),
      hopeless: () => (members.every((m) => m.seen.at(-1)?.event === "exit") ? "every member exited first" : undefined),
      detail: () => members.map((m) => m.describe()).join("\n"),
    },
  );
}

/** The deadline a member believed it led until, said with this event (elected or renewed, from the command); else undefined. */
export function believedUntil(event: RecordedEvent): number | undefined {
  return event.event === "elected" || event.event === "renewed" ? event.until : undefined;
}

function historyEvents(s: RecordedEvent): HistoryEvent[] {
  switch (s.event) {
    case "elected":
      return [{ type: "elected", at: s.at, token: s.value }, ...(s.until === undefined ? [] : [{ type: "believed" as const, at: s.at, until: s.until }])];
    case "renewed":
      return [{ type: "believed", at: s.at, until: s.until }];
    case "unelected":
      return [{ type: "unelected", at: s.at }];
    case "error":
      return [{ type: "error", at: s.at, message: s.value.message }];
    case "exit":
      return [{ type: "exit", at: s.at, code: s.code, signal: s.signal }];
    default:
      return [];
  }
}
