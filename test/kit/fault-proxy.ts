// A TCP proxy on loopback that sits between a client and etcd and can be told
// to misbehave the way networks do: go silent, reset connections, or add
// latency. Tests point the client at `proxy.hostPort` instead of at etcd.
//
// Modes:
//   pass       forward bytes both ways.
//   blackhole  a partition that looks like silence: every connection, old and
//              new, stays open but nothing gets through in either direction,
//              not even a FIN. New connections are accepted (the client's
//              connect succeeds) but no upstream connection is made.
//   reset      every connection is torn down with a TCP RST; new ones are
//              reset as soon as they are accepted.
//   silence-existing
//              the connections open at the moment of the switch go silent in
//              both directions, without a FIN or RST (what a NAT gateway or a
//              firewall that forgot an idle flow does); connections opened
//              after it pass. A client learns only by its own timeouts or
//              keepalives that its old connection is dead.
//   delay      forward with `delayMs` of added latency in each direction.
//              A new delay applies to bytes that arrive from then on; bytes
//              already waiting keep their time, so the byte order never changes.
//
// Healing a blackhole. Bytes a blackholed connection received are dropped, so
// its stream has a gap and forwarding on it later would hand etcd or the
// client a corrupt protocol stream. A real partition never does that: either
// TCP retransmits and nothing is lost, or (long partition, or a NAT/firewall
// that forgot the flow) the next packet after the heal meets an RST. We model
// the second: when the blackhole ends (whatever mode comes next), every
// connection that lost bytes or a FIN is reset on both sides and the client
// has to reconnect. Connections that carried nothing during the blackhole
// were never hurt and simply resume; one accepted during the blackhole
// connects upstream then. Silenced connections heal the same way, whatever
// mode comes after silence-existing. (To model the first kind of partition, the one TCP
// rides out, use a long `delayMs` instead.)
import { createServer, connect, type Server, type Socket } from "node:net";

export type FaultMode = "pass" | "blackhole" | "reset" | "silence-existing" | { delayMs: number };

export interface FaultProxyOptions {
  /** `host:port` of etcd, or several: new connections go to them in turn, skipping ones that refuse. */
  upstream: string | string[];
  /** Port to listen on; default: any free one. */
  port?: number;
  /** Mode to start in; default "pass". */
  mode?: FaultMode;
}

/** How long close() waits for destroyed connections to report their closing. */
const CLOSE_GRACE_MS = 3_000;

export class FaultProxy {
  private modeNow: FaultMode;
  private upstreamList: string[];
  private nextUpstream = 0;
  private readonly connections = new Set<ProxiedConnection>();
  private closed = false;
  /** Bytes written to either side, summed over all connections. */
  bytesForwarded = 0;
  /** Bytes swallowed by a blackhole. */
  bytesDropped = 0;
  /** Connections accepted since start. */
  connectionsAccepted = 0;

  private constructor(private readonly server: Server, readonly port: number, options: FaultProxyOptions) {
    this.modeNow = validMode(options.mode ?? "pass");
    this.upstreamList = upstreams(options.upstream);
    server.on("connection", (socket) => this.accept(socket));
  }

