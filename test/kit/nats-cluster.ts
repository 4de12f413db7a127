// A JetStream cluster of real nats-servers on loopback (Debian's nats-server,
// 2.9 here): each with a client port, a monitoring port, a route port and a
// store dir of its own, routes to the others, and one cluster name, so that
// a bucket made with `replicas: 3` is a stream replicated by raft across the
// three. Each server can be killed, restarted on its store dir and paused as
// a single server can; the cluster says which server is JetStream's meta
// leader and which one leads a stream's raft group, for faults aimed at them.
//
// With `proxiedRoutes`, every route goes through a fault proxy of its own,
// one per pair of servers and direction (server i solicits server j through
// proxy i→j), so that one server can be cut off from the others and healed.
// Each server advertises a cluster URL nobody listens on, so that no server
// learns another's real route port from the gossip and routes around a cut.
import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { FaultProxy } from "./fault-proxy";
import { freePort } from "./free-port";
import { natsServerBinary, NatsServer } from "./nats-server";
import { waitFor } from "./waiting";

/** What /jsz says of JetStream's meta group and of the streams' raft groups. */
interface Jsz {
  meta_cluster?: { name?: string; leader?: string; cluster_size?: number };
  account_details?: { stream_detail?: { name: string; cluster?: { leader?: string; replicas?: { name: string; current: boolean }[] } }[] }[];
}

export class NatsCluster {
  constructor(
    /** The servers, named n0, n1, … in the cluster (their `server_name`). */
    readonly servers: readonly NatsServer[],
    readonly names: readonly string[],
    private readonly baseDir: string,
    /** With proxiedRoutes: the proxy of each route, keyed "i>j" for the route server i solicits to server j. */
    private readonly routeProxies = new Map<string, FaultProxy>(),
  ) {}

  /**
   * Cuts server `name` off from the others, as a partition does: every route
   * to or from it goes silent (its proxies blackhole). Its clients stay
   * connected to it. Needs `proxiedRoutes`.
   */
  partition(name: string): void {
    const index = this.names.indexOf(name);
    if (index < 0) throw new Error(`no server ${name} in the cluster (${this.names.join(", ")})`);
    const cut = this.routesOf(index);
    if (cut.length === 0) throw new Error("this cluster's routes are not proxied: start it with { proxiedRoutes: true }");
    for (const proxy of cut) proxy.setMode("blackhole");
  }

  /** Ends every partition: the routes pass again (the servers make new ones where the cut broke them). */
  heal(): void {
    for (const proxy of this.routeProxies.values()) proxy.setMode("pass");
  }

  private routesOf(index: number): FaultProxy[] {
    return [...this.routeProxies].filter(([pair]) => pair.split(">").includes(String(index))).map(([, proxy]) => proxy);
  }

  /** Every server's URL, for a client's `servers` option: it reconnects to another when one goes. */
  get urls(): string[] {
    return this.servers.map((s) => s.url);
  }

  server(name: string): NatsServer {
    const index = this.names.indexOf(name);
    if (index < 0) throw new Error(`no server ${name} in the cluster (${this.names.join(", ")})`);
    return this.servers[index]!;
  }

  nameOf(server: NatsServer): string {
    const index = this.servers.indexOf(server);
    if (index < 0) throw new Error("that server is not in this cluster");
    return this.names[index]!;
  }

  /** The server JetStream's meta group has as leader, as the running servers see it. */
  async metaLeader(): Promise<NatsServer> {
    const name = await this.agreed("the JetStream meta leader", (jsz) => jsz.meta_cluster?.leader);
    return this.server(name);
  }

  /** The server that leads the raft group of `stream` (a bucket's stream is `KV_<bucket>`). */
  async streamLeader(stream: string): Promise<NatsServer> {
    const name = await this.agreed(`the leader of stream ${stream}`, (jsz) => streamOf(jsz, stream)?.cluster?.leader);
    return this.server(name);
  }

  /** JetStream's meta leader once the running servers other than `excluded` agree on one that is not excluded (as streamLeaderWithout). */
  async metaLeaderWithout(excluded: NatsServer, timeoutMs = 30_000): Promise<NatsServer> {
    const name = await this.agreed(
      `a JetStream meta leader other than ${this.nameOf(excluded)}`,
      (jsz) => jsz.meta_cluster?.leader,
      timeoutMs,
      (s) => s !== excluded,
      (leader) => leader !== this.nameOf(excluded),
    );
    return this.server(name);
  }

  /**
   * The leader of `stream` once the running servers other than `excluded`
   * (one killed or cut off) agree on one that is not excluded: after a fault
   * aimed at the stream's leader, when the others have elected another.
   */
  async streamLeaderWithout(stream: string, excluded: NatsServer, timeoutMs = 30_000): Promise<NatsServer> {
    const name = await this.agreed(
      `a leader of stream ${stream} other than ${this.nameOf(excluded)}`,
      (jsz) => streamOf(jsz, stream)?.cluster?.leader,
      timeoutMs,
      (s) => s !== excluded,
      (leader) => leader !== this.nameOf(excluded),
    );
    return this.server(name);
  }

  /**
   * Resolves once every running server accepts clients with JetStream on and
   * they agree on a meta leader: before that, creating a stream fails.
   */
  async waitReady(timeoutMs = 20_000): Promise<void> {
    const deadline = performance.now() + timeoutMs;
    for (const server of this.servers.filter((s) => s.running)) {
      await server.waitReady(Math.max(1, deadline - performance.now()));
    }
    await this.agreed("the JetStream meta leader", (jsz) => jsz.meta_cluster?.leader, Math.max(1, deadline - performance.now()));
  }

