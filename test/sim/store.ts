// What a simulated store gives the simulation: a backend for each member,
// reached through that member's link (network.ts), the view the checker needs
// (checker.ts), the faults only this store has, the mutations that break its
// recipe on purpose, and its timing. One per store: stores/etcd-v3.ts,
// stores/etcd-v2.ts, stores/nats-kv.ts. Each is the same store the store
// facts tests hold against the real server, so that what the simulation
// finds is about the real code on a faithful store.
import type { ElectionBackend } from "../../src/contract/backend";
import type { ResolvedOptions } from "../../src/election/options";
import type { StoreView } from "./checker";
import type { Link, Transport } from "./network";
import type { Random, Scheduler, SimProcess } from "./world";

export type StoreKind = "etcd-v3" | "etcd-v2" | "nats-kv" | "redis" | "postgres";

/** What a fault acts on: the world and its members, as they stand when it is applied. */
export interface FaultContext {
  readonly scheduler: Scheduler;
  readonly random: Random;
  /** The names of the members whose membership the store holds now (the leader among them). */
  holders(): string[];
  /** Notes the fault in the trace. */
  note(text: string): void;
}

/** A fault only this store has (a key deleted from outside, a compaction, a purge), drawn by the schedule. */
export interface StoreFault {
  readonly kind: string;
  /** How often it is drawn against the others (the network's and the processes' faults weigh 1 to 4). */
  readonly weight: number;
  apply(context: FaultContext): void;
}

/**
 * A seam that breaks the code on purpose, for the simulation to show that its
 * checker finds the break: a patch of the real code, applied before a run
 * and undone after it, or timing the members get instead of the store's.
 */
export interface Mutation {
  readonly name: string;
  readonly description: string;
  /** Breaks the code (patches a prototype); returns the undo. */
  patch?(): () => void;
  /** Options the members get over the store's own (a step-down margin of nothing, say). */
  readonly options?: Partial<ResolvedOptions>;
}

export interface SimStore extends StoreView {
  readonly kind: StoreKind;
  /** How its client reaches it: one multiplexed connection (etcd3's gRPC, NATS) or a request per socket (node-etcd's HTTP). */
  readonly transport: Transport;
  /** The timing every member of this store's elections gets. */
  readonly options: ResolvedOptions;
  /** A backend for the member `name` in `process`, whose every request and push goes through `link`. */
  backend(name: string, process: SimProcess, link: Link, random: Random): ElectionBackend;
  /** The store's own faults. */
  readonly faults: readonly StoreFault[];
  /** The store goes down for `downMs` (every link resets; requests fail), then comes back, as a restarted server does. */
  restart(downMs: number): void;
  /** An operator deletes the membership of member `name`, if the store holds one (a regression case's fault). */
  deleteMembershipOf(name: string): void;
  /** How long after a membership's last renewal the store may still hold it (its TTL and the expiry sweep's lag). */
  readonly holdsAtMostMs: number;
  /** The mutations that break this store's recipe on purpose. */
  readonly mutations: readonly Mutation[];
}

/** What makes a store for one run: its scheduler and the random source of its own. */
export type StoreFactory = (scheduler: Scheduler, random: Random) => SimStore;
