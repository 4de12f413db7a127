// Starts real etcd servers (Debian's etcd-server) on free loopback ports, each
// with its own temporary data dir, for tests, the demo and the benchmarks.
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { freePort } from "./free-port";
import { ServerProcess } from "./server-process";
import { waitFor } from "./waiting";

export interface EtcdTls {
  /** PEM files for the server's own certificate, key and the CA that signs clients. */
  certFile: string;
  keyFile: string;
  caFile: string;
  /** Require clients to present a certificate signed by caFile. */
  clientCertAuth?: boolean;
}

export interface EtcdServerOptions {
  /** Serve the v2 API too (etcd 3.4 has it off by default). Default true. */
  enableV2?: boolean;
  tls?: EtcdTls;
  /** Extra command-line flags. */
  extraArgs?: string[];
  /** Used by startEtcdCluster; a lone server makes its own. */
  member?: ClusterMember;
  initialCluster?: string;
  /** Shared by the members of one cluster. */
  clusterToken?: string;
}

interface ClusterMember {
  name: string;
  clientPort: number;
  peerPort: number;
}

export class EtcdServer {
  private readonly process: ServerProcess;
  readonly clientUrl: string;
  readonly peerUrl: string;

  constructor(
    readonly dataDir: string,
    private readonly member: ClusterMember,
    private readonly options: EtcdServerOptions,
    private readonly initialCluster: string,
  ) {
    const scheme = options.tls ? "https" : "http";
    this.clientUrl = `${scheme}://127.0.0.1:${member.clientPort}`;
    this.peerUrl = `http://127.0.0.1:${member.peerPort}`;
    this.process = new ServerProcess(join(dataDir, "..", `${member.name}.log`));
  }

  get name(): string {
    return this.member.name;
  }

  get clientPort(): number {
    return this.member.clientPort;
  }

  /** `host:port` for node-etcd and etcd3. */
  get hostPort(): string {
    return `127.0.0.1:${this.member.clientPort}`;
  }

  /** The TLS files it serves with, if any. */
  get tls(): EtcdTls | undefined {
    return this.options.tls;
  }

  get pid(): number | undefined {
    return this.process.pid;
  }

  get running(): boolean {
    return this.process.running;
  }

  /** Starts (or restarts, on the same data dir) and resolves once the process is up. */
  async start(): Promise<void> {
    if (this.running) return;
    const { tls } = this.options;
    const args = [
      "--name", this.member.name,
      "--data-dir", this.dataDir,
      "--listen-client-urls", this.clientUrl,
      "--advertise-client-urls", this.clientUrl,
      "--listen-peer-urls", this.peerUrl,
      "--initial-advertise-peer-urls", this.peerUrl,
      "--initial-cluster", this.initialCluster,
      "--initial-cluster-state", "new",
      "--initial-cluster-token", this.options.clusterToken ?? "etcd-leader-test",
      // Short raft timings keep cluster fail-overs quick in tests.
      "--heartbeat-interval", "50",
      "--election-timeout", "500",
      "--log-level", "warn",
      ...(this.options.enableV2 === false ? [] : ["--enable-v2=true"]),
      ...(tls
        ? ["--cert-file", tls.certFile, "--key-file", tls.keyFile, "--trusted-ca-file", tls.caFile,
           ...(tls.clientCertAuth ? ["--client-cert-auth"] : [])]
        : []),
      ...(this.options.extraArgs ?? []),
    ];
    await this.process.start(etcdBinary(), args);
  }

  /** Resolves once the server answers client requests (a cluster also needs a raft leader). */
  async waitReady(timeoutMs = 20_000): Promise<void> {
    await waitForHealth([this], timeoutMs);
  }

  /** SIGTERM, then SIGKILL if it lingers; resolves when the process is gone. */
  async stop(): Promise<void> {
    await this.process.stop();
  }

  /** SIGKILL: a crash. */
  async kill(): Promise<void> {
    await this.process.kill();
  }

  pause(): void {
    this.process.pause();
  }

  resume(): void {
    this.process.resume();
  }

  logTail(lines = 30): string {
    return this.process.logTail(lines);
  }
}

/** A set of etcd servers sharing a temp dir; `close()` stops them all and removes the dir. */
export class EtcdCluster {
  constructor(readonly members: EtcdServer[], private readonly baseDir: string) {}

  get clientUrls(): string[] {
    return this.members.map((m) => m.clientUrl);
  }

  get hostPorts(): string[] {
    return this.members.map((m) => m.hostPort);
  }

  async waitReady(timeoutMs = 20_000): Promise<void> {
    await waitForHealth(this.members.filter((m) => m.running), timeoutMs);
  }

