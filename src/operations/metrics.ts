// Prometheus metrics for every election in the process, through prom-client
// (an optional peer dependency, loaded only when this is called), built on
// the diagnostics channels (src/election/diagnostics.ts): nothing is
// subscribed, and nothing costs, until `etcdLeader.metrics()` is called.
//
// Every series is labelled by `election` (the store and the key, as the
// backend describes it: "etcd v3 /services/billing/leader") and `member`
// (the member's name); followers have every series too, so that the sum of
// `is_leader` over an election's members is the number of leaders (an alert
// on > 1 catches two, on 0 for a TTL catches none). An election's series go
// when it stops, so that a process that makes and stops elections (one per
// tenant) does not pile them up.
import { subscribe, unsubscribe } from "node:diagnostics_channel";
import { channels, type ErrorMessage, type RenewalMessage, type StateMessage } from "../election/diagnostics";
import type { ElectionState } from "../election/state";

/** The part of prom-client's module used here (prom-client 13 to 15). */
export interface PromClient {
  Registry: new () => PromRegistry;
  register: PromRegistry;
  Gauge: new (config: MetricConfig & { collect?: () => void }) => PromGauge;
  Counter: new (config: MetricConfig) => PromCounter;
  Histogram: new (config: MetricConfig & { buckets: number[] }) => PromHistogram;
}

interface MetricConfig {
  name: string;
  help: string;
  labelNames: readonly string[];
  registers: PromRegistry[];
}

/** A prom-client Registry. */
export interface PromRegistry {
  metrics(): Promise<string>;
  readonly contentType: string;
  removeSingleMetric(name: string): void;
}

type Labels = Record<string, string>;
interface PromGauge {
  set(labels: Labels, value: number): void;
  remove(labels: Labels): void;
}
interface PromCounter {
  inc(labels: Labels, value?: number): void;
  remove(labels: Labels): void;
}
interface PromHistogram {
  observe(labels: Labels, value: number): void;
  remove(labels: Labels): void;
}

export interface MetricsOptions {
  /** The prom-client Registry to register on; default prom-client's global `register`. */
  register?: object;
  /** Prefix of every metric's name; default "etcd_leader_". */
  prefix?: string;
  /** The prom-client module to use (the application's own copy); default `require("prom-client")`. */
  client?: object;
  /** Buckets of the renewal round-trip histogram, in seconds. */
  renewalBuckets?: number[];
}

/** What `etcdLeader.metrics()` returns. */
export interface ElectionMetrics {
  /** The registry the metrics are on (serve `await registry.metrics()` at /metrics, with `registry.contentType`). */
  readonly registry: PromRegistry;
  /** Stops collecting and removes the metrics from the registry. */
  close(): void;
}

const STATES: readonly ElectionState[] = ["stopped", "joining", "following", "leading", "backing-off"];
const DEFAULT_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5];
const OPTION_NAMES = new Set(["register", "prefix", "client", "renewalBuckets"]);

/** What is known of one running election, by its Election object. */
interface Tracked {
  readonly labels: Labels;
  /** performance.now() of its start, until its first term. */
  startedAt: number | undefined;
  /** performance.now() of its last confirmed renewal. */
  lastRenewalAt: number | undefined;
}

/**
 * Registers the metrics on `options.register` (default prom-client's global
 * registry) and keeps them up to date for every election in the process
 * until `close()`. Throws, naming what to do, if prom-client is not
 * installed or the options are not what they should be.
 */
