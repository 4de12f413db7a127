// Leader changes as an async iterable: `for await (const leader of observer)`
// or `election.leaderChanges()`. A feed holds the latest leader its owner
// (an observer or a member) knows of; each iterator gets its own queue.
//
// Buffering: an iterator's queue is unbounded, so a slow consumer loses no
// change and sees them in the order they happened. Each queued change is one
// small object; changes come at the pace of elections, not of data, so the
// queue only grows large if a consumer stops reading for good, and then
// `break`, `return()` or the signal frees it.
import type { Leader } from "../contract/backend";
import { onAbort } from "../util/abort";
import { abortError } from "./lost";

export class LeaderFeed {
  private known = false;
  private current: Leader | undefined;
  /** Made when the first iterator opens: most members never ask for one. */
  private iterators: Set<LeaderChanges> | undefined;

  /** The leader as last published; `known` is false before the first word and after forget(). */
  get latest(): { known: boolean; leader: Leader | undefined } {
    return { known: this.known, leader: this.current };
  }

  /** Records `leader` as the current one. True, and every open iterator told, if it differs from the last. */
  publish(leader: Leader | undefined): boolean {
    if (this.known && sameLeader(this.current, leader)) return false;
    this.known = true;
    this.current = leader;
    if (this.iterators) for (const iterator of this.iterators) iterator.push(leader);
    return true;
  }

  /** The owner stopped and no longer knows who leads; the next publish() counts as a change. */
  forget(): void {
    this.known = false;
    this.current = undefined;
  }

  /**
   * An iterator over the leader as known now (if known) and each change after
   * it. `onClose` runs once when it ends: `break`, `return()`, or the signal.
   */
  iterate(options: { signal?: AbortSignal | undefined; onClose?: () => void } = {}): LeaderChanges {
    const iterators = (this.iterators ??= new Set());
    const iterator = new LeaderChanges(() => {
      iterators.delete(iterator);
      options.onClose?.();
    }, options.signal);
    iterators.add(iterator);
    if (this.known) iterator.push(this.current);
    // Last: a signal that has aborted already ends the iterator at once,
    // which detaches it from this feed, so it must be attached by then.
    iterator.listen();
    return iterator;
  }
}

/**
 * One consumer's view of leader changes: each item is the leader (its name
 * and fencing token), or undefined while nobody leads as far as the source
 * knows. Never the same item twice in a row.
 */
export class LeaderChanges implements AsyncIterableIterator<Leader | undefined> {
  private readonly queue: Array<Leader | undefined> = [];
  private last: { leader: Leader | undefined } | undefined;
  /** Reads waiting for a change, oldest first (for await has at most one). */
  private readonly waiting: Array<{ resolve: (result: IteratorResult<Leader | undefined>) => void; reject: (error: unknown) => void }> = [];
  private ended: { error: unknown } | undefined;
  private stopListening: (() => void) | undefined;

  constructor(
    private readonly detach: () => void,
    private readonly signal?: AbortSignal,
  ) {}

  /** @internal Called by the feed once the iterator is attached: from now on the signal ends it (at once if it has aborted). */
  listen(): void {
    const { signal } = this;
    if (signal) this.stopListening = onAbort(signal, () => this.end(abortError(signal.reason)));
  }

  /** @internal Called by the feed. */
  push(leader: Leader | undefined): void {
    if (this.ended) return;
    if (this.last && sameLeader(this.last.leader, leader)) return;
    this.last = { leader };
    const waiting = this.waiting.shift();
    if (waiting) waiting.resolve({ value: leader, done: false });
    else this.queue.push(leader);
  }

  /** Changes not yet read. */
  get buffered(): number {
    return this.queue.length;
  }

  next(): Promise<IteratorResult<Leader | undefined>> {
    if (this.ended) {
      // An abort is reported once, by the next read; after that the iterator is simply done.
      const { error } = this.ended;
      this.ended = { error: undefined };
      return error === undefined ? Promise.resolve(done()) : Promise.reject(error);
    }
    if (this.queue.length > 0) return Promise.resolve({ value: this.queue.shift(), done: false });
    return new Promise((resolve, reject) => this.waiting.push({ resolve, reject }));
  }

  /** Ends the iteration (what `break` calls): releases the source and drops what was not read. */
  return(): Promise<IteratorResult<Leader | undefined>> {
    this.end(undefined);
    this.ended = { error: undefined };
    return Promise.resolve(done());
  }

  [Symbol.asyncIterator](): this {
    return this;
  }

  private end(error: unknown): void {
    if (this.ended) return;
    this.ended = { error };
    this.queue.length = 0;
    this.stopListening?.();
    this.detach();
    const waiting = this.waiting.splice(0);
    if (waiting.length === 0) return;
    this.ended = { error: undefined };
    waiting.forEach((read, i) => (i === 0 && error !== undefined ? read.reject(error) : read.resolve(done())));
  }
}

function done(): IteratorResult<Leader | undefined> {
  return { value: undefined, done: true };
}

export function sameLeader(a: Leader | undefined, b: Leader | undefined): boolean {
  if (a === undefined || b === undefined) return a === b;
  return a.name === b.name && a.token === b.token;
}
