// What every benchmarked leader-election implementation offers the benchmark:
// members that start, stop, say whether they believe they lead, and report
// elected / unelected / leader / error events.

export type SubjectId =
  | "ours-v2"
  | "ours-v3"
  | "ours-nats"
  | "ours-postgres"
  | "ours-redis"
  | "original"
  | "etcd3-election"
  | "advisory-lock"
  | "redlock"
  | "redis-leader"
  | "ours-v3-session";

/** The server a subject's members talk to. */
export type Store = "etcd" | "nats" | "postgres" | "redis";

export interface SubjectInfo {
  readonly id: SubjectId;
  /** How it appears in tables. */
  readonly label: string;
  /** Which store it talks to: an etcd API, NATS JetStream KV, PostgreSQL or Redis. */
  readonly api: "v2" | "v3" | "nats" | "postgres" | "redis";
  /**
   * Whether its followers can name the leader (`leader` events). False for a
   * lock used as an election: a follower knows only that the lock is taken,
   * so trials wait for no follower to name anyone.
   */
  readonly namesLeader: boolean;
  /** This library (targets apply) or a peer (compared against). */
  readonly ours: boolean;
  /** The election key for a run: a fresh one per subject and trial. */
  electionKey(scope: string): string;
  /** Where the subject keeps its members in etcd for `key`: a v2 directory or a v3 prefix (NATS: the key itself). */
  storePrefix(key: string): string;
  /** How many renewals its schedule sends per TTL, per member, with the options the benchmark uses (0: the leader sends none). */
  readonly renewalsPerTtl: number;
}

/** What a member reports; the member process timestamps and forwards each call. */
export interface MemberListener {
  elected(token?: number): void;
  unelected(reason: string): void;
  /** The leader's name as this member knows it (undefined: no leader known). */
  leader(name: string | undefined): void;
  error(message: string): void;
  /** Something worth counting that is not an election event (e.g. `elected` after resign). */
  note(message: string): void;
}

export interface MemberSpec {
  key: string;
  name: string;
  ttl: number;
  /** Connect this member through its own client to these endpoints instead of the shared client. */
  hosts?: string[];
}

export interface Member {
  readonly name: string;
  start(): void;
  /** The graceful way out: stop() / resign(). Returns once the call has been made. */
  stop(): void;
  /** Stops if needed and waits (bounded) until the member has left the store and released its own resources. */
  close(): Promise<void>;
  /** Whether the member believes it leads right now. */
  isLeader(): boolean;
  /** False once the member has given up for good (stopped, or died on an error). */
  isRunning(): boolean;
}

/** One per member process: the shared client(s) and a factory for members. */
export interface SubjectRuntime {
  member(spec: MemberSpec, listener: MemberListener): Member;
  /** What the process holds that is shared by every member (for the report). */
  readonly clientNote: string;
  close(): Promise<void>;
}

export interface Subject extends SubjectInfo {
  runtime(hosts: string[]): SubjectRuntime;
}

/** The server behind an API: both etcd APIs are one etcd. */
export function storeOf(subject: Pick<SubjectInfo, "api">): Store {
  return subject.api === "v2" || subject.api === "v3" ? "etcd" : subject.api;
}