export function electionMetrics(options: MetricsOptions = {}): ElectionMetrics {
  if (typeof options !== "object" || options === null) throw new TypeError(`metrics(): options must be an object, got ${options === null ? "null" : typeof options}`);
  for (const name of Object.keys(options)) {
    if (!OPTION_NAMES.has(name)) throw new TypeError(`metrics(): unknown option ${JSON.stringify(name)}; the options are ${[...OPTION_NAMES].join(", ")}`);
  }
  const prom = (options.client ?? loadPromClient()) as PromClient;
  if (!["Gauge", "Counter", "Histogram"].every((name) => typeof (prom as unknown as Record<string, unknown>)[name] === "function")) {
    throw new TypeError("metrics(): client must be the prom-client module (with Gauge, Counter and Histogram)");
  }
  const registry = (options.register ?? prom.register) as PromRegistry;
  const prefix = options.prefix ?? "etcd_leader_";
  if (typeof prefix !== "string" || !/^[a-zA-Z_:][a-zA-Z0-9_:]*$/.test(prefix)) {
    throw new TypeError(`metrics(): prefix must be a Prometheus metric name prefix ([a-zA-Z_:][a-zA-Z0-9_:]*), got ${JSON.stringify(prefix)}`);
  }
  if (typeof registry?.metrics !== "function" || typeof registry.removeSingleMetric !== "function") {
    throw new TypeError("metrics(): register must be a prom-client Registry");
  }
  const buckets = options.renewalBuckets ?? DEFAULT_BUCKETS;
  if (!Array.isArray(buckets) || buckets.length === 0 || !buckets.every((b) => typeof b === "number" && b > 0 && Number.isFinite(b))) {
    throw new TypeError("metrics(): renewalBuckets must be a non-empty list of positive numbers of seconds");
  }

  const tracked = new Map<object, Tracked>();
  const labelNames = ["election", "member"] as const;
  const registers = [registry];
  const names: string[] = [];
  const named = <T>(name: string, make: (name: string) => T): T => {
    names.push(prefix + name);
    return make(prefix + name);
  };
  const isLeader = named("is_leader", (name) => new prom.Gauge({ name, help: "1 while this member leads the election, else 0", labelNames, registers }));
  const state = named("state", (name) =>
    new prom.Gauge({ name, help: "1 for the member's current state (stopped, joining, following, leading, backing-off)", labelNames: [...labelNames, "state"], registers }),
  );
  const token = named("fencing_token", (name) => new prom.Gauge({ name, help: "The fencing token of this member's latest term", labelNames, registers }));
  const changes = named("leadership_changes_total", (name) =>
    new prom.Counter({ name, help: "Terms begun (change=elected) and ended (change=unelected) by this member", labelNames: [...labelNames, "change"], registers }),
  );
  const renewals = named("renewals_total", (name) => new prom.Counter({ name, help: "Renewals the store confirmed", labelNames, registers }));
  const renewalFailures = named("renewal_failures_total", (name) => new prom.Counter({ name, help: "Renewals that failed", labelNames, registers }));
  const errors = named("errors_total", (name) =>
    new prom.Counter({ name, help: "Failed store requests, by the step that made them", labelNames: [...labelNames, "phase"], registers }),
  );
  const roundTrip = named("renewal_seconds", (name) =>
    new prom.Histogram({ name, help: "From sending a renewal to its confirmation", labelNames, registers, buckets }),
  );
  const renewalAge = named("last_renewal_age_seconds", (name) =>
    new prom.Gauge({
      name,
      help: "Seconds since the store last confirmed a renewal of this member's membership",
      labelNames,
      registers,
      collect() {
        const now = performance.now();
        for (const election of tracked.values()) {
          if (election.lastRenewalAt !== undefined) this.set(election.labels, (now - election.lastRenewalAt) / 1000);
        }
      },
    } as MetricConfig & { collect(this: PromGauge): void }),
  );
  const firstTerm = named("time_to_first_term_seconds", (name) =>
    new prom.Gauge({ name, help: "Seconds from the member's start to its first term", labelNames, registers }),
  );

  const forget = (source: object, labels: Labels) => {
    tracked.delete(source);
    for (const metric of [isLeader, token, renewals, renewalFailures, roundTrip, renewalAge, firstTerm]) metric.remove(labels);
    for (const s of STATES) state.remove({ ...labels, state: s });
    for (const change of ["elected", "unelected"]) changes.remove({ ...labels, change });
  };

  const onState = (message: unknown) => {
    const { source, member, store, from, to, token: termToken } = message as StateMessage;
    const labels = { election: store, member };
    let election = tracked.get(source);
    if (to === "stopped") {
      if (election) forget(source, election.labels);
      return;
    }
    if (!election) {
      election = { labels, startedAt: from === "stopped" ? performance.now() : undefined, lastRenewalAt: undefined };
      tracked.set(source, election);
      changes.inc({ ...labels, change: "elected" }, 0);
      changes.inc({ ...labels, change: "unelected" }, 0);
      renewals.inc(labels, 0);
      renewalFailures.inc(labels, 0);
    }
    for (const s of STATES) state.set({ ...labels, state: s }, s === to ? 1 : 0);
    isLeader.set(labels, to === "leading" ? 1 : 0);
    if (to === "leading") {
      changes.inc({ ...labels, change: "elected" });
      if (termToken !== undefined) token.set(labels, termToken);
      if (election.startedAt !== undefined) {
        firstTerm.set(labels, (performance.now() - election.startedAt) / 1000);
        election.startedAt = undefined;
      }
    } else if (from === "leading") {
      changes.inc({ ...labels, change: "unelected" });
    }
  };
  const onRenewal = (message: unknown) => {
    const { source, roundTripMs } = message as RenewalMessage;
    const election = tracked.get(source);
    if (!election) return;
    election.lastRenewalAt = performance.now();
    renewals.inc(election.labels);
    roundTrip.observe(election.labels, roundTripMs / 1000);
  };
  const onError = (message: unknown) => {
    const { source, error } = message as ErrorMessage;
    const election = tracked.get(source);
    if (!election) return;
    errors.inc({ ...election.labels, phase: error.phase });
    if (error.phase === "renew") renewalFailures.inc(election.labels);
  };

  subscribe(channels.state, onState);
  subscribe(channels.renewal, onRenewal);
  subscribe(channels.error, onError);
  let closed = false;
  return {
    registry,
    close() {
      if (closed) return;
      closed = true;
      unsubscribe(channels.state, onState);
      unsubscribe(channels.renewal, onRenewal);
      unsubscribe(channels.error, onError);
      for (const name of names) registry.removeSingleMetric(name);
      tracked.clear();
    },
  };
}

function loadPromClient(): PromClient {
  try {
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    return require("prom-client") as PromClient;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== "MODULE_NOT_FOUND") throw err;
    throw new Error("metrics() needs prom-client: npm install prom-client (or pass your copy as { client })", { cause: err });
  }
}