  /** Resolves once `stream` has a leader and every running server's replica of it is current. */
  async waitStreamCurrent(stream: string, timeoutMs = 20_000): Promise<void> {
    let seen = "";
    await waitFor(
      `stream ${stream} current on every running server`,
      timeoutMs,
      async () => {
        const leader = await this.streamLeader(stream);
        const detail = streamOf(await leader.monitor<Jsz>(JSZ_STREAMS), stream);
        const replicas = detail?.cluster?.replicas ?? [];
        seen = JSON.stringify(detail?.cluster ?? null);
        const running = new Set(this.servers.filter((s) => s.running).map((s) => this.nameOf(s)));
        running.delete(this.nameOf(leader));
        return [...running].every((name) => replicas.some((r) => r.name === name && r.current));
      },
      { every: 50, retryErrors: true, detail: () => (seen ? `its cluster as the leader reports it: ${seen}` : "") },
    );
  }

  /** Kills every server and removes their store dirs and logs. Safe to call twice. */
  async close(): Promise<void> {
    await Promise.all(this.servers.map((s) => s.close()));
    await Promise.all([...this.routeProxies.values()].map((proxy) => proxy.close()));
    rmSync(this.baseDir, { recursive: true, force: true });
  }

  /** What the running servers' /jsz pages (of those `asked` picks) say of one thing, once they all say the same and it is named and `acceptable`. */
  private async agreed(
    what: string,
    read: (jsz: Jsz) => string | undefined,
    timeoutMs = 10_000,
    asked: (server: NatsServer) => boolean = () => true,
    acceptable: (name: string) => boolean = () => true,
  ): Promise<string> {
    let answers: (string | undefined)[] = [];
    let name: string | undefined;
    await waitFor(
      what,
      timeoutMs,
      async () => {
        const running = this.servers.filter((s) => s.running && asked(s));
        answers = await Promise.all(running.map(async (s) => read(await s.monitor<Jsz>(JSZ_STREAMS))));
        name = answers[0];
        return name !== undefined && answers.every((a) => a === name) && this.names.includes(name) && acceptable(name);
      },
      { every: 50, retryErrors: true, detail: () => `the running servers say: ${JSON.stringify(answers)}` },
    );
    return name!;
  }
}

const JSZ_STREAMS = "/jsz?streams=true&accounts=true";

function streamOf(jsz: Jsz, stream: string) {
  for (const account of jsz.account_details ?? []) {
    const found = account.stream_detail?.find((s) => s.name === stream);
    if (found) return found;
  }
  return undefined;
}

export interface NatsClusterOptions {
  /** Every route through a fault proxy of its own, for partition() and heal(). Default false. */
  proxiedRoutes?: boolean;
}

/** `size` nats-servers with JetStream forming one cluster on loopback, ready for clients. */
export async function startNatsCluster(size = 3, options: NatsClusterOptions = {}): Promise<NatsCluster> {
  // Fails here, with what to install, rather than as a spawn ENOENT.
  natsServerBinary();
  for (let attempt = 1; ; attempt++) {
    try {
      return await startNatsClusterOnce(size, options);
    } catch (err) {
      // A port free a moment ago can be taken meanwhile (by any socket's ephemeral port): pick others.
      if (!(err as Error).message.includes("address already in use") || attempt >= PORT_ATTEMPTS) throw err;
    }
  }
}

/** How many times a cluster is started on fresh ports when one it was given turned out taken. */
const PORT_ATTEMPTS = 3;

async function startNatsClusterOnce(size: number, options: NatsClusterOptions): Promise<NatsCluster> {
  const baseDir = mkdtempSync(join(tmpdir(), "etcd-leader-nats-cluster-"));
  const names = Array.from({ length: size }, (_, i) => `n${i}`);
  const routePorts: number[] = [];
  for (let i = 0; i < size; i++) routePorts.push(await freePort());
  const routeProxies = new Map<string, FaultProxy>();
  if (options.proxiedRoutes) {
    for (let i = 0; i < size; i++) {
      for (let j = 0; j < size; j++) {
        if (i !== j) routeProxies.set(`${i}>${j}`, await FaultProxy.start({ upstream: `127.0.0.1:${routePorts[j]}` }));
      }
    }
  }
  const routeTo = (self: number, peer: number) => routeProxies.get(`${self}>${peer}`)?.port ?? routePorts[peer]!;
  const routes = (self: number) =>
    names
      .flatMap((_, peer) => (peer === self ? [] : [`nats://127.0.0.1:${routeTo(self, peer)}`]))
      .join(",");
  // Port 1: nobody listens there, so a gossiped route URL leads nowhere.
  const advertise = options.proxiedRoutes ? ["--cluster_advertise", "127.0.0.1:1"] : [];
  const servers: NatsServer[] = [];
  for (let i = 0; i < size; i++) {
    const dir = join(baseDir, names[i]!);
    mkdirSync(dir);
    const extraArgs = [
      "--name", names[i]!,
      "--cluster_name", `etcd-leader-${baseDir.slice(-6)}`,
      "--cluster", `nats://127.0.0.1:${routePorts[i]}`,
      "--routes", routes(i),
      ...advertise,
    ];
    servers.push(new NatsServer(dir, await freePort(), await freePort(), { extraArgs }));
  }
  const cluster = new NatsCluster(servers, names, baseDir, routeProxies);
  try {
    await Promise.all(servers.map((s) => s.start()));
    await cluster.waitReady();
  } catch (err) {
    const logs = servers.map((s, i) => `--- ${names[i]}\n${s.logTail(8)}`).join("\n");
    await cluster.close();
    throw new Error(`the nats-server cluster did not start: ${(err as Error).message}\n${logs}`);
  }
  return cluster;
}