  static async start(options: FaultProxyOptions): Promise<FaultProxy> {
    // Refuse bad options before a listener exists that would then have to be cleaned up.
    upstreams(options.upstream);
    validMode(options.mode ?? "pass");
    // Half-open sockets let a FIN travel through the proxy like any other byte,
    // instead of node answering it on its own.
    const server = createServer({ allowHalfOpen: true, pauseOnConnect: true });
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen(options.port ?? 0, "127.0.0.1", () => {
        server.off("error", reject);
        resolve();
      });
    });
    const address = server.address();
    if (!address || typeof address !== "object") throw new Error("proxy has no address");
    return new FaultProxy(server, address.port, options);
  }

  /** What clients connect to: "127.0.0.1:<port>". */
  get hostPort(): string {
    return `127.0.0.1:${this.port}`;
  }

  get url(): string {
    return `http://${this.hostPort}`;
  }

  get mode(): FaultMode {
    return this.modeNow;
  }

  get upstreams(): readonly string[] {
    return this.upstreamList;
  }

  /** Connections the proxy holds open right now (client side or upstream side). */
  get connectionCount(): number {
    return this.connections.size;
  }

  setMode(mode: FaultMode): void {
    if (this.closed) throw new Error("proxy is closed");
    const next = validMode(mode);
    const wasBlackhole = this.modeNow === "blackhole";
    this.modeNow = next;
    for (const connection of [...this.connections]) {
      if (next === "reset") connection.reset();
      else if (next === "blackhole" || next === "silence-existing") connection.enterBlackhole();
      else if (wasBlackhole || connection.silenced) connection.leaveBlackhole();
    }
  }

  /** Back to pass; see the top of this file for what happens to blackholed and silenced connections. */
  heal(): void {
    this.setMode("pass");
  }

  /**
   * Where new connections go. Existing connections keep their upstream, the
   * way a client that resolved a name keeps its socket; `resetConnections()`
   * moves them.
   */
  setUpstream(upstream: string | string[]): void {
    this.upstreamList = upstreams(upstream);
    this.nextUpstream = 0;
  }

  /** Resets every current connection once, without changing the mode. */
  resetConnections(): void {
    for (const connection of [...this.connections]) connection.reset();
  }

  /** Closes the listener and every connection and cancels every delayed write. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    const listenerClosed = new Promise<void>((resolve) => this.server.close(() => resolve()));
    const connections = [...this.connections];
    for (const connection of connections) connection.destroy();
    // Every socket was destroyed: each 'close' should follow within a turn or
    // two. One that has not after a while (seen once in a run where etcd was
    // SIGKILLed and restarted behind the proxy) must not hold the teardown:
    // its sockets are destroyed again and it counts as gone. (The listener
    // stopped listening at once; its callback waits for those sockets too.)
    let timer: NodeJS.Timeout | undefined;
    const stragglers = new Promise<void>((resolve) => {
      timer = setTimeout(() => {
        for (const connection of connections) connection.forceGone();
        resolve();
      }, CLOSE_GRACE_MS);
      timer.unref();
    });
    await Promise.race([Promise.all([listenerClosed, ...connections.map((c) => c.gone)]), stragglers]);
    clearTimeout(timer);
  }

  private accept(client: Socket): void {
    if (this.closed) {
      client.destroy();
      return;
    }
    this.connectionsAccepted++;
    const connection = new ProxiedConnection(client, this);
    this.connections.add(connection);
    void connection.gone.then(() => this.connections.delete(connection));
    if (this.modeNow === "reset") connection.reset();
    else if (this.modeNow !== "blackhole") connection.connectUpstream();
  }

  /** @internal */
  pickUpstreams(): string[] {
    // Round robin, then the rest in order as fallbacks.
    const list = this.upstreamList;
    const start = this.nextUpstream++ % list.length;
    return [...list.slice(start), ...list.slice(0, start)];
  }
}

/** One client connection and, once made, its upstream connection. */
class ProxiedConnection {
  private upstream: Socket | undefined;
  private readonly toUpstream: DelayedPipe;
  private readonly toClient: DelayedPipe;
  /** Lost bytes, a FIN or an RST while blackholed: the stream can never be whole again. */
  private broken = false;
  private clientClosed = false;
  /** Reset or destroyed by the proxy: no more upstream attempts. */
  private tornDown = false;
  private openSockets = 1;
  /** Went silent with silence-existing, or with a blackhole: drops what it carries until healed. */
  silenced = false;
  readonly gone: Promise<void>;
  private markGone!: () => void;

  constructor(private readonly client: Socket, private readonly proxy: FaultProxy) {
    this.gone = new Promise((resolve) => (this.markGone = resolve));
    const countForwarded = (bytes: number): void => {
      proxy.bytesForwarded += bytes;
    };
    this.toUpstream = new DelayedPipe(client, countForwarded);
    this.toClient = new DelayedPipe(undefined, countForwarded);
    this.toClient.setTarget(client);
    client.on("error", () => this.peerReset());
    client.on("data", (chunk: Buffer) => this.forward(chunk, this.toUpstream));
    client.on("end", () => this.peerEnded(this.toUpstream));
    client.on("close", () => {
      this.clientClosed = true;
      this.socketClosed();
    });
    client.resume();
  }

  connectUpstream(candidates = this.proxy.pickUpstreams()): void {
    const [hostPort, ...fallbacks] = candidates;
    if (hostPort === undefined) {
      // Nothing would take the connection: the closest a proxy can get to a refused connect.
      this.reset();
      return;
    }
    const { host, port } = splitHostPort(hostPort);
    const upstream = connect({ host, port, allowHalfOpen: true });
    this.upstream = upstream;
    this.openSockets++;
    let connected = false;
    upstream.on("connect", () => {
      connected = true;
      this.toUpstream.setTarget(upstream);
    });
    upstream.on("error", () => {
      if (connected) this.peerReset();
      else if (this.upstream === upstream && !this.clientClosed && !this.tornDown) {
        this.upstream = undefined;
        this.connectUpstream(fallbacks);
      }
    });
    upstream.on("data", (chunk: Buffer) => this.forward(chunk, this.toClient));
    upstream.on("end", () => this.peerEnded(this.toClient));
    upstream.on("close", () => this.socketClosed());
    this.toClient.setSource(upstream);
  }

  enterBlackhole(): void {
    this.silenced = true;
    // Bytes still waiting out a delay were in flight when the partition began: lost.
    if (this.toUpstream.discard() + this.toClient.discard() > 0) this.broken = true;
    // Keep reading so that the bytes can be dropped rather than pile up behind back-pressure.
    this.client.resume();
    this.upstream?.resume();
  }

  leaveBlackhole(): void {
    this.silenced = false;
    if (this.broken) this.reset();
    else if (!this.upstream && !this.clientClosed && !this.tornDown) this.connectUpstream();
  }

