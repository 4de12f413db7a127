// What a command needs from the store it was pointed at, whichever it is:
// a member, an observer, one read of who leads, and a way out. The etcd
// clients (clients.ts) and NATS KV (nats-store.ts) each
// build one from their own flags; run, who and watch only see this.
import type etcdLeader = require("../../index");
import type { NatsElectionOptions } from "../../nats";

/** The options a member takes on either store; goMembers only on NATS (the flags allow it only there). */
export type StoreElectionOptions = etcdLeader.ElectionOptions & Pick<NatsElectionOptions, "goMembers">;

export interface Store {
  /** For messages: "etcd v3 at http://127.0.0.1:2379", "NATS KV bucket leaders at nats://…". */
  readonly description: string;
  /** The flags to check when the store cannot be read, for the message that says so. */
  readonly flagsToCheck: string;
  /** A member of the election at `key`; `ttlSeconds` undefined: the store's default (etcd 10 s, NATS the bucket's). */
  election(key: string, name: string, ttlSeconds: number | undefined, options?: StoreElectionOptions): Promise<etcdLeader.Election>;
  observe(key: string): etcdLeader.LeaderObserver;
  whoLeads(key: string, requestTimeoutMs: number): Promise<etcdLeader.Leader | undefined>;
  /** Who is in line: every member on etcd; the leader alone on NATS KV (`scope`). */
  candidates(key: string, requestTimeoutMs: number): Promise<etcdLeader.Candidates>;
  close(): Promise<void>;
}
