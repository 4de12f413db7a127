// An HTTP proxy on loopback in front of etcd's v2 API that counts what etcd
// receives, by kind: a listing (GET of the directory, sorted or recursive), a
// watch (wait=true), a point read, a TTL refresh (refresh=true, no value), a
// compare-and-swap write (prevIndex), another write, a create (POST), a
// delete. Long-poll watches pass through and are torn down upstream when the
// client gives up on them.
import { Agent, createServer, request, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { Socket } from "node:net";

export type RequestKind = "list" | "watch" | "read" | "refresh" | "cas-write" | "write" | "create" | "delete" | "other";
export const REQUEST_KINDS: readonly RequestKind[] = ["list", "watch", "read", "refresh", "cas-write", "write", "create", "delete", "other"];

export type Counts = Record<RequestKind, number>;

export function emptyCounts(): Counts {
  return Object.fromEntries(REQUEST_KINDS.map((k) => [k, 0])) as Counts;
}

export function diffCounts(after: Counts, before: Counts): Counts {
  return Object.fromEntries(REQUEST_KINDS.map((k) => [k, after[k] - before[k]])) as Counts;
}

export function totalOf(counts: Counts): number {
  return REQUEST_KINDS.reduce((sum, k) => sum + counts[k], 0);
}

export function classify(method: string, url: string): RequestKind {
  const parsed = new URL(url, "http://proxy");
  if (!parsed.pathname.startsWith("/v2/keys")) return "other";
  const q = parsed.searchParams;
  switch (method) {
    case "GET":
      if (q.get("wait") === "true") return "watch";
      if (q.get("sorted") === "true" || q.get("recursive") === "true") return "list";
      return "read";
    case "PUT":
      if (q.get("refresh") === "true") return "refresh";
      if (q.has("prevIndex") || q.has("prevValue")) return "cas-write";
      return "write";
    case "POST":
      return "create";
    case "DELETE":
      return "delete";
    default:
      return "other";
  }
}

const HOP_BY_HOP = new Set(["connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade", "te", "trailer", "host"]);

export class CountingProxy {
  private counts = emptyCounts();
  private readonly sockets = new Set<Socket>();
  private readonly agent = new Agent({ keepAlive: true, maxSockets: 20_000 });

  private constructor(private readonly server: Server, readonly port: number, private readonly upstream: { host: string; port: number }) {
    server.on("connection", (socket: Socket) => {
      this.sockets.add(socket);
      socket.once("close", () => this.sockets.delete(socket));
    });
    server.on("request", (req: IncomingMessage, res: ServerResponse) => this.forward(req, res));
  }

  /** `upstream` is etcd's client URL, e.g. http://127.0.0.1:2379. */
  static async start(upstream: string): Promise<CountingProxy> {
    const target = new URL(upstream);
    const server = createServer({ keepAliveTimeout: 5_000 });
    server.maxConnections = 20_000;
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen(0, "127.0.0.1", () => resolve());
    });
    const address = server.address();
    if (!address || typeof address !== "object") throw new Error("counting proxy has no address");
    return new CountingProxy(server, address.port, { host: target.hostname, port: Number(target.port) });
  }

  get url(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  snapshot(): Counts {
    return { ...this.counts };
  }

  async close(): Promise<void> {
    for (const socket of this.sockets) socket.destroy();
    this.agent.destroy();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private forward(req: IncomingMessage, res: ServerResponse): void {
    const kind = classify(req.method ?? "GET", req.url ?? "/");
    this.counts[kind]++;
    const headers: Record<string, string | string[]> = {};
    for (const [name, value] of Object.entries(req.headers)) {
      if (value !== undefined && !HOP_BY_HOP.has(name)) headers[name] = value;
    }
    let answered = false;
    const upstream = request(
      { host: this.upstream.host, port: this.upstream.port, method: req.method, path: req.url, headers, agent: this.agent },
      (upstreamRes) => {
        const outHeaders: Record<string, string | string[]> = {};
        for (const [name, value] of Object.entries(upstreamRes.headers)) {
          if (value !== undefined && !HOP_BY_HOP.has(name)) outHeaders[name] = value;
        }
        res.writeHead(upstreamRes.statusCode ?? 502, outHeaders);
        upstreamRes.pipe(res);
        upstreamRes.on("end", () => (answered = true));
        upstreamRes.on("error", () => res.destroy());
      },
    );
    upstream.on("error", () => {
      if (!res.headersSent) {
        res.writeHead(502);
        res.end();
      } else res.destroy();
    });
    // The client gave up (an aborted watch): tell etcd by dropping the upstream request.
    res.on("close", () => {
      if (!answered) upstream.destroy();
    });
    req.pipe(upstream);
  }
}
