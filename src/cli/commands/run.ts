// `etcd-leader run KEY [--] COMMAND...`: join the election at KEY and run
// COMMAND only while this member leads, built on election.whileLeading().
//
// - Elected: the begin hook (if any), then the command starts, with the term
//   in its environment (ETCD_LEADER_TOKEN, ETCD_LEADER_KEY, ETCD_LEADER_NAME).
// - The term ends (whileLeading's signal aborts, at the latest at the lease
//   deadline, so before any successor can be elected): the command's process
//   group gets the stop signal at once and SIGKILL after the grace period;
//   then the end hook; the command starts again in this member's next term.
// - The command exits by itself while leading: with --restart it starts again
//   (after a second); otherwise the end hook runs, the member leaves, and the
//   CLI exits with the command's code. The command is its whole process
//   group: one whose first process exits while others of its group run on (a
//   forked daemon) still runs, is stopped at the term's end, and has exited
//   only once none of them is left; its code is the first process's.
// - SIGINT, SIGTERM or SIGHUP to the CLI: the command is stopped as above,
//   the end hook runs, the member leaves, and the CLI exits 0.
// - SIGUSR1 to the CLI of the leader: it yields (election.yield()): the
//   command is stopped as at any term's end, the next member takes over, and
//   this one waits at the back of the line, its command to start again in
//   its next term.
// - Without a command, the hooks alone mark the term (elector's model).
import { subscribe, unsubscribe } from "node:diagnostics_channel";
import etcdLeader = require("../../index");
import { delay } from "../supervise/delay";
import { CliError, EXIT } from "../exit";
import { Hooks, type HookSettings } from "../supervise/hooks";
import { OrphanGuard } from "../supervise/orphan-guard-client";
import { ProcessGroup, type Exit } from "../supervise/process-group";
import type { Reporter } from "../report";
import type { Store, StoreElectionOptions } from "../stores/store";
import { metricsHandler, serveEndpoints, type EndpointSettings, type Endpoints } from "../serve/endpoints";
import { readLeader } from "./who";

export interface RunSettings {
  key: string;
  name: string;
  /** Seconds; undefined: the store's default (etcd 10, NATS the bucket's TTL). */
  ttl: number | undefined;
  /** The command and its arguments; empty when hooks alone mark the term. */
  command: string[];
  restart: boolean;
  stopSignal: NodeJS.Signals;
  graceMs: number;
  hooks: Omit<HookSettings, "stopSignal" | "graceMs">;
  /** How long a member whose begin hook failed stays out of the election. */
  errorDelayMs: number;
  /** Report every renewal (the lease deadline it moved), not only changes of state. */
  verbose: boolean;
  /** The election's own options the flags set (watchRearmInterval on etcd, goMembers on NATS). */
  electionOptions: StoreElectionOptions;
  /** Where to serve /livez and /readyz (and how to judge them) and /metrics; each undefined: not served. */
  endpoints: EndpointSettings;
}

/** How long a command the orphan guard stopped at the lease deadline waits for this process's own step-down. */
const GUARD_RACE_MS = 500;
/** A pause between runs of a command that keeps exiting while --restart keeps it going. */
const RESTART_DELAY_MS = 1_000;

/** The begin hook failed with the term still on: leave, wait, rejoin. */
class BeginHookFailed extends Error {}

/** The end hook failed after its retries: leave and exit 75. */
class EndHookFailed extends CliError {
  constructor() {
    super(
      EXIT.endHookFailed,
      "the on-unelected hook still failed after its retries, so whatever the on-elected hook started may still run; " +
        "this member has left the election and exits for a supervisor to restart it",
    );
  }
}

