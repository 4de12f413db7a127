// The package entry. `require("etcd-leader")` returns the factory itself, as
// etcd-leader 0.0.1 did; everything else hangs off it.
import { inspect } from "node:util";
import type * as contract from "./contract/backend";
import * as answers from "./contract/answers";
import * as etcd3 from "./stores/etcd-v3/etcd3/options";
import { backendFor } from "./stores/select";
import * as diagnostics from "./election/diagnostics";
import * as election from "./election/election";
import type * as health from "./election/health";
import * as healthProbes from "./operations/health-handler";
import * as promMetrics from "./operations/metrics";
import * as errors from "./contract/errors";
import type * as changes from "./leadership/leader-feed";
import * as lost from "./leadership/lost";
import * as observer from "./election/observer";
import { resolveOptions, type ElectionOptions as Options } from "./election/options";
import type * as scope from "./leadership/while-leading";
import * as etcdSession from "./stores/etcd-v3/session/etcd-session";
import { resolveSessionOptions, type SessionElectionOptions as ElectionOnSession, type SessionOptions as SessionTiming } from "./stores/etcd-v3/session/session-options";
import { isEtcd3Client } from "./stores/etcd-v3/etcd3/client";
import * as settings from "./stores/settings";
import type * as state from "./election/state";
import type * as waiting from "./leadership/when-elected";
import * as who from "./stores/who-leads";
import * as inLine from "./stores/candidates";
import type * as lineTypes from "./election/candidates";


/**
 * Creates a member of the election at `key`, named `name`, whose membership
 * lives `ttl` seconds without renewal (default 10). Call `.start()` to join.
 *
 * `ttl` may also be an options object, or options may follow it. Or pass one
 * object: `etcdLeader({ client, key, name, ttl, ...options })`.
 */
function etcdLeader(settings: etcdLeader.ElectionSettings): election.Election;
function etcdLeader(client: unknown, key: string, name: string, ttl?: number | string, options?: Options): election.Election;
function etcdLeader(client: unknown, key: string, name: string, options: Options): election.Election;
function etcdLeader(
  client: unknown,
  key?: string,
  name?: string,
  ttl?: number | string | Options,
  options?: Options,
): election.Election {
  if (settings.isSettingsObject(client, key)) {
    const parts = settings.splitSettings(client as settings.ElectionSettings);
    return etcdLeader(parts.client, parts.key, parts.name!, parts.options);
  }
  if (!client) throw new Error("etcd is required");
  const electionKey = argument("key", key);
  const memberName = argument("name", name);
  const optionsFirst = typeof ttl === "object" && ttl !== null;
  if (optionsFirst && options !== undefined) {
    throw new TypeError(
      "options given twice, as the fourth argument and as the fifth: pass one options object (the ttl may go in it)",
    );
  }
  const given = optionsFirst ? ttl : options;
  const resolved = optionsFirst ? resolveOptions(undefined, ttl) : resolveOptions(ttl, options);
  const backend = backendFor(client, electionKey, memberName, resolved, given);
  return new election.Election(backend, memberName, resolved);
}

/**
 * The key or the name as etcd-leader 0.0.1 took it, with its messages for a
 * missing one; numbers are accepted as 0.0.1 accepted them, but any other
 * value would be written as something like "[object Object]".
 */
function argument(what: "key" | "name", value: unknown): string {
  if (!value || !String(value).trim()) throw new Error(`node ${what} not specified`);
  if (typeof value !== "string" && typeof value !== "number") {
    throw new TypeError(`node ${what} must be a string or a number, got ${typeof value} ${inspect(value, { depth: 0 })}`);
  }
  return String(value);
}

namespace etcdLeader {
  /**
   * Follows who leads the election at `key` without joining it: `leader`
   * events, `currentLeader()`, and `for await (const leader of observer)`.
   * Call `.start()` to begin (iterating starts it too).
   */
  export function observe(settings: ObserverSettings): observer.LeaderObserver;
  export function observe(client: unknown, key: string, options?: Options): observer.LeaderObserver;
  export function observe(client: unknown, key?: string, options?: Options): observer.LeaderObserver {
    if (settings.isSettingsObject(client, key)) {
      const parts = settings.splitSettings(client as ObserverSettings);
      return observe(parts.client, parts.key, parts.options);
    }
    if (!client) throw new Error("etcd is required");
    const electionKey = argument("key", key);
    const resolved = resolveOptions(undefined, options);
    // The name is never written: an observer holds no membership.
    const backend = backendFor(client, electionKey, "observer", resolved, options);
    return new observer.LeaderObserver(backend, resolved);
  }

