// What the client's long-lived streams (keepalive-stream.ts, watch-stream.ts)
// have in common: one per connection pool, one opening at a time with a
// back-off after failures, and a way to close one that etcd3 does not take
// for a broken connection.
import { Backoff } from "../../../util/backoff";
import type { Etcd3Client } from "./client";

/** How long to wait before opening a stream again after the last one failed: short, elections are waiting on it. */
const REOPEN_INITIAL_DELAY_MS = 50;
const REOPEN_MAX_DELAY_MS = 1_000;

/**
 * One `T` per connection pool, made on first use. Namespaces of one Etcd3
 * client share its pool (`pool`, which etcd3 keeps to itself), and so share
 * its streams: a lease is the cluster's whichever namespace renews it, and a
 * watch carries its namespace's prefix in its keys.
 */
export function perPool<T>(make: (client: Etcd3Client) => T): (client: Etcd3Client) => T {
  const made = new WeakMap<object, T>();
  return (client) => {
    const pool = (client as { pool?: unknown }).pool;
    const owner = typeof pool === "object" && pool !== null ? pool : client;
    let shared = made.get(owner);
    if (shared === undefined) {
      shared = make(client);
      made.set(owner, shared);
    }
    return shared;
  };
}

/** The part of etcd3's duplex stream closing needs. */
interface ClosableStream {
  on(event: "error", listener: () => void): unknown;
  end(): void;
  cancel(): void;
}

/**
 * Closes a stream the client opened. Half-closing first keeps etcd3 from
 * taking the cancellation for a broken connection (it marks the host failed
 * only for an error on a writable stream).
 */
export function closeStream(stream: ClosableStream): void {
  stream.on("error", () => undefined);
  stream.end();
  stream.cancel();
}

/**
 * Opens a stream with `make`, one opening at a time, and after a failed
 * stream (or opening) only once a back-off has passed (50 ms, doubling up to
 * 1 s), reset by the first answer on a stream.
 */
export class StreamOpener<S> {
  private opening = false;
  private readonly backoff = new Backoff(REOPEN_INITIAL_DELAY_MS, REOPEN_MAX_DELAY_MS);
  private notBefore = 0;

  constructor(private readonly make: () => Promise<S>) {}

  /** Whether a stream is being opened now. */
  get isOpening(): boolean {
    return this.opening;
  }

  /** Opens a stream unless one is being opened: `opened` gets it, or `failed` the error (which counts as a failure). */
  open(opened: (stream: S) => void, failed: (err: unknown) => void): void {
    if (this.opening) return;
    this.opening = true;
    void this.openLater().then(
      (stream) => {
        this.opening = false;
        opened(stream);
      },
      (err: unknown) => {
        this.opening = false;
        this.failed();
        failed(err);
      },
    );
  }

  /** An answer came on the stream: it works, and the next opening need not wait. */
  answered(): void {
    this.backoff.reset();
  }

  /** The stream failed: the next opening waits out the back-off. */
  failed(): void {
    this.notBefore = performance.now() + this.backoff.next();
  }

  private async openLater(): Promise<S> {
    const delay = this.notBefore - performance.now();
    if (delay > 0) await new Promise((resolve) => setTimeout(resolve, delay));
    return this.make();
  }
}
