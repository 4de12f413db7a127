// Waiting with deadlines, so that a test that fails, fails fast and never
// hangs. waitFor() is the one way the tests and the kit wait for a condition:
// for a member's event, a line of a CLI's output, a record in a command log,
// a store's state.

export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** Rejects if `promise` has not settled within `ms`. */
export async function withDeadline<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: not within ${ms} ms`)), ms);
  });
  try {
    return await Promise.race([promise, deadline]);
  } finally {
    clearTimeout(timer);
  }
}

export interface WaitOptions {
  /** How often to look, in ms. Default 10; more for a probe that asks a server. */
  every?: number;
  /** Ends the wait early, rejecting with the signal's reason. */
  signal?: AbortSignal;
  /**
   * Why what is awaited can no longer come (the process that was to report
   * it has exited), or undefined while it still can: the wait then fails at
   * once with that reason rather than at its deadline. Looked at after the
   * probe, so that what came just before the end still counts.
   */
  hopeless?: () => string | undefined;
  /** What the wait saw, for its failure message: the member's recent output, the records read. */
  detail?: () => string;
  /**
   * A probe that throws (a store that does not answer yet) is tried again at
   * the next look, and its last error goes into the failure message. Without
   * this the wait fails with the probe's error.
   */
  retryErrors?: boolean;
}

/**
 * Looks at `probe` until it returns something truthy, and resolves with that,
 * for at most `ms`; then rejects, saying what it waited for. A probe that
 * returns a promise is bounded by the same deadline: a request that hangs
 * cannot hold the wait past it.
 */
export async function waitFor<T>(
  what: string,
  ms: number,
  probe: () => T | Promise<T>,
  { every = 10, signal, hopeless, detail, retryErrors = false }: WaitOptions = {},
): Promise<NonNullable<T>> {
  const deadline = performance.now() + ms;
  let lastError: unknown;
  const failure = (why: string): Error => {
    const error = lastError === undefined ? "" : ` (last error: ${lastError instanceof Error ? lastError.message : String(lastError)})`;
    const seen = detail?.() ?? "";
    return new Error(`${what}: ${why}${error}${seen ? `\n${seen}` : ""}`, lastError === undefined ? undefined : { cause: lastError });
  };
  for (;;) {
    signal?.throwIfAborted();
    try {
      const answer = probe();
      const value = answer instanceof Promise ? await withDeadline(answer, Math.max(1, deadline - performance.now()), what) : answer;
      if (value) return value as NonNullable<T>;
    } catch (err) {
      if (!retryErrors) throw err;
      lastError = err;
    }
    const noHope = hopeless?.();
    if (noHope !== undefined) throw failure(noHope);
    if (performance.now() >= deadline) throw failure(`not within ${ms} ms`);
    await sleepOrAbort(Math.min(every, Math.max(1, deadline - performance.now())), signal);
  }
}

/** Runs `check` (which throws, as an assertion does, when the condition fails) every `every` ms for `ms`: a condition that must hold throughout. */
export async function holdsFor(ms: number, check: () => void, every = 20): Promise<void> {
  const until = performance.now() + ms;
  while (performance.now() < until) {
    check();
    await sleep(every);
  }
}

async function sleepOrAbort(ms: number, signal: AbortSignal | undefined): Promise<void> {
  if (!signal) return sleep(ms);
  await new Promise<void>((resolve, reject) => {
    const onAbort = (): void => {
      clearTimeout(timer);
      reject(signal.reason);
    };
    const timer = setTimeout(() => {
      signal.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    signal.addEventListener("abort", onAbort, { once: true });
  });
}

/**
 * Call once every test in a file has finished: the process must then exit by
 * itself. If something (a timer, a socket, a watch) still holds it 5 s later,
 * fail and say what.
 */
export function exitOrFail(): void {
  setTimeout(() => {
    console.error(`still running 5 s after the last test; open handles: ${process.getActiveResourcesInfo().join(", ")}`);
    process.exit(1);
  }, 5_000).unref();
}

/** A promise and the function that resolves it, for a test to hand a moment from one place to another. */
export function deferred<T = void>(): { promise: Promise<T>; resolve: (value: T) => void } {
  let resolve!: (value: T) => void;
  const promise = new Promise<T>((r) => (resolve = r));
  return { promise, resolve };
}
