// This library on Redis, through ioredis: one client per member, as in its
// own process, with ioredis's defaults. The server runs with keyspace
// notifications off, as Redis ships: a follower learns of an expiry by one
// check when the holder's key must have run out.
import { Redis } from "ioredis";
import { redisLeader } from "../../src/redis";
import { DeferredMember } from "./deferred-member";
import { SUBJECTS } from "./info";
import type { MemberListener, MemberSpec, Subject, SubjectRuntime } from "./types";

export const REDIS_CLIENT_NOTE = "one ioredis client per member, ioredis's defaults";

/** A member's own client: named after it (CLIENT LIST says whose it is), and never throwing an unheard `error`. */
export function redisClientFor(url: string, spec: MemberSpec, listener: MemberListener): Redis {
  const client = new Redis(url, { connectionName: spec.name });
  client.on("error", (err: Error) => listener.note(`ioredis: ${err.message}`));
  return client;
}

export const oursRedis: Subject = {
  ...SUBJECTS.find((s) => s.id === "ours-redis")!,
  runtime(hosts: string[]): SubjectRuntime {
    return {
      clientNote: REDIS_CLIENT_NOTE,
      member(spec, listener) {
        const redis = redisClientFor((spec.hosts ?? hosts)[0]!, spec, listener);
        return new DeferredMember(
          spec.name,
          listener,
          () => redisLeader(redis, spec.key, spec.name, { ttl: spec.ttl }),
          async () => redis.disconnect(),
        );
      },
      async close() {},
    };
  },
};