  /** The member that is the raft leader right now. */
  async leader(): Promise<EtcdServer> {
    for (const member of this.members) {
      if (!member.running) continue;
      const status = await fetchJson(`${member.clientUrl}/v2/stats/self`, member.tls).catch(() => undefined);
      if (status && (status as { state?: string }).state === "StateLeader") return member;
    }
    throw new Error("no etcd member reports itself leader");
  }

  async close(): Promise<void> {
    await Promise.all(this.members.map((m) => m.kill()));
    rmSync(this.baseDir, { recursive: true, force: true });
  }
}

export function etcdBinary(): string {
  return process.env.ETCD_BIN ?? "etcd";
}

/** One etcd server with the v2 API on, ready for requests. */
export async function startEtcd(options: EtcdServerOptions = {}): Promise<EtcdCluster> {
  return startEtcdCluster(1, options);
}

/** `size` etcd members forming one cluster on loopback, ready for requests. */
export async function startEtcdCluster(size: number, options: EtcdServerOptions = {}): Promise<EtcdCluster> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await startEtcdClusterOnce(size, options);
    } catch (err) {
      // A port free a moment ago can be taken meanwhile (by any socket's ephemeral port): pick others.
      if (!(err as Error).message.includes("address already in use") || attempt >= PORT_ATTEMPTS) throw err;
    }
  }
}

/** How many times a cluster is started on fresh ports when one it was given turned out taken. */
const PORT_ATTEMPTS = 3;

async function startEtcdClusterOnce(size: number, options: EtcdServerOptions): Promise<EtcdCluster> {
  const baseDir = mkdtempSync(join(tmpdir(), "etcd-leader-test-"));
  const members: ClusterMember[] = [];
  for (let i = 0; i < size; i++) {
    members.push({ name: `etcd${i}`, clientPort: await freePort(), peerPort: await freePort() });
  }
  const initialCluster = members.map((m) => `${m.name}=http://127.0.0.1:${m.peerPort}`).join(",");
  const memberOptions = { ...options, clusterToken: `etcd-leader-${baseDir.slice(-6)}` };
  const servers = members.map(
    (m) => new EtcdServer(join(baseDir, `${m.name}.data`), m, memberOptions, initialCluster),
  );
  const cluster = new EtcdCluster(servers, baseDir);
  try {
    await Promise.all(servers.map((s) => s.start()));
    await cluster.waitReady();
  } catch (err) {
    const logs = servers.map((s) => `--- ${s.name}\n${s.logTail(8)}`).join("\n");
    await cluster.close();
    throw new Error(`etcd did not start: ${(err as Error).message}\n${logs}`);
  }
  return cluster;
}

async function waitForHealth(servers: EtcdServer[], timeoutMs: number): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  for (const server of servers) {
    let answer: unknown;
    await waitFor(
      `etcd ${server.name} healthy`,
      Math.max(1, deadline - performance.now()),
      async () => {
        answer = await fetchJson(`${server.clientUrl}/health`, server.tls);
        return (answer as { health?: string }).health === "true";
      },
      {
        every: 50,
        retryErrors: true,
        hopeless: () => (server.running ? undefined : "it exited"),
        detail: () => (answer === undefined ? "" : `its last answer: ${JSON.stringify(answer)}`),
      },
    );
  }
}

async function fetchJson(url: string, tls?: EtcdTls): Promise<unknown> {
  if (url.startsWith("https:")) {
    // Verified against the test CA. A server that demands client
    // certificates is shown its own (etcd's gateway does the same, so the
    // certificate must allow client authentication).
    if (!tls) throw new Error(`${url}: an https server needs its TLS files to be probed`);
    const { request } = await import("node:https");
    const options = {
      ca: readFileSync(tls.caFile),
      ...(tls.clientCertAuth ? { cert: readFileSync(tls.certFile), key: readFileSync(tls.keyFile) } : {}),
      agent: false as const,
      timeout: 1_000,
    };
    return new Promise((resolve, reject) => {
      const req = request(url, options, (res) => {
        let text = "";
        res.setEncoding("utf8");
        res.on("data", (chunk: string) => (text += chunk));
        res.on("end", () => {
          try {
            resolve(JSON.parse(text));
          } catch (err) {
            reject(err);
          }
        });
        res.on("error", reject);
      });
      req.on("error", reject);
      req.on("timeout", () => req.destroy(new Error("timeout")));
      req.end();
    });
  }
  const res = await fetch(url, { signal: AbortSignal.timeout(1_000) });
  return res.json();
}
