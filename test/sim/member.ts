// A member of a simulated election: the real Election, on a backend the
// simulated store made for it, in a process of the simulated world, with a
// whileLeading() routine that runs for as long as its signal lets it. A crash
// ends the process where it stands: nothing of it runs again, and what it
// held on the store stays until its time to live runs out.
import type { ElectionBackend } from "../../src/contract/backend";
import { Election } from "../../src/election/election";
import type { ResolvedOptions } from "../../src/election/options";
import type { Random, SimProcess } from "./world";

export class SimMember {
  readonly election: Election;
  /** Whether a whileLeading() routine of this member runs with a signal that has not aborted. */
  routineRunning = false;
  /** The token of the term its routine runs in, while it does. */
  termToken: number | undefined;
  private crashed = false;
  private scope: Promise<unknown> | undefined;

  constructor(
    readonly name: string,
    readonly process: SimProcess,
    backend: ElectionBackend,
    options: ResolvedOptions,
    random: Random,
  ) {
    this.election = new Election(backend, name, options, process, random.source);
  }

  /** Alive: not crashed. A crashed member's election object says nothing about the world any more. */
  get alive(): boolean {
    return !this.crashed;
  }

  start(): void {
    if (this.crashed) return;
    this.election.start();
    if (this.scope) return;
    const scope = this.election
      .whileLeading(async ({ signal, token }) => {
        this.routineRunning = true;
        this.termToken = token;
        await new Promise<void>((resolve) => {
          if (signal.aborted) resolve();
          else signal.addEventListener("abort", () => resolve(), { once: true });
        });
        this.routineRunning = false;
        this.termToken = undefined;
      })
      .catch(() => undefined)
      .finally(() => {
        if (this.scope === scope) this.scope = undefined;
      });
    this.scope = scope;
  }

  /** A clean stop: leave() (the membership is given back), not awaited. */
  stop(): Promise<void> {
    return this.election.leave();
  }

  /** The process dies where it stands (SIGKILL): nothing of it runs again. */
  crash(): void {
    this.crashed = true;
    this.routineRunning = false;
    this.process.kill();
  }
}
