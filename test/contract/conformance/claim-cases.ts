// The contract's rules for claims (src/contract/backend.ts), one case each: what a
// backend hands the state machine when it joins or wins. The election checks
// the same rules at run time (src/contract/answers.ts) and refuses to lead on a
// claim that breaks one; these cases find the fault before a user does, and
// name the field. Each rule is a function of a bare backend, so that a
// backend broken on purpose can be shown to fail it (test/unit/backend-answers.test.ts).
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { Claim, ElectionBackend } from "../../../src/contract/backend";
import { heldClaimProblem, newClaimProblem, renewalSentAt } from "../../../src/contract/answers";
import { LIVENESS_MS, noLeader, type Harness } from "./harness";

export interface ClaimRule {
  readonly title: string;
  /** Passes, or throws an AssertionError whose message names the field at fault. */
  check(backend: ElectionBackend): Promise<void>;
}

/** A new claim, as the state machine gets one (join, or an awaitTurn that won), with performance.now() around the call. */
async function newClaim(backend: ElectionBackend): Promise<{ claim: Claim; before: number; after: number; joined: boolean }> {
  const signal = AbortSignal.timeout(LIVENESS_MS);
  const before = performance.now();
  const joined = await backend.join?.(signal);
  const claim = joined ?? (await backend.awaitTurn(undefined, noLeader, signal));
  return { claim, before, after: performance.now(), joined: joined !== undefined };
}

/** Runs `use` on a new claim, then gives the claim's membership back, whatever happened. */
async function withNewClaim(backend: ElectionBackend, use: (made: Awaited<ReturnType<typeof newClaim>>) => Promise<void> | void): Promise<void> {
  const made = await newClaim(backend);
  try {
    await use(made);
  } finally {
    const membership = (made.claim as Partial<Claim> | undefined)?.membership;
    if (typeof membership === "object" && membership !== null) {
      await backend.leave(membership, AbortSignal.timeout(LIVENESS_MS)).catch(() => undefined);
    }
  }
}

/** Fails with the field and the problem, as the election itself would report them. */
function assertNoProblem(problem: { field: string; problem: string } | undefined): void {
  if (problem) assert.fail(`the claim's ${problem.field} ${problem.problem}`);
}

export const CLAIM_RULES: readonly ClaimRule[] = [
  {
    title: "a claim's membership is an object with a non-empty string id",
    check: (backend) =>
      withNewClaim(backend, ({ claim }) => {
        const membership = (claim as Partial<Claim>).membership as { id?: unknown } | undefined;
        assert.ok(typeof membership === "object" && membership !== null, `the claim's membership is ${String(membership)}, not an object`);
        assert.ok(typeof membership.id === "string" && membership.id !== "", `the claim's membership.id is ${String(membership.id)}, not a non-empty string`);
      }),
  },
  {
    title: "a claim's token is a finite number, larger than the token of the claim before it",
    async check(backend) {
      let first = Number.NaN;
      await withNewClaim(backend, ({ claim }) => {
        first = claim.token;
        assert.ok(typeof first === "number" && Number.isFinite(first), `the claim's token is ${String(first)}, not a finite number`);
      });
      await withNewClaim(backend, ({ claim }) => {
        assert.ok(claim.token > first, `the claim's token ${String(claim.token)} is not larger than the token of the claim before it, ${first}`);
      });
    },
  },
  {
    title: "a claim's sentAt is performance.now() taken during the call that made it",
    check: (backend) =>
      withNewClaim(backend, ({ claim, before, after }) => {
        const { sentAt } = claim;
        assert.ok(
          typeof sentAt === "number" && sentAt >= before && sentAt <= after,
          `the claim's sentAt is ${String(sentAt)}, outside the call that made it (performance.now() ${before.toFixed(1)} to ${after.toFixed(1)}); ` +
            "take it from performance.now() just before the write is sent",
        );
      }),
  },
  {
    title: "a claim's ttlMs is the positive, finite number of milliseconds the store keeps it",
    check: (backend) =>
      withNewClaim(backend, ({ claim }) => {
        const { ttlMs } = claim;
        assert.ok(typeof ttlMs === "number" && Number.isFinite(ttlMs) && ttlMs > 0, `the claim's ttlMs is ${String(ttlMs)}, not a positive finite number`);
      }),
  },
  {
    title: "a new claim passes the checks the election makes before it leads on it",
    check: (backend) => withNewClaim(backend, ({ claim }) => assertNoProblem(newClaimProblem(claim, performance.now()))),
  },
  {
    title: "a renewal answers with nothing, or with a sentAt between the claim's and its own answer",
    check: (backend) =>
      withNewClaim(backend, async ({ claim }) => {
        const calledAt = performance.now();
        const answer = await backend.renew(claim.membership, AbortSignal.timeout(LIVENESS_MS));
        const renewed = renewalSentAt(answer, calledAt, performance.now(), claim.sentAt);
        if ("problem" in renewed) assert.fail(`the renewal's ${renewed.field} ${renewed.problem}`);
      }),
  },
  {
    title: "awaitTurn handed a claim resolves with that membership and token",
    check: (backend) =>
      withNewClaim(backend, async ({ claim }) => {
        // Queue-style: the place in line, first in it. Race-style: what it won,
        // handed back after a phase started over.
        const turn = await backend.awaitTurn(claim, noLeader, AbortSignal.timeout(LIVENESS_MS));
        assertNoProblem(heldClaimProblem(turn, claim));
      }),
  },
];

export function claimCases(harness: Harness): void {
  describe("claims", () => {
    for (const rule of CLAIM_RULES) {
      it(rule.title, async () => {
        await harness.election("claims");
        await rule.check((await harness.backend("a")).backend);
      });
    }
  });
}
