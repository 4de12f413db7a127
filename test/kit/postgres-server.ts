// Starts a real PostgreSQL (Debian's 15 here) on a free loopback port with a
// data dir of its own, for tests of the PostgreSQL backend. Trust
// authentication, no fsync: a throwaway server. It can be stopped, killed,
// started again and restarted on the same data dir (the rows and the token
// sequence survive), and paused, to stage outages.
//
// initdb takes a few seconds, so it runs once per process, into a template
// dir that every server copies. PostgreSQL refuses to run as root: as root,
// initdb and the server run as the `postgres` user, on dirs it owns.
import { execFileSync } from "node:child_process";
import { accessSync, constants, cpSync, existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { freePort } from "./free-port";
import { ServerProcess } from "./server-process";
import { waitFor } from "./waiting";

/** The user a server runs as: the postgres user when we are root, else ourselves. */
interface RunAs {
  readonly uid?: number;
  readonly gid?: number;
}

/** Where PostgreSQL's programs are: PG_BIN if set, else `pg_config --bindir`, else Debian's newest /usr/lib/postgresql/<n>/bin. */
export function postgresBinDir(): string {
  const candidates = [process.env.PG_BIN, fromPgConfig(), ...debianBinDirs()].filter((dir): dir is string => Boolean(dir));
  const found = candidates.find((dir) => isExecutable(join(dir, "postgres")) && isExecutable(join(dir, "initdb")));
  if (found) return found;
  throw new Error(
    "PostgreSQL's server programs (postgres, initdb) not found: install them (Debian/Ubuntu: apt-get install postgresql, " +
      "or run scripts/prepare.sh), or set PG_BIN to the dir that holds them",
  );
}

function fromPgConfig(): string | undefined {
  try {
    return execFileSync("pg_config", ["--bindir"], { encoding: "utf8", stdio: ["ignore", "pipe", "ignore"] }).trim();
  } catch {
    return undefined;
  }
}

function debianBinDirs(): string[] {
  const versions = [17, 16, 15, 14, 13];
  return versions.map((version) => `/usr/lib/postgresql/${version}/bin`);
}

function isExecutable(path: string): boolean {
  try {
    accessSync(path, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

function runAs(): RunAs {
  if (process.getuid?.() !== 0) return {};
  const uid = Number(execFileSync("id", ["-u", "postgres"], { encoding: "utf8" }).trim());
  const gid = Number(execFileSync("id", ["-g", "postgres"], { encoding: "utf8" }).trim());
  return { uid, gid };
}

/** Gives a dir made by root to the user the server runs as. */
function handOver(dir: string, as: RunAs): void {
  if (as.uid !== undefined) execFileSync("chown", ["-R", `${as.uid}:${as.gid}`, dir]);
}

let template: string | undefined;

/** A data dir made by initdb once per process, copied for each server. */
function templateDataDir(bin: string, as: RunAs): string {
  if (template && existsSync(template)) return template;
  const base = mkdtempSync(join(tmpdir(), "etcd-leader-pg-template-"));
  handOver(base, as);
  const dataDir = join(base, "data");
  execFileSync(
    join(bin, "initdb"),
    ["-D", dataDir, "-U", "postgres", "-A", "trust", "-E", "UTF8", "--locale=C", "--no-sync", "--no-instructions"],
    { stdio: ["ignore", "pipe", "pipe"], ...as },
  );
  template = dataDir;
  process.on("exit", () => rmSync(base, { recursive: true, force: true }));
  return dataDir;
}

/** Servers still running, killed if the test process exits without closing them. */
const running = new Set<PostgresServer>();
process.on("exit", () => {
  for (const server of running) server.killNow();
});

export class PostgresServer {
  private readonly process: ServerProcess;
  readonly dataDir: string;

  constructor(
    private readonly baseDir: string,
    readonly port: number,
    private readonly bin: string,
    private readonly as: RunAs,
  ) {
    this.dataDir = join(baseDir, "data");
    this.process = new ServerProcess(join(baseDir, "postgres.log"));
  }

  /** A connection string for pg (user postgres, database postgres, no password). */
  get url(): string {
    return `postgres://postgres@127.0.0.1:${this.port}/postgres`;
  }

  get running(): boolean {
    return this.process.running;
  }

  /** Starts (or starts again, on the same port and data dir) and resolves once the server accepts connections. */
  async start(): Promise<void> {
    if (!this.running) {
      const args = [
        "-D", this.dataDir,
        "-p", String(this.port),
        "-c", "listen_addresses=127.0.0.1",
        // The socket in the server's own dir: /var/run/postgresql may not be there, or not writable.
        "-c", `unix_socket_directories=${this.baseDir}`,
        "-c", "fsync=off",
        "-c", "synchronous_commit=off",
        "-c", "full_page_writes=off",
        "-c", "max_connections=200",
      ];
      await this.process.start(join(this.bin, "postgres"), args, this.as);
      running.add(this);
    }
    await this.waitReady();
  }

  /** Resolves once the server answers on its port (pg_isready). */
  async waitReady(timeoutMs = 15_000): Promise<void> {
    await waitFor(
      "PostgreSQL ready",
      timeoutMs,
      () => {
        try {
          execFileSync(join(this.bin, "pg_isready"), ["-h", "127.0.0.1", "-p", String(this.port), "-q", "-t", "1"], { stdio: "ignore" });
          return true;
        } catch {
          return false;
        }
      },
      { every: 50, hopeless: () => (this.running ? undefined : "it exited"), detail: () => this.logTail(10) },
    );
  }

  /** A fast shutdown (SIGINT: clients are disconnected); resolves when the process is gone. */
  async stop(): Promise<void> {
    // SIGTERM alone is PostgreSQL's "smart" shutdown, which waits for every client to leave.
    const pid = this.process.pid;
    if (pid !== undefined && this.running) process.kill(pid, "SIGINT");
    await this.process.stop();
    running.delete(this);
  }

  /** SIGKILL: a crash. The server recovers from its WAL when started again. */
  async kill(): Promise<void> {
    await this.process.kill();
    running.delete(this);
  }

  /** Stops (cleanly, or as a crash with `{ crash: true }`), starts again on the same data dir and waits until ready. */
  async restart(options: { crash?: boolean } = {}): Promise<void> {
    await (options.crash ? this.kill() : this.stop());
    await this.start();
  }

  /** SIGSTOP: the server hangs with its sockets open, so clients see timeouts, not disconnects. */
  pause(): void {
    this.process.pause();
  }

  resume(): void {
    this.process.resume();
  }

  logTail(lines = 30): string {
    return this.process.logTail(lines);
  }

  /** Kills the server and removes its data dir and log. Safe to call twice. */
  async close(): Promise<void> {
    await this.kill();
    rmSync(this.baseDir, { recursive: true, force: true });
  }

  /** For the exit hook: a SIGKILL sent now, nothing awaited. */
  killNow(): void {
    const pid = this.process.pid;
    if (pid !== undefined && this.running) {
      try {
        process.kill(pid, "SIGKILL");
      } catch {
        // Gone already.
      }
    }
    rmSync(this.baseDir, { recursive: true, force: true });
  }
}

/** How many times a server is started on a fresh port when the one it was given turned out taken. */
const PORT_ATTEMPTS = 3;

/** One PostgreSQL server, ready for clients. */
export async function startPostgres(): Promise<PostgresServer> {
  const bin = postgresBinDir();
  const as = runAs();
  const source = templateDataDir(bin, as);
  for (let attempt = 1; ; attempt++) {
    const baseDir = mkdtempSync(join(tmpdir(), "etcd-leader-pg-"));
    cpSync(source, join(baseDir, "data"), { recursive: true });
    handOver(baseDir, as);
    const server = new PostgresServer(baseDir, await freePort(), bin, as);
    try {
      await server.start();
      return server;
    } catch (err) {
      const log = server.logTail(10);
      await server.close();
      if (log.includes("already in use") && attempt < PORT_ATTEMPTS) continue;
      throw new Error(`PostgreSQL did not start: ${(err as Error).message}${log ? `\n${log}` : ""}`, { cause: err });
    }
  }
}
