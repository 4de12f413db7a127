// How fast etcd can tell one process that a revoke deleted N keys, with
// nothing else running: the floor under the sessions scenario's clean close,
// which is one revoke deleting every key of the closing session.
//
// Two ways of watching the same N keys, each on this library's own watch
// stream (src/stores/etcd-v3/etcd3): one watch per key, as each election on a
// session keeps today (etcd sends one answer per watch), and one watch over
// the range that holds them all (etcd sends one answer for the revision).
// Timed from the revoke's sending to the arrival of the last deletion.
import { setMaxListeners } from "node:events";
import { Etcd3 } from "etcd3";
import { etcd3Options } from "../src/stores/etcd-v3/etcd3/options";
import { etcd3Port } from "../src/stores/etcd-v3/etcd3/port";
import type { WatchSet } from "../src/stores/etcd-v3/port";
import { summarize, type Summary } from "./stats";
import { now, sleep, tag } from "./util";

export interface WatchDelivery {
  keys: number;
  /** Per trial: from the revoke's sending to the last deletion's arrival. */
  perKeyWatchesMs: Summary;
  rangeWatchMs: Summary;
}

/** Watches opened per turn of the event loop while arming the per-key case. */
const ARM_BATCH = 1_000;

export async function measureWatchDelivery(etcdUrl: string, keys: number, trials: number): Promise<WatchDelivery> {
  const perKey: number[] = [];
  const range: number[] = [];
  for (let trial = 0; trial < trials; trial++) {
    perKey.push(await oneRevoke(etcdUrl, keys, "per key"));
    range.push(await oneRevoke(etcdUrl, keys, "range"));
  }
  return { keys, perKeyWatchesMs: summarize(perKey), rangeWatchMs: summarize(range) };
}

async function oneRevoke(etcdUrl: string, keys: number, watching: "per key" | "range"): Promise<number> {
  // Two clients, as in the scenario: the closing process's and a follower's.
  const writer = new Etcd3(etcd3Options({ hosts: [etcdUrl] }));
  const reader = new Etcd3(etcd3Options({ hosts: [etcdUrl] }));
  const stop = new AbortController();
  setMaxListeners(0, stop.signal); // a listener per watch set
  try {
    const prefix = `delivery-${tag()}/`;
    const keyOf = (i: number) => `${prefix}e${String(i).padStart(6, "0")}`;
    const leaseId = (await writer.leaseClient.leaseGrant({ TTL: 60 })).ID;
    for (let from = 0; from < keys; from += 500) {
      await Promise.all(Array.from({ length: Math.min(500, keys - from) }, (_, i) => writer.put(keyOf(from + i)).value("v").lease(leaseId).exec()));
    }
    const port = etcd3Port(reader);
    const { revision } = await port.range({ key: keyOf(0) }, "read", stop.signal);
    let arrived = 0;
    let lastAt = NaN;
    let allArrived!: () => void;
    const done = new Promise<void>((resolve) => (allArrived = resolve));
    const take = (set: WatchSet<"w">) => {
      void (async () => {
        for (;;) {
          const event = await set.next();
          if (event.type !== "delete") continue;
          lastAt = now();
          if (++arrived === keys) allArrived();
        }
      })().catch(() => undefined);
    };
    const sets: Array<WatchSet<"w">> = [];
    if (watching === "range") {
      const set = port.watches<"w">(stop.signal);
      set.add("w", { prefix, deletesOnly: true }, revision + 1);
      sets.push(set);
      take(set);
    } else {
      for (let i = 0; i < keys; i++) {
        const set = port.watches<"w">(stop.signal);
        set.add("w", { key: keyOf(i), deletesOnly: true }, revision + 1);
        sets.push(set);
        take(set);
        if ((i + 1) % ARM_BATCH === 0) await sleep(20);
      }
    }
    const deadline = now() + 30_000;
    while (!sets.every((s) => s.created("w"))) {
      if (now() > deadline) throw new Error(`the ${watching} watches were not confirmed within 30 s`);
      await sleep(50);
    }
    await sleep(500);
    const sentAt = now();
    await writer.leaseClient.leaseRevoke({ ID: leaseId });
    await Promise.race([done, sleep(30_000)]);
    if (arrived !== keys) throw new Error(`${arrived} of ${keys} deletions arrived on the ${watching} watches within 30 s`);
    return lastAt - sentAt;
  } finally {
    stop.abort();
    writer.close();
    reader.close();
  }
}
