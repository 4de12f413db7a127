// etcd-leader 0.0.1, the original, on etcd's v2 API through node-etcd. It
// has no fencing token, and on any error it stops itself and emits `error`;
// nothing restarts it here (its README documents no recovery).
import { SUBJECTS } from "./info";
import { nodeEtcdClients, V2_CLIENT_NOTE } from "./node-etcd";
import type { Member, MemberListener, MemberSpec, Subject, SubjectRuntime } from "./types";

type GetCallback = (err: { errorCode?: number } | null) => void;

/** Resolves once `key` no longer exists in etcd, or after `timeoutMs`. */
async function gone(client: object, key: string, timeoutMs: number): Promise<void> {
  const get = (client as { get(key: string, options: object, cb: GetCallback): unknown }).get.bind(client);
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const missing = await new Promise<boolean>((resolve) => get(key, { maxRetries: 0 }, (err) => resolve(err?.errorCode === 100)));
    if (missing) return;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

interface OriginalElection {
  start(): OriginalElection;
  stop(): OriginalElection;
  isLeader(): boolean;
  isRunning(): boolean;
  on(event: "elected" | "unelected", listener: () => void): void;
  on(event: "leader", listener: (name: string) => void): void;
  on(event: "error", listener: (err: Error) => void): void;
}

type OriginalFactory = (etcd: object, key: string, name: string, ttl: number) => OriginalElection;

export const original: Subject = {
  ...SUBJECTS.find((s) => s.id === "original")!,
  runtime(hosts: string[]): SubjectRuntime {
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    const factory = require("etcd-leader-original") as OriginalFactory;
    const clients = nodeEtcdClients();
    return {
      clientNote: V2_CLIENT_NOTE,
      member(spec: MemberSpec, listener: MemberListener): Member {
        const client = clients(spec.hosts ?? hosts);
        const election = factory(client, spec.key, spec.name, spec.ttl);
        election.on("elected", () => listener.elected());
        election.on("unelected", () => listener.unelected("unelected"));
        election.on("leader", (name) => listener.leader(name));
        // Without a listener an `error` would throw out of the process.
        election.on("error", (err) => listener.error(err?.message ?? String(err)));
        let started = false;
        return {
          name: spec.name,
          start() {
            started = true;
            election.start();
          },
          stop() {
            election.stop();
          },
          // stop() deletes the key without waiting; wait (at most 3 s) until it is gone, as a
          // careful shutdown would, so that no membership outlives the member until its TTL.
          async close() {
            const key = (election as unknown as { _membershipKey?: string | null })._membershipKey;
            election.stop();
            if (key) await gone(client, key, 3000);
          },
          isLeader: () => election.isLeader(),
          isRunning: () => started && election.isRunning() === true,
        };
      },
      async close() {},
    };
  },
};
