// What a simulated store held, and when: each membership (a key, and the
// name of the member it is) from its creation to its removal, in virtual
// time, and which removals were deletions from outside. The checker's view
// of the store (checker.ts) is read from it.
import type { Scheduler } from "../world";

interface Interval {
  name: string;
  from: number;
  to: number | undefined;
  /** When it was deleted from outside, if it was. */
  deletedFromOutsideAt?: number;
}

export class MembershipLog {
  private readonly byKey = new Map<string, Interval>();
  private readonly byName = new Map<string, Interval[]>();

  constructor(private readonly scheduler: Scheduler) {}

  /** The store created the membership `key` of member `name`. */
  held(key: string, name: string): void {
    const interval = { name, from: this.scheduler.now, to: undefined };
    this.byKey.set(key, interval);
    const intervals = this.byName.get(name) ?? [];
    intervals.push(interval);
    this.byName.set(name, intervals);
  }

  /** The store no longer holds `key` (deleted, expired, revoked). */
  released(key: string): void {
    const interval = this.byKey.get(key);
    if (!interval) return;
    interval.to ??= this.scheduler.now;
    this.byKey.delete(key);
  }

  /** `key` is being deleted from outside (an operator), not by its member or by expiry. */
  deletedFromOutside(key: string): void {
    const interval = this.byKey.get(key);
    if (interval) interval.deletedFromOutsideAt = this.scheduler.now;
  }

  nameOf(key: string): string {
    return this.byKey.get(key)?.name ?? key;
  }

  holders(): string[] {
    return [...this.byKey.values()].map((interval) => interval.name).sort();
  }

  heldDuring(name: string, from: number, to: number): boolean {
    return (this.byName.get(name) ?? []).some((interval) => interval.from <= to && (interval.to === undefined || interval.to >= from));
  }

  /** When the latest membership of `name` was deleted from outside, if it was (and none has been made since). */
  deletedFromOutsideAt(name: string): number | undefined {
    return this.byName.get(name)?.at(-1)?.deletedFromOutsideAt;
  }
}
