// The `etcd-leader` command as a real process, for the CLI tests, the fault
// suite and any test that wants a member it can kill, freeze and thaw like a
// real service: started from the build (built-cli.ts), its output read line
// by line, and the state reports it prints with --json (on stderr) recorded
// as the member's events (event-recorder.ts), its exit last. stdout is kept
// as printed (who and watch answer there; run's command writes there).
//
// Every CLI started here is tracked until it exits: `killAllClis()` belongs in
// an `after` hook, and a process "exit" hook SIGKILLs whatever is left if a
// test run ends without it (the orphan guard of each CLI then stops its
// command).
import { spawn, type ChildProcessWithoutNullStreams } from "node:child_process";
import { createInterface } from "node:readline";
import { after, afterEach, before } from "node:test";
import { connect } from "@nats-io/transport-node";
import { Kvm } from "@nats-io/kv";
import { builtCli } from "./built-cli";
import { CommandLog } from "./command-log";
import { startEtcd, type EtcdCluster } from "./etcd-server";
import { EventRecorder, type CliStepName, type RecordedEvent } from "./event-recorder";
import { startNats, type NatsServer } from "./nats-server";
import { REPO_ROOT } from "./paths";
import { exitOrFail } from "./waiting";

/** Lines of output kept for failure messages. */
const RECENT_LINES = 40;
/** After the CLI exits, whatever holds its stdout or stderr open (its command, its guard) must be gone within this. */
const PIPES_HELD_MS = 10_000;

export interface CliOptions {
  /** Added to this process's environment. */
  env?: NodeJS.ProcessEnv;
  /** Start the CLI as the leader of a process group of its own, as a supervisor or a shell would. */
  ownGroup?: boolean;
  /** Whom the recorder names in messages; default the --name it is given, else "cli". */
  name?: string;
}

const running = new Set<CliProcess>();

export class CliProcess extends EventRecorder {
  readonly name: string;
  readonly pid: number;
  /** Every line on stdout, and on stderr, as printed. */
  readonly stdout: string[] = [];
  readonly stderr: string[] = [];
  /** Output that is not a state report: stdout, and stderr lines a member writes only when something is wrong. */
  readonly unexpectedOutput: string[] = [];
  /** Resolves with the exit event once the process is gone and its output read. */
  readonly exited: Promise<Extract<RecordedEvent, { event: "exit" }>>;
  private readonly child: ChildProcessWithoutNullStreams;
  /** The latest lines of both streams, in arrival order. */
  private readonly recent: string[] = [];
  private paused = false;

  constructor(readonly args: string[], { env = {}, ownGroup = false, name }: CliOptions = {}) {
    super(undefined, name ?? (args.includes("--name") ? args[args.indexOf("--name") + 1]! : "cli"));
    this.name = this.who;
    this.child = spawn(process.execPath, [builtCli(), ...args], {
      cwd: REPO_ROOT,
      env: { ...process.env, ...env },
      detached: ownGroup,
    }) as ChildProcessWithoutNullStreams;
    if (this.child.pid === undefined) throw new Error(`could not start the CLI (${this.name})`);
    this.pid = this.child.pid;
    this.child.stdin.end();
    running.add(this);
    createInterface({ input: this.child.stdout }).on("line", (line) => {
      this.stdout.push(line);
      this.remember(`stdout| ${line}`);
      this.unexpectedOutput.push(line);
    });
    createInterface({ input: this.child.stderr }).on("line", (line) => {
      this.stderr.push(line);
      this.remember(`stderr| ${line}`);
      const event = reportedEvent(line);
      if (event) this.record(event);
      else if (line.trim()) this.unexpectedOutput.push(line);
    });

    let exitAt = Date.now();
    this.exited = new Promise((resolve) => {
      let settled = false;
      const settle = (code: number | null, signal: NodeJS.Signals | null) => {
        if (settled) return;
        settled = true;
        running.delete(this);
        const event = { event: "exit" as const, value: undefined, at: exitAt, code, signal };
        this.record(event);
        resolve(event);
      };
      // "close" comes after the output is drained, so the exit event is always last.
      this.child.on("close", settle);
      this.child.on("exit", (code, signal) => {
        exitAt = Date.now();
        // Whatever still holds the CLI's stdout or stderr is a process it started: its command, or
        // its orphan guard, which both should be gone soon after it. Say so instead of waiting forever.
        setTimeout(() => {
          if (settled) return;
          this.unexpectedOutput.push(`stdout/stderr still held open ${PIPES_HELD_MS} ms after the CLI exited: a command or guard left running`);
          settle(code, signal);
        }, PIPES_HELD_MS).unref();
      });
    });
  }

