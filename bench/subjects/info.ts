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
  },
  {
    id: "ours-v3",
    label: "etcd-leader v3",
    api: "v3",
    ours: true,
    electionKey: (scope) => `bench/ours-v3/${scope}`,
    storePrefix: (key) => `${key}/`,
    renewalsPerTtl: 2,
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
};
