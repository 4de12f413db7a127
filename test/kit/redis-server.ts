// Starts a real redis-server on a free loopback port with its own temporary
// dir, for tests of the Redis backend. No persistence by default (no RDB
// snapshots, no AOF), so that a restart loses every key, as a cache server's
// does; `appendonly: true` keeps them across restarts. Keyspace
// notifications can be switched on as the server runs.
import { accessSync, constants, mkdtempSync, rmSync } from "node:fs";
import { createConnection } from "node:net";
import { tmpdir } from "node:os";
import { delimiter, join } from "node:path";
import { freePort } from "./free-port";
import { ServerProcess } from "./server-process";
import { waitFor } from "./waiting";

export interface RedisServerOptions {
  /** Keep every write in an append-only file (fsync every write), so keys survive a restart. */
  appendonly?: boolean;
  /** notify-keyspace-events at start, e.g. "Kgx"; default none. */
  notifyKeyspaceEvents?: string;
  /** A replica of the redis-server on this port (on 127.0.0.1). */
  replicaOf?: number;
}

/** The redis-server to run: REDIS_SERVER_BIN if set, else the first on PATH or /usr/bin. Throws, saying what to install, when there is none. */
export function redisServerBinary(): string {
  const fromEnv = process.env.REDIS_SERVER_BIN;
  if (fromEnv) return fromEnv;
  const candidates = [...(process.env.PATH ?? "").split(delimiter).filter(Boolean).map((dir) => join(dir, "redis-server")), "/usr/bin/redis-server"];
  const found = candidates.find((path) => {
    try {
      accessSync(path, constants.X_OK);
      return true;
    } catch {
      return false;
    }
  });
  if (found) return found;
  throw new Error("redis-server not found on PATH or in /usr/bin: install it (Debian/Ubuntu: apt-get install redis-server), or set REDIS_SERVER_BIN");
}

export class RedisServer {
  private readonly process: ServerProcess;

  constructor(
    private readonly dir: string,
    readonly port: number,
    private readonly options: RedisServerOptions,
  ) {
    this.process = new ServerProcess(join(dir, "redis-server.log"));
  }

  /** The URL for `new Redis(url)`. */
  get url(): string {
    return `redis://127.0.0.1:${this.port}`;
  }

  get running(): boolean {
    return this.process.running;
  }

  async start(): Promise<void> {
    if (this.running) return;
    const args = [
      "--port", String(this.port),
      "--bind", "127.0.0.1",
      "--dir", this.dir,
      "--save", "",
      "--appendonly", this.options.appendonly ? "yes" : "no",
      "--appendfsync", "always",
      "--notify-keyspace-events", this.options.notifyKeyspaceEvents ?? "",
      ...(this.options.replicaOf !== undefined ? ["--replicaof", "127.0.0.1", String(this.options.replicaOf)] : []),
      // A test's server needs no memory for background saves, and no warnings about it.
      "--protected-mode", "no",
    ];
    await this.process.start(redisServerBinary(), args);
    await this.waitReady();
  }

  /** Resolves once the server answers PING. */
  async waitReady(timeoutMs = 10_000): Promise<void> {
    await waitFor("redis-server ready", timeoutMs, async () => (await this.command("PING")) === "+PONG", {
      every: 20,
      retryErrors: true,
      hopeless: () => (this.running ? undefined : "it exited"),
      detail: () => this.logTail(10),
    });
  }

  /** Sends one inline command on a connection of its own; answers the first line of the reply. */
  command(...words: string[]): Promise<string> {
    return new Promise((resolve, reject) => {
      const socket = createConnection({ host: "127.0.0.1", port: this.port });
      let reply = "";
      socket.setTimeout(2_000, () => socket.destroy(new Error(`redis-server did not answer ${words[0]}`)));
      socket.on("connect", () => socket.write(words.map((word) => JSON.stringify(word)).join(" ") + "\r\n"));
      socket.on("data", (data) => {
        reply += data.toString("utf8");
        const end = reply.indexOf("\r\n");
        if (end >= 0) {
          socket.end();
          resolve(reply.slice(0, end));
        }
      });
      socket.on("error", reject);
    });
  }

  /** Sets notify-keyspace-events as the server runs ("" turns them off). */
  async notifyKeyspaceEvents(flags: string): Promise<void> {
    const answer = await this.command("CONFIG", "SET", "notify-keyspace-events", flags);
    if (answer !== "+OK") throw new Error(`CONFIG SET notify-keyspace-events ${flags}: ${answer}`);
  }

  /** Stops (SIGKILL with `{ crash: true }`, else SIGTERM) and starts again on the same port and dir. Without appendonly every key is lost. */
  async restart(options: { crash?: boolean } = {}): Promise<void> {
    await (options.crash ? this.process.kill() : this.process.stop());
    await this.start();
  }

  async stop(): Promise<void> {
    await this.process.stop();
  }

  /** SIGKILL: a crash; what it held in memory is lost. */
  async kill(): Promise<void> {
    await this.process.kill();
  }

  /** SIGSTOP: the server hangs with its sockets open. */
  pause(): void {
    this.process.pause();
  }

  resume(): void {
    this.process.resume();
  }

  logTail(lines = 30): string {
    return this.process.logTail(lines);
  }

  /** SIGKILL at once, synchronously (for the process's exit hook). */
  killNow(): void {
    const pid = this.process.pid;
    if (pid !== undefined && this.running) {
      try {
        process.kill(pid, "SIGKILL");
      } catch {
        // Gone already.
      }
    }
  }

  /** Kills the server and removes its dir. Safe to call twice. */
  async close(): Promise<void> {
    await this.process.kill();
    rmSync(this.dir, { recursive: true, force: true });
  }
}

/** The servers this process started and has not closed: killed when it exits. */
const running = new Set<RedisServer>();
let exitHookSet = false;

/** One redis-server, ready for clients. */
export async function startRedis(options: RedisServerOptions = {}): Promise<RedisServer> {
  redisServerBinary();
  if (!exitHookSet) {
    exitHookSet = true;
    process.once("exit", () => {
      for (const server of running) server.killNow();
    });
  }
  for (let attempt = 1; ; attempt++) {
    const dir = mkdtempSync(join(tmpdir(), "etcd-leader-redis-"));
    const server = new RedisServer(dir, await freePort(), options);
    try {
      await server.start();
      running.add(server);
      const close = server.close.bind(server);
      server.close = async () => {
        running.delete(server);
        await close();
      };
      return server;
    } catch (err) {
      const log = server.logTail(10);
      await server.close();
      if (/Address already in use/i.test(log) && attempt < 3) continue;
      throw new Error(`redis-server did not start: ${(err as Error).message}${log ? `\n${log}` : ""}`, { cause: err });
    }
  }
}
