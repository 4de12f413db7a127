// Seams that break the election on purpose, for the simulation to show that
// its checker finds each break within a stated number of seeds. These break
// what every store shares (the term, the margin); each store adds those of
// its own recipe (stores/*.ts). Patches act on the real classes, for one run,
// and are undone after it.
import { Term } from "../../src/leadership/term";
import type { Clock } from "../../src/util/clock";
import type { Mutation } from "./store";

/** Replaces a method of `prototype` for a run; returns the undo. */
export function patch<T extends object, K extends keyof T>(prototype: T, name: K, replace: (original: T[K]) => T[K]): () => void {
  const original = prototype[name];
  prototype[name] = replace(original);
  return () => {
    prototype[name] = original;
  };
}

interface TermInside {
  clock: Clock;
  ended: boolean;
  deadline: number;
  horizon: number;
  arm(): void;
}

export const sharedMutations: readonly Mutation[] = [
  {
    name: "deadline-from-answer",
    description: "a renewal moves the deadline from when its answer came, not from when it was sent",
    patch: () =>
      patch(Term.prototype, "extend", (extend) =>
        function (this: Term, _sentAt: number) {
          extend.call(this, (this as unknown as TermInside).clock.now());
        },
      ),
  },
  {
    name: "no-step-down-margin",
    description: "a leader believes it leads until its membership may expire, with no margin for clocks and delays",
    options: { stepDownMargin: 0.001 },
  },
  {
    name: "late-renewal-revives",
    description: "a renewal confirmed after the deadline passed revives the term",
    patch: () =>
      patch(Term.prototype, "extend", () =>
        function (this: Term, sentAt: number) {
          const inside = this as unknown as TermInside;
          if (inside.ended) return;
          inside.deadline = Math.max(inside.deadline, sentAt + inside.horizon);
          inside.arm();
        },
      ),
  },
];
