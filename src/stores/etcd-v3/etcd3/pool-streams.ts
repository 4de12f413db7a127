// What the client's long-lived streams (keepalive-stream.ts, watch-stream.ts)
// have in common: one per connection pool, and a way to close one that etcd3
// does not take for a broken connection.
import type { Etcd3Client } from "./client";

/** How long to wait before opening a stream again after the last one failed: short, elections are waiting on it. */
export const REOPEN_INITIAL_DELAY_MS = 50;
export const REOPEN_MAX_DELAY_MS = 1_000;

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
