// Waiting with deadlines, so that a test that fails, fails fast and never hangs.

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

/** Polls `probe` every 10 ms until it returns something truthy, for at most `ms`. */
export async function waitFor<T>(what: string, ms: number, probe: () => T | Promise<T>): Promise<NonNullable<T>> {
  const deadline = performance.now() + ms;
  for (;;) {
    const value = await probe();
    if (value) return value as NonNullable<T>;
    if (performance.now() > deadline) throw new Error(`timed out after ${ms} ms waiting for ${what}`);
    await sleep(10);
  }
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
