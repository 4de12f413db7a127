// Small helpers shared by the orchestrator and the member processes.
import { readdirSync, readlinkSync } from "node:fs";

/** Milliseconds since the epoch with sub-millisecond resolution, comparable across processes on one host. */
export function now(): number {
  return performance.timeOrigin + performance.now();
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, Math.max(0, ms)));
}

/** A uniformly random number in [min, max). */
export function uniform(min: number, max: number): number {
  return min + Math.random() * (max - min);
}

export class DeadlineError extends Error {
  override readonly name = "DeadlineError";
}

/** Resolves or rejects with `promise`, or rejects with a DeadlineError after `ms`. */
export function withDeadline<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new DeadlineError(`${what}: no result within ${ms} ms`)), ms);
  });
  return Promise.race([promise, deadline]).finally(() => clearTimeout(timer));
}

/** A short random tag for fresh election keys. */
export function tag(): string {
  return Math.random().toString(36).slice(2, 8);
}

/** Open file descriptors of this process that are sockets (Linux). */
export function socketCount(): number {
  let sockets = 0;
  try {
    for (const fd of readdirSync("/proc/self/fd")) {
      try {
        if (readlinkSync(`/proc/self/fd/${fd}`).startsWith("socket:")) sockets++;
      } catch {
        // closed meanwhile
      }
    }
  } catch {
    return -1;
  }
  return sockets;
}

export function errorMessage(err: unknown): string {
  if (err instanceof Error) return err.message;
  return String(err);
}
