// A backend wrapped so that a test can choose the moment things happen: hold
// a call before it reaches the store, hold an answer after the store gave it,
// or cut the member off so that nothing it asks is ever answered. The wrapped
// backend still does all the store's work; only the timing changes.
import type { ElectionBackend, LeaderListener } from "../../../src/contract/backend";

type Method = "join" | "awaitTurn" | "renew" | "awaitLoss" | "leave" | "observe" | "readLeader";

/** A point calls wait at until it opens; once open it holds nothing more. */
export class Gate {
  private opened = false;
  private readonly waiting: Array<() => void> = [];
  private firstArrival!: () => void;
  /** Resolves when the first call arrives at the gate. */
  readonly reached = new Promise<void>((resolve) => (this.firstArrival = resolve));

  pass(): Promise<void> {
    this.firstArrival();
    if (this.opened) return Promise.resolve();
    return new Promise((resolve) => this.waiting.push(resolve));
  }

  open(): void {
    this.opened = true;
    for (const release of this.waiting.splice(0)) release();
  }
}

export class InterceptedBackend {
  readonly backend: ElectionBackend;
  private cut = false;
  private readonly beforeCall = new Map<Method, Gate>();
  private readonly beforeAnswer = new Map<Method, Gate>();

  constructor(inner: ElectionBackend) {
    const join = inner.join?.bind(inner);
    this.backend = {
      ...(inner.description === undefined ? {} : { description: inner.description }),
      ...(join ? { join: (signal: AbortSignal) => this.call("join", signal, () => join(signal)) } : {}),
      awaitTurn: (joined, onLeader, signal) =>
        this.call("awaitTurn", signal, () => inner.awaitTurn(joined, this.unlessCut(onLeader), signal)),
      renew: (membership, signal) => this.call("renew", signal, () => inner.renew(membership, signal)),
      awaitLoss: (membership, signal) => this.call("awaitLoss", signal, () => inner.awaitLoss(membership, signal)),
      leave: (membership, signal) => this.call("leave", signal, () => inner.leave(membership, signal)),
      observe: (onLeader, signal) => this.call("observe", signal, () => inner.observe(this.unlessCut(onLeader), signal)),
      readLeader: (signal) => this.call("readLeader", signal, () => inner.readLeader(signal)),
    };
  }

  /** Calls of `method` from now on wait, before the store sees them, until the gate opens. */
  holdCalls(method: Method): Gate {
    return this.install(this.beforeCall, method);
  }

  /** Answers of `method` from now on (the store has acted) wait until the gate opens. */
  holdAnswers(method: Method): Gate {
    return this.install(this.beforeAnswer, method);
  }

  /** From now on no call reaches the store and no answer, nor any leader report, comes back; calls end only when their signal aborts. */
  cutOff(): void {
    this.cut = true;
  }

  /** Opens every gate, so that nothing stays held once a test is over. */
  openAll(): void {
    for (const gate of [...this.beforeCall.values(), ...this.beforeAnswer.values()]) gate.open();
  }

  private install(gates: Map<Method, Gate>, method: Method): Gate {
    gates.get(method)?.open();
    const gate = new Gate();
    gates.set(method, gate);
    return gate;
  }

  private async call<T>(method: Method, signal: AbortSignal, run: () => Promise<T>): Promise<T> {
    await this.beforeCall.get(method)?.pass();
    if (this.cut) return unanswered(signal);
    let answer: { value: T } | { error: unknown };
    try {
      answer = { value: await run() };
    } catch (error) {
      answer = { error };
    }
    await this.beforeAnswer.get(method)?.pass();
    if (this.cut) return unanswered(signal);
    if ("error" in answer) throw answer.error;
    return answer.value;
  }

  private unlessCut(onLeader: LeaderListener): LeaderListener {
    return (leader) => {
      if (!this.cut) onLeader(leader);
    };
  }
}

/** What a request across a partition gets: nothing, until its owner gives up. */
function unanswered(signal: AbortSignal): Promise<never> {
  return new Promise((_, reject) => {
    if (signal.aborted) return reject(signal.reason);
    signal.addEventListener("abort", () => reject(signal.reason), { once: true });
  });
}
