// The one-object form of the factory: `etcdLeader({ client, key, name, ttl,
// ...options })` beside the four-argument call of etcd-leader 0.0.1. Where to
// campaign and as whom (client, key, name) are kept apart from the tuning
// options (options.ts), and the object is taken apart into the positional
// call, so both forms are checked by the same code.
import { isEtcd3Client } from "./etcd-v3/etcd3/client";
import { isNodeEtcdClient } from "./etcd-v2/node-etcd/client";
import type { ElectionOptions } from "../election/options";

/** Which election: the fields an observer and a one-shot read need besides the options. */
export interface ElectionTarget {
  /** An etcd3 client (`new Etcd3(...)`, or a namespace of one) for etcd's v3 API, or a node-etcd client for v2. */
  client: unknown;
  /** The election's key: the directory on v2, the prefix (used verbatim, as etcdctl elect does) on v3. */
  key: string;
}

/** `etcdLeader({ client, key, name, ...options })`: the member's identity, then any of the tuning options. */
export interface ElectionSettings extends ElectionTarget, ElectionOptions {
  /** This member's name, as other members see it in their `leader` events. */
  name: string;
}

/** `etcdLeader.observe({ client, key, ...options })`. */
export interface ObserverSettings extends ElectionTarget, ElectionOptions {}

/**
 * True for an options object passed where the client goes, with nothing after
 * it. A client itself is never taken for one (a node-etcd client has a
 * `client` property of its own).
 */
export function isSettingsObject(first: unknown, second: unknown): first is ElectionTarget {
  return (
    second === undefined &&
    typeof first === "object" &&
    first !== null &&
    "client" in first &&
    !isNodeEtcdClient(first) &&
    !isEtcd3Client(first)
  );
}

/** Splits a settings object into the positional call's arguments; `options` holds the tuning options only. */
export function splitSettings<S extends ElectionTarget & { name?: string }>(
  settings: S,
): { client: unknown; key: string; name: string | undefined; options: Omit<S, "client" | "key" | "name"> } {
  const { client, key, name, ...options } = settings;
  return { client, key, name, options };
}
