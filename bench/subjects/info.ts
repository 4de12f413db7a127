// The subjects' descriptions, without loading any client library.
import type { SubjectId, SubjectInfo } from "./types";

/** Each v3 subject's clients: one per member, as it would be in its own process. */
export const V3_CLIENT_NOTE = {
  ours: "one etcd3 client per member, its services sharing one gRPC channel",
  election: "one etcd3 client per member, a gRPC channel for each service it calls (etcd3's defaults)",
} as const;

const v2Key = (id: string) => (scope: string) => `/bench/${id}/${scope}`;

export const SUBJECTS: readonly SubjectInfo[] = [
  {
    id: "ours-v2",
    label: "etcd-leader v2",
    api: "v2",
    ours: true,
    electionKey: v2Key("ours-v2"),
    storePrefix: (key) => key,
    // refreshInterval defaults to TTL / 2.
    renewalsPerTtl: 2,
    namesLeader: true,
  },
  {
    id: "ours-v3",
    label: "etcd-leader v3",
    api: "v3",
    ours: true,
    electionKey: (scope) => `bench/ours-v3/${scope}`,
    storePrefix: (key) => `${key}/`,
    renewalsPerTtl: 2,
    namesLeader: true,
  },
  {
    id: "ours-nats",
    label: "etcd-leader NATS KV",
    api: "nats",
    ours: true,
    // A KV key: no leading slash, and each scope's own key in the bench bucket.
    electionKey: (scope) => `bench/ours-nats/${scope}`,
    storePrefix: (key) => key,
    // The leader's update every TTL/2, as on etcd.
    renewalsPerTtl: 2,
    namesLeader: true,
  },
  {
    id: "ours-postgres",
    label: "etcd-leader PostgreSQL",
    api: "postgres",
    ours: true,
    // One row per election in the library's table, keyed by this.
    electionKey: (scope) => `bench/ours-postgres/${scope}`,
    storePrefix: (key) => key,
    // The leader's UPDATE of its row every TTL/2.
    renewalsPerTtl: 2,
    namesLeader: true,
  },
  {
    id: "ours-redis",
    label: "etcd-leader Redis",
    api: "redis",
    ours: true,
    // No braces: the library puts the key in a hash tag of its own.
    electionKey: (scope) => `bench:ours-redis:${scope}`,
    storePrefix: (key) => key,
    // The leader's renewal script every TTL/2.
    renewalsPerTtl: 2,
    namesLeader: true,
  },
  {
    id: "original",
    label: "etcd-leader 0.0.1",
    api: "v2",
    ours: false,
    electionKey: v2Key("original"),
    storePrefix: (key) => key,
    // Its refresh timer: ttl * 500 ms.
    renewalsPerTtl: 2,
    namesLeader: true,
  },
  {
    id: "etcd3-election",
    label: "etcd3 Election",
    api: "v3",
    ours: false,
    electionKey: (scope) => `bench-etcd3/${scope}`,
    // etcd3's Election keeps its members under `election/<name>/`.
    storePrefix: (key) => `election/${key}/`,
    // etcd3's Lease keeps its lease alive every TTL / 3.
    renewalsPerTtl: 3,
    namesLeader: true,
  },
  {
    id: "advisory-lock",
    label: "advisory-lock",
    api: "postgres",
    ours: false,
    electionKey: (scope) => `bench/advisory-lock/${scope}`,
    storePrefix: (key) => key,
    // The holder's session keeps the lock: it sends nothing while it leads.
    renewalsPerTtl: 0,
    namesLeader: false,
  },
  {
    id: "redlock",
    label: "redlock",
    api: "redis",
    ours: false,
    electionKey: (scope) => `bench:redlock:${scope}`,
    storePrefix: (key) => key,
    // using() extends the lock once 500 ms of it are left: every TTL − 0.5 s, one per TTL and a little more.
    renewalsPerTtl: 1,
    namesLeader: false,
  },
  {
    id: "redis-leader",
    label: "redis-leader",
    api: "redis",
    ours: false,
    electionKey: (scope) => `bench:redis-leader:${scope}`,
    storePrefix: (key) => key,
    // A GET and a PEXPIRE every TTL/2.
    renewalsPerTtl: 2,
    namesLeader: false,
  },
];

export function subjectInfo(id: SubjectId): SubjectInfo {
  const subject = SUBJECTS.find((s) => s.id === id) ?? (id === SESSION_SUBJECT.id ? SESSION_SUBJECT : undefined);
  if (!subject) throw new Error(`unknown subject ${id}`);
  return subject;
}

/** Elections on one etcd v3 session per process: the sessions scenario's, not a side-by-side subject. */
export const SESSION_SUBJECT: SubjectInfo = {
  id: "ours-v3-session",
  label: "etcd-leader v3, one session per process",
  api: "v3",
  ours: true,
  electionKey: (scope) => `bench/ours-v3-session/${scope}`,
  storePrefix: (key) => `${key}/`,
  // One keep-alive per refresh interval (TTL/2) for the whole session.
  renewalsPerTtl: 2,
  namesLeader: true,
};
