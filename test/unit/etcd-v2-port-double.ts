// A hand-driven etcd v2 port for the recipe's pieces, without a store: every
// call is recorded and waits until the test answers it; a call whose signal
// aborts rejects with the signal's reason, as the port promises.
import type { EtcdV2Port, Found, GetOptions, NotFound, StoreNode, WaitAnswer } from "../../src/stores/etcd-v2/port";

export interface PendingCall<T> {
  readonly method: "createInOrder" | "get" | "setIfExists" | "delete" | "wait";
  readonly key: string;
  /** wait: the index it asks from, and whether it is recursive. */
  readonly fromIndex?: number;
  readonly recursive?: boolean;
  readonly options?: GetOptions;
  /** createInOrder and setIfExists: the value written (null: a refresh). */
  readonly value?: string | null;
  readonly signal: AbortSignal | undefined;
  answer(value: T): void;
  fail(err: unknown): void;
  /** Whether it was answered, failed, or abandoned by its signal. */
  readonly settled: boolean;
}

export class PortDouble implements EtcdV2Port {
  readonly calls: Array<PendingCall<unknown>> = [];

  createInOrder(_operation: string, dir: string, value: string, _ttl: number, signal: AbortSignal | undefined): Promise<Found> {
    return this.record({ method: "createInOrder", key: dir, value, signal });
  }

  get(_operation: string, key: string, options: GetOptions, signal: AbortSignal): Promise<Found | NotFound> {
    return this.record({ method: "get", key, options, signal });
  }

  setIfExists(_operation: string, key: string, value: string | null, _ttl: number, signal: AbortSignal | undefined): Promise<Found | NotFound> {
    return this.record({ method: "setIfExists", key, value, signal });
  }

  delete(_operation: string, key: string, signal: AbortSignal | undefined): Promise<boolean> {
    return this.record({ method: "delete", key, signal });
  }

  wait(key: string, fromIndex: number, recursive: boolean, signal: AbortSignal): Promise<WaitAnswer> {
    return this.record({ method: "wait", key, fromIndex, recursive, signal });
  }

  /** The calls not settled yet, of one method. */
  pending(method: PendingCall<unknown>["method"]): Array<PendingCall<unknown>> {
    return this.calls.filter((c) => c.method === method && !c.settled);
  }

  /** The one pending wait on `key` (recursive or not); throws if there is none, or more than one. */
  waitOn(key: string, recursive = false): PendingCall<WaitAnswer> {
    const waits = this.pending("wait").filter((c) => c.key === key && c.recursive === recursive);
    if (waits.length !== 1) throw new Error(`${waits.length} pending ${recursive ? "recursive " : ""}waits on ${key}: ${this.describe()}`);
    return waits[0] as PendingCall<WaitAnswer>;
  }

  describe(): string {
    return JSON.stringify(this.pending("wait").map((c) => [c.key, c.fromIndex, c.recursive]).concat(this.pending("get").map((c) => ["get", c.key])));
  }

  private record<T>(call: Omit<PendingCall<T>, "answer" | "fail" | "settled">): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      let settled = false;
      const onAbort = () => {
        settled = true;
        reject(call.signal!.reason);
      };
      const settle = () => {
        if (settled) throw new Error(`${call.method} ${call.key} settled twice`);
        settled = true;
        call.signal?.removeEventListener("abort", onAbort);
      };
      this.calls.push({
        ...call,
        answer: (value) => {
          settle();
          resolve(value as T);
        },
        fail: (err) => {
          settle();
          reject(err);
        },
        get settled() {
          return settled;
        },
      });
      if (call.signal?.aborted) onAbort();
      else call.signal?.addEventListener("abort", onAbort, { once: true });
    });
  }
}

/** A key's node, as etcd answers it: created at `createdIndex`, last written at `modifiedIndex`. */
export function node(key: string, createdIndex: number, modifiedIndex = createdIndex, value?: string): StoreNode {
  return value === undefined ? { key, createdIndex, modifiedIndex } : { key, value, createdIndex, modifiedIndex };
}

/** An event answered to a wait. */
export function event(action: string, eventNode: StoreNode): WaitAnswer {
  return { kind: "event", action, node: eventNode };
}

/** Lets every callback the answers set off run: promise jobs, then one turn of the event loop. */
export function settle(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}