  reset(): void {
    this.tornDown = true;
    this.toUpstream.discard();
    this.toClient.discard();
    resetSocket(this.client);
    if (this.upstream) resetSocket(this.upstream);
  }

  destroy(): void {
    this.tornDown = true;
    this.toUpstream.discard();
    this.toClient.discard();
    this.client.destroy();
    this.upstream?.destroy();
  }

  /** For close(): a connection whose sockets did not report their closing in time is taken for gone. */
  forceGone(): void {
    this.destroy();
    this.markGone();
  }

  /** Bytes, a FIN or an RST that arrive now are swallowed. */
  private get dropping(): boolean {
    return this.proxy.mode === "blackhole" || this.silenced;
  }

  private forward(chunk: Buffer, pipe: DelayedPipe): void {
    const mode = this.proxy.mode;
    if (this.dropping) {
      this.proxy.bytesDropped += chunk.length;
      this.broken = true;
    } else if (mode !== "reset") {
      pipe.push(chunk, delayOf(mode));
    }
  }

  private peerEnded(pipe: DelayedPipe): void {
    if (this.dropping) this.broken = true;
    else pipe.endAfterQueue(delayOf(this.proxy.mode));
  }

  private peerReset(): void {
    // An RST from either end travels on at once, ahead of any delayed bytes, as it would on a wire.
    if (this.dropping) this.broken = true;
    else this.reset();
  }

  private socketClosed(): void {
    if (--this.openSockets > 0) return;
    this.toUpstream.discard();
    this.toClient.discard();
    this.markGone();
  }
}

/**
 * One direction of a connection: writes chunks to the target in order, each
 * no earlier than its due time. Bytes that arrive before the target exists
 * (upstream still connecting) wait in the queue.
 */
class DelayedPipe {
  private readonly queue: Array<{ chunk: Buffer | "end"; dueAt: number }> = [];
  private timer: NodeJS.Timeout | undefined;
  private target: Socket | undefined;

  constructor(private source: Socket | undefined, private readonly onForwarded: (bytes: number) => void) {}

  setSource(source: Socket): void {
    this.source = source;
  }

  setTarget(target: Socket): void {
    this.target = target;
    // Let the sender feel a slow receiver instead of buffering without bound.
    target.on("drain", () => this.source?.resume());
    this.flush();
  }

  push(chunk: Buffer, delayMs: number): void {
    this.queue.push({ chunk, dueAt: Date.now() + delayMs });
    this.flush();
  }

  endAfterQueue(delayMs: number): void {
    this.queue.push({ chunk: "end", dueAt: Date.now() + delayMs });
    this.flush();
  }

  /** Forgets everything queued; returns how many entries were dropped. */
  discard(): number {
    const dropped = this.queue.length;
    this.queue.length = 0;
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    return dropped;
  }

  private flush(): void {
    if (this.timer) return;
    const target = this.target;
    if (!target) return;
    const now = Date.now();
    while (this.queue.length > 0) {
      const head = this.queue[0]!;
      if (head.dueAt > now) {
        this.timer = setTimeout(() => {
          this.timer = undefined;
          this.flush();
        }, head.dueAt - now);
        return;
      }
      this.queue.shift();
      if (target.destroyed) continue;
      if (head.chunk === "end") {
        target.end();
        continue;
      }
      this.onForwarded(head.chunk.length);
      if (!target.write(head.chunk)) this.source?.pause();
    }
  }
}

function resetSocket(socket: Socket): void {
  if (socket.destroyed) return;
  // resetAndDestroy needs a TCP handle; a socket whose connect never got one can only be destroyed.
  try {
    socket.resetAndDestroy();
  } catch {
    socket.destroy();
  }
}

function delayOf(mode: FaultMode): number {
  return typeof mode === "object" ? mode.delayMs : 0;
}

function validMode(mode: FaultMode): FaultMode {
  if (typeof mode === "object") {
    if (!Number.isFinite(mode.delayMs) || mode.delayMs < 0) throw new Error(`bad delay: ${mode.delayMs}`);
    return { delayMs: mode.delayMs };
  }
  if (mode !== "pass" && mode !== "blackhole" && mode !== "reset" && mode !== "silence-existing") throw new Error(`unknown mode: ${String(mode)}`);
  return mode;
}

function upstreams(upstream: string | string[]): string[] {
  const list = typeof upstream === "string" ? [upstream] : [...upstream];
  if (list.length === 0) throw new Error("at least one upstream is needed");
  for (const hostPort of list) splitHostPort(hostPort);
  return list;
}

function splitHostPort(hostPort: string): { host: string; port: number } {
  const match = /^(?:[a-z]+:\/\/)?([^:/]+):(\d+)\/?$/.exec(hostPort);
  if (!match) throw new Error(`not host:port: ${hostPort}`);
  const host = match[1]!;
  // This proxy exists to break the loopback path between tests and their etcd, nothing else.
  if (host !== "127.0.0.1" && host !== "localhost") throw new Error(`upstream must be on loopback: ${hostPort}`);
  return { host: host === "localhost" ? "127.0.0.1" : host, port: Number(match[2]) };
}
