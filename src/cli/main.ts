#!/usr/bin/env node
// The `etcd-leader` command: parses the arguments (node:util parseArgs),
// prints help, builds the client and hands over to one command (run, who,
// watch). Every failure ends here: a CliError's message is printed as it is,
// with its exit code; anything else is an internal error (70), shown without
// a stack trace unless DEBUG is set.
import { hostname } from "node:os";
import { constants } from "node:os";
import { parseArgs, type ParseArgsConfig } from "node:util";
import { connect, type Api, type ConnectionFlags } from "./stores/clients";
import { CliError, EXIT } from "./exit";
import { RUN_HELP, TOOL_HELP, WATCH_HELP, WHO_HELP } from "./help";
import { Reporter } from "./report";
import { run, type RunSettings } from "./commands/run";
import { parseAddress, type Address, type HealthSettings } from "./serve/endpoints";
import type { Store } from "./stores/store";
import { watch } from "./commands/watch";
import { who } from "./commands/who";

type Options = NonNullable<ParseArgsConfig["options"]>;

const COMMON: Options = {
  endpoints: { type: "string" },
  api: { type: "string" },
  cacert: { type: "string" },
  cert: { type: "string" },
  key: { type: "string" },
  user: { type: "string" },
  password: { type: "string" },
  backend: { type: "string" },
  server: { type: "string" },
  bucket: { type: "string" },
  tlscert: { type: "string" },
  tlskey: { type: "string" },
  tlsca: { type: "string" },
  url: { type: "string" },
  table: { type: "string" },
  json: { type: "boolean" },
  quiet: { type: "boolean" },
  help: { type: "boolean", short: "h" },
};

const RUN: Options = {
  ...COMMON,
  name: { type: "string" },
  ttl: { type: "string" },
  signal: { type: "string" },
  grace: { type: "string" },
  restart: { type: "boolean" },
  "on-elected": { type: "string" },
  "on-unelected": { type: "string" },
  "hook-retries": { type: "string" },
  "hook-timeout": { type: "string" },
  "error-delay": { type: "string" },
  "watch-rearm": { type: "string" },
  "go-members": { type: "boolean" },
  verbose: { type: "boolean" },
  "health-addr": { type: "string" },
  "metrics-addr": { type: "string" },
  readiness: { type: "string" },
  "unhealthy-after": { type: "string" },
};

type Values = Record<string, string | boolean | undefined>;

const WHO: Options = { ...COMMON, all: { type: "boolean" } };

const COMMANDS = {
  run: { options: RUN, help: RUN_HELP },
  who: { options: WHO, help: WHO_HELP },
  status: { options: WHO, help: WHO_HELP },
  watch: { options: COMMON, help: WATCH_HELP },
} as const;

type CommandName = keyof typeof COMMANDS;

export async function main(argv: string[], shutdown: AbortSignal): Promise<number> {
  const [commandName, ...rest] = argv;
  if (commandName === undefined || commandName === "--help" || commandName === "-h" || commandName === "help") {
    const topic = commandName === "help" ? rest[0] : undefined;
    process.stdout.write(`${topic && topic in COMMANDS ? COMMANDS[topic as CommandName].help : TOOL_HELP}\n`);
    return commandName === undefined ? EXIT.usage : EXIT.ok;
  }
  if (commandName === "--version") {
    process.stdout.write(`${require("etcd-leader/package.json").version}\n`);
    return EXIT.ok;
  }
  if (!(commandName in COMMANDS)) {
    throw usage(`unknown command ${JSON.stringify(commandName)}: the commands are run, who and watch`);
  }
  const command = commandName as CommandName;
  const { values, positionals, commandLine } = parse(command, rest);
  if (values.help) {
    process.stdout.write(`${COMMANDS[command].help}\n`);
    return EXIT.ok;
  }
  const key = positionals[0];
  if (key === undefined || key === "") throw usage(`${command} needs the election key, e.g. etcd-leader ${command} /services/mailer/leader`, command);
  if (command !== "run" && positionals.length > 1) {
    throw usage(`${command} takes one key, got also ${JSON.stringify(positionals.slice(1).join(" "))}`, command);
  }
  const reporter = new Reporter(values.quiet ? "quiet" : values.json ? "json" : "text");
  const settings = command === "run" ? runSettings(key, values, commandLine) : undefined;
  const store = await connect(connectionFlags(values));
  try {
    if (command === "run") return await run(store, settings!, reporter, shutdown);
    if (command === "watch") return await watch(store, key, !!values.json, reporter, shutdown);
    return await who(store, key, !!values.json, !!values.all);
  } finally {
    await close(store);
  }
}

/**
 * For `run`, everything from the second positional argument on is the
 * command and its own arguments, flags included, so they are cut off before
 * etcd-leader's flags are parsed strictly. A `--` before the command also works.
 */