export async function run(store: Store, settings: RunSettings, reporter: Reporter, shutdown: AbortSignal): Promise<number> {
  const { key, name } = settings;
  await readLeader(store, key, 5_000);
  // Collecting from before the election exists, so that its first state is counted.
  const metrics = metricsHandler(settings.endpoints);
  let election: etcdLeader.Election;
  let endpoints: Endpoints;
  try {
    election = await store.election(key, name, settings.ttl, settings.electionOptions);
    endpoints = await serveEndpoints(election, settings.endpoints, metrics);
  } catch (err) {
    metrics?.close();
    throw err;
  }
  if (endpoints.healthUrl) {
    reporter.state("health", `health probes at ${endpoints.healthUrl}/livez and ${endpoints.healthUrl}/readyz`, { url: endpoints.healthUrl });
  }
  if (endpoints.metricsUrl) reporter.state("metrics", `metrics at ${endpoints.metricsUrl}/metrics`, { url: endpoints.metricsUrl });
  const leaseUntil = () => Date.now() + election.leaseRemaining();
  election.on("elected", (token) =>
    reporter.state("elected", `${name} leads ${key} (fencing token ${token})`, { token, until: new Date(leaseUntil()).toISOString() }),
  );
  election.on("unelected", () => reporter.state("unelected", `${name} no longer leads ${key}`));
  election.on("leader", (leader) => reporter.state("leader", `${leader} leads ${key}; ${name} waits`, { leader }));
  election.on("error", (err) => reporter.state("error", `store trouble, retrying: ${err.message}`, { error: err.message }));

  const guard = OrphanGuard.start();
  // Every confirmed renewal moves the lease deadline: the guard learns it, so
  // that it stops the command on time even if this process is frozen then.
  const onRenewal = (message: unknown) => {
    const renewal = message as etcdLeader.RenewalMessage;
    if (renewal.source !== election || !renewal.leading) return;
    const until = leaseUntil();
    guard.lease(until);
    if (settings.verbose) {
      reporter.state("renewed", `${name} renewed its lease: it leads ${key} until ${new Date(until).toISOString()}`, {
        until: new Date(until).toISOString(),
        roundTripMs: Math.round(renewal.roundTripMs),
      });
    }
  };
  subscribe(etcdLeader.channels.renewal, onRenewal);
  // SIGUSR1: give the term up to the next member and go to the back of the line, still in the election.
  const onYieldSignal = () => {
    if (!election.isLeader()) {
      reporter.state("yield", `SIGUSR1: ${name} does not lead ${key}; nothing to yield`, { leading: false });
      return;
    }
    reporter.state("yield", `SIGUSR1: ${name} yields ${key} and goes to the back of the line`, { leading: true });
    election.yield().then(
      () => reporter.state("yielded", `${name} yielded: ${election.currentLeader() ?? "nobody"} leads ${key}`, { leader: election.currentLeader() }),
      () => undefined, // stopped meanwhile: its own report says so
    );
  };
  process.on("SIGUSR1", onYieldSignal);
  const hooks = new Hooks({ ...settings.hooks, stopSignal: settings.stopSignal, graceMs: settings.graceMs }, guard, reporter);
  // Aborted by SIGINT/SIGTERM, or by an end hook that failed: either way the member leaves.
  const stopping = new AbortController();
  const onShutdown = () => stopping.abort(shutdown.reason);
  let endHookFailure: EndHookFailed | undefined;
  shutdown.addEventListener("abort", onShutdown, { once: true });

  const term = async ({ signal, token, leaseRemaining }: etcdLeader.LeadershipTerm): Promise<number> => {
    guard.lease(Date.now() + leaseRemaining());
    // Registered before anything is started, so the guard forgets the deadline
    // before the end hook runs.
    signal.addEventListener("abort", () => guard.lease(undefined), { once: true });
    if (signal.aborted) guard.lease(undefined);
    const env = { ...process.env, ETCD_LEADER_TOKEN: String(token), ETCD_LEADER_KEY: key, ETCD_LEADER_NAME: name };
    if (!(await hooks.begin(env, signal))) {
      await endOfTerm(env);
      if (signal.aborted) return EXIT.ok; // a lost term: whileLeading runs this again next term
      throw new BeginHookFailed();
    }
    try {
      return settings.command.length > 0 ? await runCommand(env, signal) : await ended(signal);
    } finally {
      await endOfTerm(env);
    }
  };

  const endOfTerm = async (env: NodeJS.ProcessEnv) => {
    if (await hooks.end(env)) return;
    endHookFailure ??= new EndHookFailed();
    stopping.abort(endHookFailure);
  };

  const runCommand = async (env: NodeJS.ProcessEnv, signal: AbortSignal): Promise<number> => {
    const [command, ...args] = settings.command as [string, ...string[]];
    for (;;) {
      if (signal.aborted) return EXIT.ok;
      const child = await ProcessGroup.start(
        { command, args, env, stopSignal: settings.stopSignal, graceMs: settings.graceMs },
        guard,
      );
      reporter.state("command-start", `started ${command} (pid ${child.pid})`, { pid: child.pid, token: Number(env.ETCD_LEADER_TOKEN) });
      const stop = () => {
        const why = signal.reason instanceof Error ? signal.reason.message : String(signal.reason);
        reporter.state("command-stop", `stopping ${command} (pid ${child.pid}) with ${settings.stopSignal}: ${why}`, {
          pid: child.pid,
          signal: settings.stopSignal,
          reason: why,
          // LeaseExpiredError, MembershipRemovedError, ElectionStoppedError:
          // why the term ended, for scripts.
          cause: signal.reason instanceof Error ? signal.reason.name : undefined,
        });
        void child.stop();
      };
      signal.addEventListener("abort", stop, { once: true });
      if (signal.aborted) stop();
      void child.exited.then((first) => {
        // Checked a tick after the exit, once the group was first looked for.
        if (child.isGone) return;
        reporter.state(
          "command-runs-on",
          `${command} (pid ${child.pid}) exited (${describeExit(first)}), and processes of its group run on: the command runs until they are gone`,
          { pid: child.pid, code: first.code, signal: first.signal },
        );
      });
      // The command runs until no process of its group does, whatever its first process did.
      const exit = await child.gone;
      signal.removeEventListener("abort", stop);
      reporter.state("command-exit", `${command} (pid ${child.pid}) exited: ${describeExit(exit)}`, {
        pid: child.pid,
        code: exit.code,
        signal: exit.signal,
      });
      if (signal.aborted) return EXIT.ok;
      if (guard.leaseRanOut()) {
        // The guard stopped it: the lease deadline passed. This process steps
        // down at that same deadline on a timer of its own, which the guard's,
        // in another process, may beat by a millisecond. That is the term's
        // end, not an exit of the command's own (which would end the CLI with
        // its code). Should a renewal have moved the deadline just then, the
        // term goes on, and so does the command.
        await delay(GUARD_RACE_MS, signal);
        if (signal.aborted) return EXIT.ok;
        continue;
      }
      if (!settings.restart) return exit.code;
      await delay(RESTART_DELAY_MS, signal);
    }
  };

  try {
    for (;;) {
      try {
        reporter.state("joining", `${name} joins the election at ${key}`);
        const code = await election.whileLeading(term, { signal: stopping.signal });
        reporter.state("left", `${name} left the election at ${key}`);
        return code;
      } catch (err) {
        if (err instanceof BeginHookFailed) {
          reporter.state("error-state", `the on-elected hook failed: ${name} left the election and rejoins in ${settings.errorDelayMs} ms`, {
            delayMs: settings.errorDelayMs,
          });
          await delay(settings.errorDelayMs, stopping.signal);
          if (stopping.signal.aborted) break;
          continue;
        }
        if (isAbortError(err)) break;
        throw err;
      }
    }
    reporter.state("left", `${name} left the election at ${key}`);
    if (endHookFailure) throw endHookFailure;
    return EXIT.ok;
  } finally {
    shutdown.removeEventListener("abort", onShutdown);
    unsubscribe(etcdLeader.channels.renewal, onRenewal);
    process.off("SIGUSR1", onYieldSignal);
    guard.close();
    await endpoints.close();
    metrics?.close();
  }
}

function describeExit(exit: Exit): string {
  return exit.signal ? `killed by ${exit.signal}` : `code ${exit.code}`;
}

function ended(signal: AbortSignal): Promise<number> {
  return new Promise((resolve) => {
    if (signal.aborted) resolve(EXIT.ok);
    else signal.addEventListener("abort", () => resolve(EXIT.ok), { once: true });
  });
}

function isAbortError(err: unknown): boolean {
  return err instanceof Error && err.name === "AbortError";
}