  /**
   * One read of who leads the election at `key`, without joining it:
   * `{ name, token }`, or undefined while nobody leads.
   */
  export function whoLeads(target: WhoLeadsSettings): Promise<Leader | undefined>;
  export function whoLeads(client: unknown, key: string, options?: WhoLeadsOptions): Promise<Leader | undefined>;
  export function whoLeads(client: unknown, key?: string, options?: WhoLeadsOptions): Promise<Leader | undefined> {
    if (settings.isSettingsObject(client, key)) {
      const { client: c, key: k, options: o } = settings.splitSettings(client as WhoLeadsSettings);
      return who.whoLeads(c, k, o);
    }
    if (!client) throw new Error("etcd is required");
    return who.whoLeads(client, argument("key", key), options);
  }

  /**
   * Who is in line at the election at `key`, read once without joining it:
   * `{ scope: "line", members }`, every member in order, the leader first,
   * each `{ name, token }`. Bounded by the request timeout. Bad arguments
   * throw at once, as whoLeads's do.
   */
  export function candidates(target: WhoLeadsSettings): Promise<Candidates>;
  export function candidates(client: unknown, key: string, options?: WhoLeadsOptions): Promise<Candidates>;
  export function candidates(client: unknown, key?: string, options?: WhoLeadsOptions): Promise<Candidates> {
    if (settings.isSettingsObject(client, key)) {
      const { client: c, key: k, options: o } = settings.splitSettings(client as WhoLeadsSettings);
      return inLine.candidates(c, k, o);
    }
    if (!client) throw new Error("etcd is required");
    return inLine.candidates(client, argument("key", key), options);
  }

  /**
   * Options for `new Etcd3(...)` that elections need: gRPC keepalive, so a
   * connection that went silent is replaced in about 9 s instead of lasting
   * until the kernel's TCP timeout, and a circuit breaker that half-opens
   * after 250 ms instead of 5 s. `overrides` win (hosts, credentials, ...).
   */
  export const etcd3Options = etcd3.etcd3Options;

  /**
   * An etcd v3 session, as etcd's concurrency.Session: one lease, kept alive
   * by one keep-alive per refresh interval, for every election made on it
   * with `session.election(key, name)`. `await session.close()` (or `await
   * using`) leaves them all with one LeaseRevoke. `client` is an etcd3 client;
   * `options.ttl` is the lease's (default 10 s).
   */
  export function session(client: unknown, options?: SessionOptions): Session {
    if (!client) throw new Error("etcd is required");
    if (!isEtcd3Client(client)) {
      throw new TypeError(
        "a session needs an etcd3 client (new Etcd3({ hosts })): it shares one etcd v3 lease, which the v2 API and NATS KV do not have",
      );
    }
    const resolved = resolveSessionOptions(options);
    return new etcdSession.EtcdSession(client, { ...options }, resolved);
  }

  /**
   * A request handler answering `GET /livez` and `GET /readyz` with 200 or
   * 503 and a JSON body, from `election.health()`: for `http.createServer()`,
   * or as middleware (`app.use(...)`; other paths go to `next`). `target` is
   * an election, a list of them, or a function returning them at each probe.
   */
  export const healthHandler = healthProbes.healthHandler;

  /**
   * Prometheus metrics for every election in the process, on prom-client
   * (install it; it is loaded only when this is called): is_leader,
   * fencing_token, leadership_changes_total, renewals_total,
   * renewal_failures_total, renewal_seconds, last_renewal_age_seconds,
   * time_to_first_term_seconds, state and errors_total, labelled by election
   * and member. `options.register`: your registry (default prom-client's
   * global one). `close()` stops and unregisters them.
   */
  export const metrics = promMetrics.electionMetrics;

  /** The node:diagnostics_channel names this package publishes on (see src/election/diagnostics.ts for the messages). */
  export const channels = diagnostics.channels;

  /**
   * Creates a member of an election on a store of your own: `backend`
   * implements the contract (`ElectionBackend`) for one election key, and
   * reports the TTL it applies with every claim. Everything else (events,
   * methods, step-down) is as with etcd. `options.ttl` sets the timing
   * defaults; a store that keeps memberships for less than they need is
   * reported as an error and never led on.
   */
  export function withBackend<M extends contract.Membership>(
    backend: contract.ElectionBackend<M>,
    name: string,
    options?: Options,
  ): election.Election<M> {
    checkBackend(backend);
    const memberName = argument("name", name);
    return new election.Election(backend, memberName, resolveOptions(undefined, options));
  }

