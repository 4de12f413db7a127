// What happened in a run, in virtual time: the faults as they came, what the
// members said (elected, unelected, whom they named, their errors) and the
// violations. Kept short unless asked for in full (a replay): the last lines
// are the ones that explain a violation, and the checker stops a seed's
// violations at one per rule.
import type { Scheduler } from "./world";

/** Lines kept when the trace is not kept in full. */
const TAIL = 400;

export class Trace {
  private readonly kept: string[] = [];
  private dropped = 0;

  constructor(
    private readonly scheduler: Scheduler,
    private readonly full: boolean,
  ) {}

  note(text: string): void {
    this.kept.push(`${this.scheduler.now.toFixed(3).padStart(10)} ms  ${text}`);
    if (!this.full && this.kept.length > 2 * TAIL) {
      this.dropped += this.kept.length - TAIL;
      this.kept.splice(0, this.kept.length - TAIL);
    }
  }

  /** The lines kept, oldest first; the first says how many came before, if any were dropped. */
  lines(): string[] {
    return this.dropped > 0 ? [`(${this.dropped} earlier lines not kept)`, ...this.kept] : [...this.kept];
  }
}
