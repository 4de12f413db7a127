// Election members in processes of their own, so that tests can kill, freeze
// and thaw them like real services: each member is the `etcd-leader run`
// command (a CliProcess: cli-process.ts), the one member program the project
// has, run with --json --verbose so that its record (event-recorder.ts)
// holds every term, every deadline it believed (elected and renewed carry
// `until`) and its command's steps, for the history checker
// (leadership-history.ts, through history()).
//
// Its command is test/fixtures/cli-child.cjs, which appends its start, its
// SIGTERM and its exit to a command log (command-log.ts), so a test can also
// check that the commands never ran at once (or, with `work`, a shell around
// it as the command or as the --on-elected hook).
import { CliProcess } from "./cli-process";
import { CHILD, CommandLog } from "./command-log";

export interface MemberConfig {
  backend: "v2" | "v3" | "nats" | "postgres" | "redis";
  /** host:port pairs of etcd, nats-server, PostgreSQL or redis-server (or of fault proxies in front of them). */
  hosts: string[];
  /** NATS only: the KV bucket the election key is in (it must exist, with the TTL as its max age). */
  bucket?: string;
  /** PostgreSQL and Redis: the server's URL, whose host and port `hosts[0]` replaces (a fault proxy's). */
  url?: string;
  key: string;
  name: string;
  /** Seconds; on NATS the bucket's TTL rules and this is not passed. */
  ttl: number;
  /** etcd: the election's watchRearmInterval in ms (run --watch-rearm). */
  watchRearmMs?: number;
  /** The log the member's command appends to; default: one shared by this test process. */
  commandLog?: CommandLog;
  /** What it runs while it leads; default "command". */
  work?: LeaderWork;
}

/**
 * What a member runs while it leads, each appending to the command log:
 * - "command": test/fixtures/cli-child.cjs as the command;
 * - "shell-group": the command is a shell whose child (cli-child.cjs with
 *   CHILD_GROUP) ignores SIGTERM and has a child of its own that ignores it
 *   too, so that the shell dies of the stop signal and the rest of its group
 *   must be SIGKILLed;
 * - "hook-group": no command; the --on-elected hook is such a shell, and so
 *   hangs until it is stopped.
 */
export type LeaderWork = "command" | "shell-group" | "hook-group";

/** The command gets this long after SIGTERM (cli-child.cjs exits at once unless told to ignore it). */
export const MEMBER_GRACE_SECONDS = 1;

let sharedLog: CommandLog | undefined;

export class MemberProcess extends CliProcess {
  readonly commandLog: CommandLog;

  constructor(readonly config: MemberConfig) {
    const commandLog = config.commandLog ?? (sharedLog ??= new CommandLog());
    super(cliArguments(config, commandLog.path), { name: config.name });
    this.commandLog = commandLog;
  }
}

export function spawnMember(config: MemberConfig): MemberProcess {
  return new MemberProcess(config);
}

/** `n` members named `${namePrefix}0`, `${namePrefix}1`, … (prefix default "m"), all on the same election. */
export function spawnMembers(n: number, baseConfig: Omit<MemberConfig, "name"> & { namePrefix?: string }): MemberProcess[] {
  const { namePrefix = "m", ...config } = baseConfig;
  return Array.from({ length: n }, (_, i) => spawnMember({ ...config, name: `${namePrefix}${i}` }));
}

process.on("exit", () => sharedLog?.remove());

function cliArguments(config: MemberConfig, logPath: string): string[] {
  const store = storeArguments(config);
  const rearm = config.watchRearmMs === undefined ? [] : ["--watch-rearm", String(config.watchRearmMs / 1000)];
  const child = [process.execPath, CHILD, logPath];
  const shellGroup = `CHILD_GROUP=1 ${child.map((word) => `'${word}'`).join(" ")} & wait`;
  const work = config.work ?? "command";
  return [
    "run", "--json", "--verbose", ...store, ...rearm,
    "--name", config.name, "--grace", String(MEMBER_GRACE_SECONDS),
    ...(work === "hook-group" ? ["--on-elected", shellGroup, config.key] : []),
    ...(work === "shell-group" ? [config.key, "--", "/bin/sh", "-c", shellGroup] : []),
    ...(work === "command" ? [config.key, "--", ...child] : []),
  ];
}

/** The flags that point a member at its store; PostgreSQL and Redis take their URL, through the first host. */
function storeArguments(config: MemberConfig): string[] {
  const ttl = ["--ttl", String(config.ttl)];
  switch (config.backend) {
    case "nats":
      return ["--backend", "nats", "--server", config.hosts.join(","), "--bucket", config.bucket ?? missing("bucket")];
    case "postgres":
    case "redis":
      return ["--backend", config.backend, "--url", throughHost(config.url ?? missing("url"), config.hosts[0] ?? missing("host")), ...ttl];
    default:
      return ["--api", config.backend, "--endpoints", config.hosts.join(","), ...ttl];
  }
}

/** `url` with its host and port replaced by `hostPort`. */
function throughHost(url: string, hostPort: string): string {
  const parsed = new URL(url);
  parsed.host = hostPort;
  return parsed.toString();
}

function missing(what: string): never {
  throw new Error(`this member needs its ${what}`);
}
