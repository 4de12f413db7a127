// What a session takes, and what each election made on it may add. The lease's
// timing (its TTL, how often it is kept alive, how long a request may take) is
// the session's alone: every election on it counts its deadline from the same
// keep-alive, so only what concerns one election (how early its leader steps
// down, how it backs off) may differ between them.
import { resolveOptions, type ElectionOptions, type ResolvedOptions } from "../../../election/options";

/** `etcdLeader.session(client, options)`: the lease's timing, and defaults for its elections. */
export type SessionOptions = Pick<
  ElectionOptions,
  "ttl" | "refreshInterval" | "stepDownMargin" | "requestTimeout" | "retryInitialDelay" | "retryMaxDelay"
>;

/** `session.election(key, name, options)`: what one election on a session may set for itself. */
export type SessionElectionOptions = Pick<ElectionOptions, "stepDownMargin" | "retryInitialDelay" | "retryMaxDelay" | "drainTimeout">;

const SESSION_OPTIONS: ReadonlySet<string> = new Set(
  Object.keys({
    ttl: true,
    refreshInterval: true,
    stepDownMargin: true,
    requestTimeout: true,
    retryInitialDelay: true,
    retryMaxDelay: true,
  } satisfies Record<keyof SessionOptions, true>),
);

const ELECTION_OPTIONS: ReadonlySet<string> = new Set(
  Object.keys({ stepDownMargin: true, retryInitialDelay: true, retryMaxDelay: true, drainTimeout: true } satisfies Record<keyof SessionElectionOptions, true>),
);

/** The session's options, every default filled in and checked as an election's are. */
export function resolveSessionOptions(options: unknown): ResolvedOptions {
  const given = objectOf(options, "session options");
  for (const name of Object.keys(given)) {
    if (!SESSION_OPTIONS.has(name)) {
      throw new TypeError(
        `unknown session option ${JSON.stringify(name)}; a session takes ${[...SESSION_OPTIONS].join(", ")}`,
      );
    }
  }
  return resolveOptions(undefined, given as SessionOptions);
}

/** One election's options on a session whose own options were `session`. */
export function resolveElectionOnSession(session: SessionOptions, options: unknown): ResolvedOptions {
  const given = objectOf(options, "options");
  for (const name of Object.keys(given)) {
    if (ELECTION_OPTIONS.has(name)) continue;
    if (SESSION_OPTIONS.has(name)) {
      throw new TypeError(
        `${name} is the session's: every election on a session shares its lease, so set it in etcdLeader.session(client, { ${name} })`,
      );
    }
    throw new TypeError(`unknown option ${JSON.stringify(name)}; an election on a session takes ${[...ELECTION_OPTIONS].join(", ")}`);
  }
  return resolveOptions(undefined, { ...session, ...(given as SessionElectionOptions) });
}

function objectOf(options: unknown, what: string): Record<string, unknown> {
  if (options === undefined) return {};
  if (typeof options !== "object" || options === null || Array.isArray(options)) {
    throw new TypeError(`${what} must be an object, got ${options === null ? "null" : typeof options}`);
  }
  return options as Record<string, unknown>;
}