function parse(command: CommandName, args: string[]): { values: Values; positionals: string[]; commandLine: string[] } {
  const options = COMMANDS[command].options;
  let own = args;
  let commandLine: string[] = [];
  if (command === "run") {
    const { tokens } = parseArgs({ args, options, strict: false, allowPositionals: true, tokens: true });
    const start = tokens.filter((token) => token.kind === "positional")[1];
    if (start) {
      own = args.slice(0, start.index);
      commandLine = args.slice(start.index);
    }
  }
  try {
    const { values, positionals } = parseArgs({ args: own, options, strict: true, allowPositionals: true });
    return { values: values as Values, positionals, commandLine };
  } catch (err) {
    throw usage((err as Error).message.replace(/\. To specify a positional argument.*$/s, ""), command);
  }
}

function runSettings(key: string, values: Values, commandLine: string[]): RunSettings {
  const onElected = values["on-elected"] as string | undefined;
  const onUnelected = values["on-unelected"] as string | undefined;
  if (commandLine.length === 0 && onElected === undefined && onUnelected === undefined) {
    throw usage("run needs a command to run while leading (after the key), or --on-elected/--on-unelected hooks", "run");
  }
  return {
    key,
    name: (values.name as string | undefined) ?? `${hostname()}-${process.pid}`,
    ttl: values.ttl === undefined ? undefined : number(values, "ttl", 0, { integer: true, min: 1 }),
    command: commandLine,
    restart: !!values.restart,
    stopSignal: signalName(values.signal as string | undefined),
    graceMs: number(values, "grace", 5, { min: 0 }) * 1000,
    hooks: {
      onElected,
      onUnelected,
      retries: number(values, "hook-retries", 3, { integer: true, min: 0 }),
      timeoutMs: number(values, "hook-timeout", 60, { min: 0.001 }) * 1000,
    },
    errorDelayMs: number(values, "error-delay", 10, { min: 0 }) * 1000,
    verbose: !!values.verbose,
    endpoints: { health: healthSettings(values), metrics: metricsAddress(values) },
    electionOptions: {
      ...(values["watch-rearm"] === undefined ? {} : { watchRearmInterval: number(values, "watch-rearm", 0, { min: 0.001 }) * 1000 }),
      ...(values["go-members"] ? { goMembers: true } : {}),
    },
  };
}

function healthSettings(values: Values): HealthSettings | undefined {
  const address = values["health-addr"] as string | undefined;
  if (address === undefined) {
    for (const flag of ["readiness", "unhealthy-after"]) {
      if (values[flag] !== undefined) throw usage(`--${flag} goes with --health-addr, which serves the probes it sets`, "run");
    }
    return undefined;
  }
  const parsed = parseAddress(address);
  if (!parsed) throw usage(`--health-addr must be HOST:PORT (e.g. 127.0.0.1:8080, 0.0.0.0:8080, [::1]:8080), got ${JSON.stringify(address)}`, "run");
  const readiness = (values.readiness as string | undefined) ?? "member";
  if (readiness !== "member" && readiness !== "leader") {
    throw usage(`--readiness must be member (every running member is ready) or leader (only the leader is), got ${JSON.stringify(readiness)}`, "run");
  }
  const unhealthyAfter = values["unhealthy-after"] === undefined ? undefined : number(values, "unhealthy-after", 0, { min: 0.001 }) * 1000;
  return { ...parsed, readiness, unhealthyAfter };
}

function metricsAddress(values: Values): Address | undefined {
  const address = values["metrics-addr"] as string | undefined;
  if (address === undefined) return undefined;
  const parsed = parseAddress(address);
  if (!parsed) throw usage(`--metrics-addr must be HOST:PORT (e.g. 127.0.0.1:9464, 0.0.0.0:9464, [::1]:9464), got ${JSON.stringify(address)}`, "run");
  return parsed;
}

type Backend = ConnectionFlags["backend"];
const BACKENDS: readonly Backend[] = ["etcd", "nats", "postgres", "redis"];

/**
 * The flags that belong to some stores only, with the stores they belong to;
 * given to another store, each is refused, with what that store takes instead.
 */
const STORE_FLAGS: Record<string, { for: readonly Backend[]; instead?: Partial<Record<Backend, string>> }> = {
  endpoints: { for: ["etcd"], instead: { nats: "--server", postgres: "--url", redis: "--url" } },
  api: { for: ["etcd"] },
  cacert: { for: ["etcd"], instead: { nats: "--tlsca" } },
  cert: { for: ["etcd"], instead: { nats: "--tlscert" } },
  key: { for: ["etcd"], instead: { nats: "--tlskey" } },
  "watch-rearm": { for: ["etcd"] },
  server: { for: ["nats"], instead: { etcd: "--endpoints", postgres: "--url", redis: "--url" } },
  bucket: { for: ["nats"] },
  tlsca: { for: ["nats"], instead: { etcd: "--cacert" } },
  tlscert: { for: ["nats"], instead: { etcd: "--cert" } },
  tlskey: { for: ["nats"], instead: { etcd: "--key" } },
  "go-members": { for: ["nats"] },
  user: { for: ["etcd", "nats"], instead: { postgres: "the user in --url", redis: "the user in --url" } },
  password: { for: ["etcd", "nats"], instead: { postgres: "the password in --url", redis: "the password in --url" } },
  url: { for: ["postgres", "redis"], instead: { etcd: "--endpoints", nats: "--server" } },
  table: { for: ["postgres"] },
};

