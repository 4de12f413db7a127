// A TCP proxy on loopback between one client and etcd that can be cut the way
// a network partition cuts: silence, not a reset. While cut, every connection
// (old or new) stays open and nothing gets through, not even a FIN; new
// connections are accepted but not connected upstream.
//
// Healing: a connection that lost bytes during the cut can never carry its
// protocol again; after a real partition the next packet on it would meet a
// reset from a peer that forgot it. So on heal every connection that lost
// bytes is reset on both sides and the client has to reconnect; untouched
// connections resume, and connections accepted during the cut connect upstream.
import { connect, createServer, type Server, type Socket } from "node:net";

class Connection {
  upstream: Socket | undefined;
  broken = false;
  closed = false;

  constructor(readonly client: Socket, private readonly proxy: PartitionProxy) {
    client.on("data", (chunk: Buffer) => {
      if (this.proxy.cut || !this.upstream) {
        this.proxy.bytesDropped += chunk.length;
        this.broken = true;
        return;
      }
      this.upstream.write(chunk);
    });
    client.on("end", () => {
      if (this.proxy.cut || !this.upstream) this.broken = true;
      else this.upstream.end();
    });
    // A close on one side must not cross a cut either: the other side learns of it after the heal.
    client.on("error", () => this.sideClosed());
    client.on("close", () => this.sideClosed());
  }

  private sideClosed(): void {
    if (this.proxy.cut) this.broken = true;
    else this.destroy();
  }

  connectUpstream(host: string, port: number): void {
    const upstream = connect({ host, port, allowHalfOpen: true });
    this.upstream = upstream;
    upstream.on("data", (chunk: Buffer) => {
      if (this.proxy.cut) {
        this.proxy.bytesDropped += chunk.length;
        this.broken = true;
        return;
      }
      this.client.write(chunk);
    });
    upstream.on("end", () => {
      if (this.proxy.cut) this.broken = true;
      else this.client.end();
    });
    upstream.on("error", () => this.sideClosed());
    upstream.on("close", () => this.sideClosed());
  }

  reset(): void {
    for (const socket of [this.client, this.upstream]) {
      if (socket && !socket.destroyed) socket.resetAndDestroy();
    }
    this.destroy();
  }

  destroy(): void {
    if (this.closed) return;
    this.closed = true;
    this.client.destroy();
    this.upstream?.destroy();
    this.proxy.forget(this);
  }
}

export class PartitionProxy {
  cut = false;
  bytesDropped = 0;
  private readonly connections = new Set<Connection>();

  private constructor(private readonly server: Server, readonly port: number, private readonly upstream: { host: string; port: number }) {
    server.on("connection", (socket: Socket) => {
      const connection = new Connection(socket, this);
      this.connections.add(connection);
      if (!this.cut) connection.connectUpstream(upstream.host, upstream.port);
    });
  }

  /** `upstream` is etcd's client URL. */
  static async start(upstream: string): Promise<PartitionProxy> {
    const target = new URL(upstream);
    const server = createServer({ allowHalfOpen: true });
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen(0, "127.0.0.1", () => resolve());
    });
    const address = server.address();
    if (!address || typeof address !== "object") throw new Error("partition proxy has no address");
    return new PartitionProxy(server, address.port, { host: target.hostname, port: Number(target.port) });
  }

  get url(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  /** Starts the partition. */
  blackhole(): void {
    this.cut = true;
  }

  /** Ends it; see the top of this file. */
  heal(): void {
    this.cut = false;
    for (const connection of [...this.connections]) {
      if (connection.broken) connection.reset();
      else if (!connection.upstream) connection.connectUpstream(this.upstream.host, this.upstream.port);
    }
  }

  forget(connection: Connection): void {
    this.connections.delete(connection);
  }

  async close(): Promise<void> {
    for (const connection of [...this.connections]) connection.destroy();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}
