// Starts a real nats-server (Debian's nats-server, 2.9 here) with JetStream on
// a free loopback port and its own temporary store dir, for tests of the NATS
// KV backend. It can be stopped, killed, restarted on the same store dir (the
// streams and their sequences survive), and paused, to stage outages.
import { accessSync, constants, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { delimiter, join } from "node:path";
import { freePort } from "./free-port";
import { ServerProcess } from "./server-process";
import { waitFor } from "./waiting";

export interface NatsTls {
  /** PEM files for the server's own certificate and key (test/kit/tls.ts makes them). */
  certFile: string;
  keyFile: string;
  /** The CA that signs client certificates; needed with clientCertAuth. */
  caFile?: string;
  /** Require clients to present a certificate signed by caFile. */
  clientCertAuth?: boolean;
}

export interface NatsUserPassword {
  user: string;
  password: string;
}

export interface NatsServerOptions {
  tls?: NatsTls;
  auth?: NatsUserPassword;
  /** Extra command-line flags. */
  extraArgs?: string[];
}

/** Debian installs the server in /usr/sbin, which a non-root PATH often lacks. */
const DEBIAN_PATH = "/usr/sbin/nats-server";

/**
 * The nats-server to run: NATS_SERVER_BIN if set, else the first on PATH,
 * else Debian's /usr/sbin/nats-server. Throws, saying what to install, when
 * there is none.
 */
export function natsServerBinary(): string {
  const fromEnv = process.env.NATS_SERVER_BIN;
  if (fromEnv) {
    if (!isExecutable(fromEnv)) {
      throw new Error(`NATS_SERVER_BIN=${fromEnv} is not an executable file: point it at a nats-server binary, or unset it`);
    }
    return fromEnv;
  }
  const onPath = (process.env.PATH ?? "").split(delimiter).filter(Boolean).map((dir) => join(dir, "nats-server"));
  const found = [...onPath, DEBIAN_PATH].find(isExecutable);
  if (found) return found;
  throw new Error(
    `nats-server not found on PATH or at ${DEBIAN_PATH}: install it (Debian/Ubuntu: apt-get install nats-server, ` +
      "or run scripts/prepare.sh; 2.9 or later, with JetStream), or set NATS_SERVER_BIN to its path",
  );
}

function isExecutable(path: string): boolean {
  try {
    accessSync(path, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

export class NatsServer {
  private readonly process: ServerProcess;
  private readonly configPath: string | undefined;
  /** Where JetStream keeps its streams; kept across restarts, removed by close(). */
  readonly storeDir: string;

  constructor(
    private readonly baseDir: string,
    readonly port: number,
    /** The plain-HTTP monitoring port (/healthz, /jsz). */
    readonly monitorPort: number,
    private readonly options: NatsServerOptions,
  ) {
    this.storeDir = join(baseDir, "store");
    mkdirSync(this.storeDir);
    this.process = new ServerProcess(join(baseDir, "nats-server.log"));
    const config = configFile(options);
    if (config) {
      this.configPath = join(baseDir, "nats-server.conf");
      writeFileSync(this.configPath, config, { mode: 0o600 });
    }
  }

  /** The URL for a client's `servers` option. */
  get url(): string {
    return `${this.options.tls ? "tls" : "nats"}://127.0.0.1:${this.port}`;
  }

  get tls(): NatsTls | undefined {
    return this.options.tls;
  }

  get auth(): NatsUserPassword | undefined {
    return this.options.auth;
  }

  get pid(): number | undefined {
    return this.process.pid;
  }

  get running(): boolean {
    return this.process.running;
  }

  /** Starts (or restarts, on the same ports and store dir) and resolves once the process is up. */
  async start(): Promise<void> {
    if (this.running) return;
    const args = [
      // The config file first: the flags after it win over anything in it.
      ...(this.configPath ? ["-c", this.configPath] : []),
      "-js",
      "-sd", this.storeDir,
      "-a", "127.0.0.1",
      "-p", String(this.port),
      "-m", String(this.monitorPort),
      ...(this.options.extraArgs ?? []),
    ];
    await this.process.start(natsServerBinary(), args);
  }

  /** A JSON page of the monitoring port, e.g. `/jsz?consumers=true&config=true`. */
  async monitor<T = unknown>(path: string): Promise<T> {
    const res = await fetch(`http://127.0.0.1:${this.monitorPort}${path}`, { signal: AbortSignal.timeout(2_000) });
    if (!res.ok) throw new Error(`nats-server monitor ${path}: HTTP ${res.status}`);
    return (await res.json()) as T;
  }

  /** Resolves once the server accepts clients with JetStream on (its /healthz says ok). */
  async waitReady(timeoutMs = 10_000): Promise<void> {
    let answer = "";
    await waitFor(
      "nats-server ready",
      timeoutMs,
      async () => {
        const res = await fetch(`http://127.0.0.1:${this.monitorPort}/healthz`, { signal: AbortSignal.timeout(1_000) });
        const body = (await res.json()) as { status?: string; error?: string };
        answer = `${res.status} ${JSON.stringify(body)}`;
        return res.ok && body.status === "ok";
      },
      {
        every: 25,
        retryErrors: true,
        hopeless: () => (this.running ? undefined : "it exited"),
        detail: () => `${answer ? `its last answer: ${answer}\n` : ""}${this.logTail(10)}`,
      },
    );
  }

  /** SIGTERM (a clean shutdown), then SIGKILL if it lingers; resolves when the process is gone. */
  async stop(): Promise<void> {
    await this.process.stop();
  }

  /** SIGKILL: a crash. */
  async kill(): Promise<void> {
    await this.process.kill();
  }

  /** Stops (cleanly, or as a crash with `{ crash: true }`), starts again on the same store dir and waits until ready. */
  async restart(options: { crash?: boolean } = {}): Promise<void> {
    await (options.crash ? this.kill() : this.stop());
    await this.start();
    await this.waitReady();
  }

  /** SIGSTOP: the process hangs with its sockets open, so clients see timeouts, not disconnects. */
  pause(): void {
    this.process.pause();
  }

  resume(): void {
    this.process.resume();
  }

  /** The last lines of the server's log, for error messages. */
  logTail(lines = 30): string {
    return this.process.logTail(lines);
  }

  /** Kills the server and removes its store dir, log and config. Safe to call twice. */
  async close(): Promise<void> {
    await this.kill();
    rmSync(this.baseDir, { recursive: true, force: true });
  }
}

/** One nats-server with JetStream, ready for clients. */
export async function startNats(options: NatsServerOptions = {}): Promise<NatsServer> {
  // Fails here, with what to install, rather than as a spawn ENOENT.
  natsServerBinary();
  for (let attempt = 1; ; attempt++) {
    const baseDir = mkdtempSync(join(tmpdir(), "etcd-leader-nats-"));
    let server: NatsServer | undefined;
    try {
      server = new NatsServer(baseDir, await freePort(), await freePort(), options);
      await server.start();
      await server.waitReady();
      return server;
    } catch (err) {
      const log = server?.logTail(10) ?? "";
      if (server) await server.close();
      else rmSync(baseDir, { recursive: true, force: true });
      // A port free a moment ago can be taken meanwhile (by any socket's ephemeral port): pick others.
      if (log.includes("address already in use") && attempt < PORT_ATTEMPTS) continue;
      throw new Error(`nats-server did not start: ${(err as Error).message}${log ? `\n${log}` : ""}`, { cause: err });
    }
  }
}

/** How many times a server is started on fresh ports when one it was given turned out taken. */
const PORT_ATTEMPTS = 3;

/** The config file for what the command-line flags cannot say (TLS with a client CA, user and password); none if not needed. */
function configFile(options: NatsServerOptions): string | undefined {
  const { tls, auth } = options;
  if (!tls && !auth) return undefined;
  // JSON strings are valid quoted strings in the NATS config syntax.
  const q = (text: string) => JSON.stringify(text);
  const lines: string[] = [];
  if (tls) {
    if (tls.clientCertAuth && !tls.caFile) throw new Error("NatsTls.clientCertAuth needs caFile, the CA that signs client certificates");
    lines.push(
      "tls {",
      `  cert_file: ${q(tls.certFile)}`,
      `  key_file: ${q(tls.keyFile)}`,
      ...(tls.caFile ? [`  ca_file: ${q(tls.caFile)}`] : []),
      ...(tls.clientCertAuth ? ["  verify: true"] : []),
      "}",
    );
  }
  if (auth) {
    lines.push("authorization {", `  user: ${q(auth.user)}`, `  password: ${q(auth.password)}`, "}");
  }
  return lines.join("\n") + "\n";
}
