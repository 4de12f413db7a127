// This library on PostgreSQL, through node-postgres: one pg.Pool per member,
// as in its own process, with the keepAlive the docs ask for. At most two
// connections: the election's LISTEN holds one, its statements take turns on
// the other.
import pg from "pg";
import { postgresLeader } from "../../src/postgres";
import { DeferredMember } from "./deferred-member";
import { SUBJECTS } from "./info";
import type { MemberListener, MemberSpec, Subject, SubjectRuntime } from "./types";

export const POSTGRES_POOL_MAX = 2;

/** A member's own pool: named after it (pg_stat_activity says whose a connection is), and never throwing an unheard `error`. */
export function poolFor(url: string, spec: MemberSpec, listener: MemberListener): pg.Pool {
  const pool = new pg.Pool({ connectionString: url, max: POSTGRES_POOL_MAX, keepAlive: true, application_name: spec.name });
  pool.on("error", (err) => listener.note(`pool: ${err.message}`));
  return pool;
}

export const oursPostgres: Subject = {
  ...SUBJECTS.find((s) => s.id === "ours-postgres")!,
  runtime(hosts: string[]): SubjectRuntime {
    return {
      clientNote: `one pg.Pool per member (max ${POSTGRES_POOL_MAX} connections, keepAlive); the library's table of leases`,
      member(spec, listener) {
        const pool = poolFor((spec.hosts ?? hosts)[0]!, spec, listener);
        return new DeferredMember(
          spec.name,
          listener,
          () => postgresLeader(pool, spec.key, spec.name, { ttl: spec.ttl }),
          () => pool.end(),
        );
      },
      async close() {},
    };
  },
};