  get running(): boolean {
    return this.child.exitCode === null && this.child.signalCode === null;
  }

  /**
   * Sends `signal`. SIGSTOP and SIGCONT freeze and thaw it (see pause());
   * for any other, resolves once the process is gone.
   */
  async kill(signal: NodeJS.Signals = "SIGKILL"): Promise<void> {
    if (!this.running) return;
    if (signal === "SIGSTOP") return this.pause();
    if (signal === "SIGCONT") return this.resume();
    this.child.kill(signal);
    // A frozen process only acts on a signal once thawed.
    if (this.paused) this.resume();
    await this.exited;
  }

  /** Freezes the CLI (SIGSTOP): it neither renews nor stops its command itself; its orphan guard still does at the deadline. */
  pause(): void {
    if (!this.running) return;
    this.child.kill("SIGSTOP");
    this.paused = true;
  }

  resume(): void {
    if (!this.running) return;
    this.child.kill("SIGCONT");
    this.paused = false;
  }

  /** SIGTERM, as a supervisor stops it: stop the command, leave, exit 0; SIGKILL if it has not exited within `graceMs`. */
  async stop(graceMs = 8_000): Promise<void> {
    if (!this.running) {
      await this.exited;
      return;
    }
    if (this.paused) this.resume();
    this.child.kill("SIGTERM");
    const timer = setTimeout(() => this.child.kill("SIGKILL"), graceMs);
    await this.exited;
    clearTimeout(timer);
  }

  /**
   * As a terminal that closes (an ssh session dropped): the CLI's stdout and
   * stderr are closed under it, then it gets SIGHUP. Nothing it writes after
   * that is read.
   */
  hangUp(): void {
    this.child.stdout.destroy();
    this.child.stderr.destroy();
    this.child.kill("SIGHUP");
  }

  /** Signals the CLI's whole process group (started with `ownGroup`). */
  killGroup(signal: NodeJS.Signals): void {
    try {
      process.kill(-this.pid, signal);
    } catch {
      // gone already
    }
  }

  /** The last lines the CLI wrote, stdout and stderr, for failure messages. */
  output(): string {
    return this.recent.length === 0 ? `  ${this.name}| (no output)` : this.recent.map((line) => `  ${this.name} ${line}`).join("\n");
  }

  override describe(): string {
    return this.output();
  }

  /** @internal: for the exit hook, which cannot wait. */
  killNow(): void {
    if (this.running) this.child.kill("SIGKILL");
  }

  private remember(line: string): void {
    this.recent.push(line);
    if (this.recent.length > RECENT_LINES) this.recent.shift();
  }
}

export function startCli(args: string[], env: NodeJS.ProcessEnv = {}, ownGroup = false): CliProcess {
  return new CliProcess(args, { env, ownGroup });
}

/** Runs the CLI to its end; `timeoutMs` bounds it (then SIGKILL and reject). */
export async function runCli(args: string[], timeoutMs = 30_000, env: NodeJS.ProcessEnv = {}): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const cli = startCli(args, env);
  const timer = setTimeout(() => cli.killNow(), timeoutMs);
  const { code } = await cli.exited;
  clearTimeout(timer);
  return { code, stdout: cli.stdout.join("\n"), stderr: cli.stderr.join("\n") };
}

