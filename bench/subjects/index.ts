// Loads a subject's implementation (and its client library) on demand.
import type { Subject, SubjectId } from "./types";

export function loadSubject(id: SubjectId): Subject {
  /* eslint-disable @typescript-eslint/no-require-imports */
  switch (id) {
    case "ours-v2":
      return (require("./ours-v2") as typeof import("./ours-v2")).oursV2;
    case "ours-v3":
      return (require("./ours-v3") as typeof import("./ours-v3")).oursV3;
    case "ours-nats":
      return (require("./ours-nats") as typeof import("./ours-nats")).oursNats;
    case "ours-postgres":
      return (require("./ours-postgres") as typeof import("./ours-postgres")).oursPostgres;
    case "ours-redis":
      return (require("./ours-redis") as typeof import("./ours-redis")).oursRedis;
    case "original":
      return (require("./original") as typeof import("./original")).original;
    case "ours-v3-session":
      return (require("./ours-v3-session") as typeof import("./ours-v3-session")).oursV3Session;
    case "etcd3-election":
      return (require("./etcd3-election") as typeof import("./etcd3-election")).etcd3Election;
    case "advisory-lock":
      return (require("./advisory-lock") as typeof import("./advisory-lock")).advisoryLockSubject;
    case "redlock":
      return (require("./redlock") as typeof import("./redlock")).redlockSubject;
    case "redis-leader":
      return (require("./redis-leader") as typeof import("./redis-leader")).redisLeaderSubject;
  }
}