  /** Follows who leads an election on a store of your own without joining it. */
  export function observeBackend(backend: contract.ElectionBackend, options?: Options): observer.LeaderObserver {
    checkBackend(backend);
    return new observer.LeaderObserver(backend, resolveOptions(undefined, options));
  }

  export type ElectionBackend<M extends Membership = Membership> = contract.ElectionBackend<M>;
  export type Membership = contract.Membership;
  export type Claim<M extends Membership = Membership> = contract.Claim<M>;
  export type Renewed = contract.Renewed;
  export type LeaderListener = contract.LeaderListener;
  export type ElectionOptions = Options;
  export type SessionOptions = SessionTiming;
  export type SessionElectionOptions = ElectionOnSession;
  export type ElectionEvents = election.ElectionEvents;
  export type ObserverEvents = observer.ObserverEvents;
  export type ElectionPhase = errors.ElectionPhase;
  export type ElectionSettings = settings.ElectionSettings;
  export type ObserverSettings = settings.ObserverSettings;
  export type ElectionTarget = settings.ElectionTarget;
  export type WhoLeadsOptions = who.WhoLeadsOptions;
  export type Etcd3Options = etcd3.Etcd3Options;
  export type WhoLeadsSettings = ElectionTarget & WhoLeadsOptions;
  export type StartOptions = election.StartOptions;
  export type ObserverStartOptions = observer.ObserverStartOptions;
  export type Leader = contract.Leader;
  export type LeaderChanges = changes.LeaderChanges;
  export type LeadershipTerm = scope.LeadershipTerm;
  export type LeadershipRoutine<T> = scope.LeadershipRoutine<T>;
  export type WhileLeadingOptions = scope.WhileLeadingOptions;
  export type OnLoss = scope.OnLoss;
  export type WaitOptions = waiting.WaitOptions;
  export type ElectionState = state.ElectionState;
  export type Candidates = lineTypes.Candidates;
  export type FencedWriteResult = contract.FencedWriteResult;
  export type MetricsOptions = promMetrics.MetricsOptions;
  export type ElectionMetrics = promMetrics.ElectionMetrics;
  export type HealthOptions = health.HealthOptions;
  export type ElectionHealth = health.ElectionHealth;
  export type HealthVerdict = health.Verdict;
  export type Readiness = health.Readiness;
  export type HealthTarget = healthProbes.HealthTarget;
  export type HealthRequestHandler = healthProbes.HealthRequestHandler;
  export type HealthAnswer = healthProbes.HealthAnswer;
  export type StateMessage = diagnostics.StateMessage<election.Election>;
  export type RenewalMessage = diagnostics.RenewalMessage<election.Election>;
  export type RetryMessage = diagnostics.RetryMessage<election.Election | observer.LeaderObserver>;
  export type ErrorMessage = diagnostics.ErrorMessage<election.Election | observer.LeaderObserver>;

  export import Election = election.Election;
  export import LeaderObserver = observer.LeaderObserver;
  export import Session = etcdSession.EtcdSession;
  export import SessionClosedError = etcdSession.SessionClosedError;
  export import ElectionError = errors.ElectionError;
  export import MembershipLostError = errors.MembershipLostError;
  export import InvalidClaimError = answers.InvalidClaimError;
  export import RequestTimeoutError = errors.RequestTimeoutError;
  export import LeaseExpiredError = election.LeaseExpiredError;
  export import LeadershipLostError = lost.LeadershipLostError;
  export import ElectionStoppedError = lost.ElectionStoppedError;
  export import MembershipRemovedError = lost.MembershipRemovedError;
  export import LeadershipYieldedError = lost.LeadershipYieldedError;
}

export = etcdLeader;

const BACKEND_METHODS = ["awaitTurn", "renew", "awaitLoss", "leave", "observe", "readLeader"] as const;

function checkBackend(backend: unknown): void {
  const missing = BACKEND_METHODS.filter((method) => typeof (backend as Record<string, unknown> | null)?.[method] !== "function");
  if (missing.length > 0) {
    throw new TypeError(`backend must implement ElectionBackend: missing ${missing.join(", ")}`);
  }
  const join = (backend as { join?: unknown }).join;
  if (join !== undefined && typeof join !== "function") throw new TypeError("backend.join must be a function or absent");
}
