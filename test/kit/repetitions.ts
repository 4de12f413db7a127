// How many times a test repeats its scenario. Once in `npm test`: the suite
// proves each behaviour once and stays quick. `npm run soak` (test/faults/soak.ts)
// runs the repeating tests again with their variable set, for many runs and
// the spread of the figures they print; so can anyone, by hand:
//
//   CLI_PARTITION_RUNS=10 node --import tsx --test test/cli/cli-partition.test.ts
//
// A repeating test says so in its name with inEachOf(), which is how the
// soak picks the repeating tests out of their files (REPEATED_TEST_PATTERN).

/** The tests that repeat a scenario: their file, and the variable that sets their runs. */
export const REPEATING_TESTS = [
  { file: "test/cli/cli-partition.test.ts", variable: "CLI_PARTITION_RUNS" },
  { file: "test/cli/cli-freeze.test.ts", variable: "CLI_FREEZE_RUNS" },
  { file: "test/cli/cli-run.test.ts", variable: "CLI_KILL_RUNS" },
] as const;

export type RunsVariable = (typeof REPEATING_TESTS)[number]["variable"];

/** Matches the names inEachOf() makes (for node --test --test-name-pattern). */
export const REPEATED_TEST_PATTERN = "in each of \\d+ runs?$";

/** The runs `variable` asks for: 1 when it is not set. */
export function runsFrom(variable: RunsVariable): number {
  const value = process.env[variable];
  if (value === undefined || value === "") return 1;
  const runs = Number(value);
  if (!Number.isInteger(runs) || runs < 1) throw new Error(`${variable} must be a whole number of at least 1, got "${value}"`);
  return runs;
}

/** The end of a repeating test's name. */
export function inEachOf(runs: number): string {
  return `in each of ${runs} ${runs === 1 ? "run" : "runs"}`;
}