/** SIGKILLs every CLI still running and waits until they are gone. For `after` hooks. */
export async function killAllClis(): Promise<void> {
  await Promise.all([...running].map((cli) => cli.kill("SIGKILL")));
}

/** CLIs still running, for tests that check they cleaned up. */
export function runningClis(): CliProcess[] {
  return [...running];
}

process.on("exit", () => {
  for (const cli of running) cli.killNow();
});

/** The event a line of `run --json` (or `watch --json`'s stderr) reports; undefined for a line that is not a state report. */
function reportedEvent(line: string): RecordedEvent | undefined {
  let report: Record<string, unknown>;
  try {
    report = JSON.parse(line) as Record<string, unknown>;
  } catch {
    return undefined;
  }
  if (typeof report !== "object" || report === null || typeof report.event !== "string" || typeof report.at !== "string") return undefined;
  const { event, at: stamp, ...fields } = report;
  const at = Date.parse(stamp as string);
  const until = typeof fields.until === "string" ? Date.parse(fields.until) : undefined;
  switch (event) {
    case "elected":
      return { event, value: Number(fields.token), at, ...(until === undefined ? {} : { until }) };
    case "renewed":
      return { event, value: undefined, at, until: until ?? Number.NaN };
    case "unelected":
      return { event, value: undefined, at };
    case "leader":
      return { event, value: String(fields.leader), at };
    case "error":
      return { event, value: new Error(String(fields.error)), at };
    default:
      return { ...fields, event: event as CliStepName, value: undefined, at };
  }
}

/** The stores a CLI test can point the command at: etcd through either API, or a NATS KV bucket. */
export type CliStore = "v2" | "v3" | "nats";

/** The KV bucket `useCliTestEnvironment({ nats: true })` makes, and its TTL (max_age). */
export const NATS_BUCKET = "cli_elections";
export const NATS_BUCKET_TTL_SECONDS = 2;

/**
 * The hooks every CLI test file needs: one etcd for the file (and, with
 * `nats`, one nats-server with the bucket NATS_BUCKET), every CLI SIGKILLed
 * after each test, the command logs removed at the end, and the test process
 * made to exit. `onEnd` runs before the servers stop.
 */
export function useCliTestEnvironment(
  onEnd: () => void | Promise<void> = () => undefined,
  { nats: withNats = false }: { nats?: boolean } = {},
): {
  etcd: () => EtcdCluster;
  /** The etcd's client URL, for --endpoints. */
  endpoint: () => string;
  nats: () => NatsServer;
  /** The flags that point the command at `store`. */
  storeArgs: (store: CliStore) => string[];
  newLog: () => CommandLog;
} {
  let etcd: EtcdCluster | undefined;
  let nats: NatsServer | undefined;
  const logs: CommandLog[] = [];
  before(async () => {
    etcd = await startEtcd();
    if (withNats) {
      nats = await startNats();
      const nc = await connect({ servers: nats.url });
      await new Kvm(nc).create(NATS_BUCKET, { ttl: NATS_BUCKET_TTL_SECONDS * 1000, history: 1 });
      await nc.close();
    }
  });
  afterEach(async () => {
    await killAllClis();
  });
  after(async () => {
    await killAllClis();
    await onEnd();
    await etcd?.close();
    await nats?.close();
    for (const log of logs) log.remove();
    exitOrFail();
  });
  return {
    etcd: () => etcd!,
    endpoint: () => etcd!.clientUrls[0]!,
    nats: () => nats!,
    storeArgs: (store) =>
      store === "nats" ? ["--backend", "nats", "--server", nats!.url, "--bucket", NATS_BUCKET] : ["--api", store, "--endpoints", etcd!.clientUrls[0]!],
    newLog: () => {
      const log = new CommandLog();
      logs.push(log);
      return log;
    },
  };
}