/** How a store is named in messages: the flag that picks it. */
function storeFlag(backend: Backend): string {
  return backend === "etcd" ? "etcd" : `--backend ${backend}`;
}

function connectionFlags(values: Values): ConnectionFlags {
  const api = (values.api as string | undefined) ?? "v3";
  if (api !== "v3" && api !== "v2") throw usage(`--api must be v3 or v2, got ${JSON.stringify(api)}`);
  const backend = (values.backend as string | undefined) ?? "etcd";
  if (!BACKENDS.includes(backend as Backend)) throw usage(`--backend must be ${BACKENDS.join(", ")}, got ${JSON.stringify(backend)}`);
  const chosen = backend as Backend;
  for (const [flag, owner] of Object.entries(STORE_FLAGS)) {
    if (values[flag] === undefined || owner.for.includes(chosen)) continue;
    const instead = owner.instead?.[chosen];
    throw usage(`--${flag} is for ${owner.for.map(storeFlag).join(" and ")}, and this is ${storeFlag(chosen)}${instead ? `: use ${instead}` : ""}`);
  }
  const endpoints = ((values.endpoints as string | undefined) ?? process.env.ETCDCTL_ENDPOINTS ?? "127.0.0.1:2379")
    .split(",")
    .map((endpoint) => endpoint.trim())
    .filter((endpoint) => endpoint !== "");
  if (endpoints.length === 0) throw usage("--endpoints is empty: give at least one, e.g. --endpoints http://127.0.0.1:2379");
  return {
    backend: chosen,
    nats: {
      server: values.server as string | undefined,
      bucket: values.bucket as string | undefined,
      tlscert: values.tlscert as string | undefined,
      tlskey: values.tlskey as string | undefined,
      tlsca: values.tlsca as string | undefined,
      user: values.user as string | undefined,
      password: values.password as string | undefined,
    },
    postgres: { url: values.url as string | undefined, table: values.table as string | undefined },
    redis: { url: values.url as string | undefined },
    endpoints,
    api: api as Api,
    cacert: values.cacert as string | undefined,
    cert: values.cert as string | undefined,
    key: values.key as string | undefined,
    user: values.user as string | undefined,
    password: values.password as string | undefined,
  };
}

function number(values: Values, flag: string, fallback: number, { integer = false, min }: { integer?: boolean; min: number }): number {
  const text = values[flag] as string | undefined;
  if (text === undefined) return fallback;
  const value = Number(text);
  if (text.trim() === "" || !Number.isFinite(value) || (integer && !Number.isInteger(value)) || value < min) {
    throw usage(`--${flag} must be ${integer ? "a whole number" : "a number"} of at least ${min}, got ${JSON.stringify(text)}`, "run");
  }
  return value;
}

function signalName(text: string | undefined): NodeJS.Signals {
  if (text === undefined) return "SIGTERM";
  const name = (/^SIG/i.test(text) ? text : `SIG${text}`).toUpperCase();
  if (!(name in constants.signals)) throw usage(`--signal ${text} is not a signal this system knows: e.g. SIGTERM, SIGINT, SIGHUP, SIGQUIT`, "run");
  return name as NodeJS.Signals;
}

function usage(message: string, command?: CommandName): CliError {
  return new CliError(EXIT.usage, `${message}\nsee: etcd-leader ${command ?? ""}${command ? " " : ""}--help`);
}

async function close(store: Store): Promise<void> {
  try {
    await store.close();
  } catch {
    // Closing is best effort on the way out.
  }
}

function report(err: unknown): number {
  if (err instanceof CliError) {
    process.stderr.write(`etcd-leader: ${err.message}\n`);
    return err.exitCode;
  }
  const detail = process.env.DEBUG && err instanceof Error ? err.stack : err instanceof Error ? err.message : String(err);
  process.stderr.write(`etcd-leader: internal error: ${detail}\n`);
  return EXIT.internal;
}

if (require.main === module) {
  const shutdown = new AbortController();
  let signals = 0;
  const onSignal = (signal: NodeJS.Signals) => {
    // A second signal does not wait: the orphan guard stops what is still running.
    if (++signals > 1) process.exit(128 + (constants.signals[signal] ?? 0));
    shutdown.abort(new Error(`received ${signal}`));
  };
  // SIGHUP too: a terminal that closes (an ssh session dropped) would
  // otherwise kill the CLI without leaving, and the successor would wait out
  // the TTL.
  for (const signal of ["SIGINT", "SIGTERM", "SIGHUP"] as const) process.on(signal, onSignal);
  // Writes to a terminal that hung up (EIO), or to a pipe nobody reads
  // (EPIPE), fail as an 'error' event that, unhandled, would end the CLI
  // before it has left: the report lines are lost, the CLI still leaves in order.
  process.stderr.on("error", () => undefined);
  main(process.argv.slice(2), shutdown.signal).then(
    (code) => process.exit(code),
    (err: unknown) => process.exit(report(err)),
  );
}
