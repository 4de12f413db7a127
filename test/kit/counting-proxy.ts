// An HTTP proxy on loopback in front of etcd's v2 API that sees every request
// a client makes: it counts them by kind (a listing, a watch, a point read, a
// TTL refresh, a compare-and-swap write, another write, a create, a delete),
// can record each one, can park requests until told to let them go, and can
// hold back answers. A request the client gives up on (an abandoned long-poll
// watch) is dropped upstream too, so etcd sees what it would without the proxy.
import { Agent, createServer, request, type ClientRequest, type IncomingMessage, type Server, type ServerResponse } from "node:http";

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

/** A request as the proxy saw it. */
export interface ProxiedRequest {
  method: string;
  kind: RequestKind;
  /** The decoded path, e.g. /v2/keys/election/00000000000000000012. */
  path: string;
  query: URLSearchParams;
  /** performance.now() when it arrived. */
  at: number;
  /** The client gave up on it before the answer was complete. */
  abandoned: boolean;
}

/** Requests matching a predicate are parked, not forwarded, until `release()`. */
export class Hold {
  private readonly parked: Array<() => void> = [];
  private released = false;
  private firstSeen!: (r: ProxiedRequest) => void;
  /** The first request this hold parked. */
  readonly seen = new Promise<ProxiedRequest>((resolve) => (this.firstSeen = resolve));

  constructor(readonly matches: (r: ProxiedRequest) => boolean) {}

  park(record: ProxiedRequest, forward: () => void): void {
    this.firstSeen(record);
    if (this.released) forward();
    else this.parked.push(forward);
  }

  get active(): boolean {
    return !this.released;
  }

  /** Forwards what was parked (unless its client gave up) and parks nothing more. */
  release(): void {
    this.released = true;
    for (const forward of this.parked.splice(0)) forward();
  }
}

export interface CountingProxyOptions {
  /** Port to listen on; default: any free one. */
  port?: number;
  /** Keep every request in `requests` (default true). A long benchmark only needs the counts. */
  record?: boolean;
  /**
   * Reuse upstream connections (default false: one connection per request,
   * closed with it, which is what a test that stops etcd under the proxy wants).
   * Thousands of members polling through the proxy need reuse.
   */
  keepAlive?: boolean;
}

/** Headers that describe one connection, not the request, so they are not passed on. */
const HOP_BY_HOP = new Set(["connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade", "te", "trailer"]);

export class CountingProxy {
  /** Every request so far, oldest first (empty with `record: false`). */
  readonly requests: ProxiedRequest[] = [];
  private counts = emptyCounts();
  private readonly holds = new Set<Hold>();
  private readonly delays: Array<{ matches: (r: ProxiedRequest) => boolean; ms: number }> = [];
  private readonly upstreamRequests = new Set<ClientRequest>();
  private readonly agent: Agent | false;

  private constructor(
    private readonly server: Server,
    readonly port: number,
    private readonly target: { host: string; port: number },
    private readonly options: CountingProxyOptions,
  ) {
    this.agent = options.keepAlive ? new Agent({ keepAlive: true, maxSockets: 20_000 }) : false;
    server.on("request", (req: IncomingMessage, res: ServerResponse) => this.handle(req, res));
  }

  /** Listens on 127.0.0.1 and forwards to `target`: etcd's `host:port` or its client URL. */
  static async start(target: string, options: CountingProxyOptions = {}): Promise<CountingProxy> {
    const server = createServer();
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen(options.port ?? 0, "127.0.0.1", () => resolve());
    });
    const address = server.address();
    if (!address || typeof address !== "object") throw new Error("counting proxy has no address");
    return new CountingProxy(server, address.port, hostAndPort(target), options);
  }

  get hostPort(): string {
    return `127.0.0.1:${this.port}`;
  }

  get url(): string {
    return `http://${this.hostPort}`;
  }

  /** Requests so far, by kind. */
  snapshot(): Counts {
    return { ...this.counts };
  }

  /** Parks every new request matching `matches` until the hold is released (close() releases it too). */
  hold(matches: (r: ProxiedRequest) => boolean): Hold {
    const hold = new Hold(matches);
    this.holds.add(hold);
    return hold;
  }

  /** Forwards requests matching `matches` at once, but passes their answers on only after `ms`. */
  delayAnswers(matches: (r: ProxiedRequest) => boolean, ms: number): void {
    this.delays.push({ matches, ms });
  }

  /** Recorded requests that arrived at or after `at` (performance.now()). */
  since(at: number): ProxiedRequest[] {
    return this.requests.filter((r) => r.at >= at);
  }

  async close(): Promise<void> {
    for (const hold of this.holds) hold.release();
    for (const req of this.upstreamRequests) req.destroy();
    this.server.closeAllConnections();
    if (this.agent) this.agent.destroy();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private handle(req: IncomingMessage, res: ServerResponse): void {
    const url = new URL(req.url!, "http://proxy");
    const record: ProxiedRequest = {
      method: req.method!,
      kind: classify(req.method!, req.url!),
      path: decodeURIComponent(url.pathname),
      query: url.searchParams,
      at: performance.now(),
      abandoned: false,
    };
    this.counts[record.kind]++;
    if (this.options.record !== false) this.requests.push(record);
    let upstream: ClientRequest | undefined;
    // The client gave up (an aborted watch): tell etcd by dropping the upstream request.
    res.on("close", () => {
      if (!res.writableFinished) {
        record.abandoned = true;
        upstream?.destroy();
      }
    });
    const headers: Record<string, string | string[]> = {};
    for (const [name, value] of Object.entries(req.headers)) {
      if (value !== undefined && !HOP_BY_HOP.has(name)) headers[name] = value;
    }
    // The body is read whole before anything is forwarded, so that a held request can be parked complete.
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const body = Buffer.concat(chunks);
      const forward = (): void => {
        if (record.abandoned || res.destroyed) return;
        upstream = request(
          { ...this.target, method: req.method, path: req.url, headers, agent: this.agent },
          (answer) => {
            const pass = (): void => {
              if (res.destroyed) return void answer.resume();
              const answerHeaders: Record<string, string | string[]> = {};
              for (const [name, value] of Object.entries(answer.headers)) {
                if (value !== undefined && !HOP_BY_HOP.has(name)) answerHeaders[name] = value;
              }
              res.writeHead(answer.statusCode ?? 502, answerHeaders);
              answer.pipe(res);
              answer.on("error", () => res.destroy());
            };
            const delay = this.delays.find((d) => d.matches(record))?.ms ?? 0;
            if (delay > 0) setTimeout(pass, delay);
            else pass();
          },
        );
        const sent = upstream;
        this.upstreamRequests.add(sent);
        sent.on("close", () => this.upstreamRequests.delete(sent));
        // The client sees the connection drop, as it would talking to etcd directly.
        sent.on("error", () => res.destroy());
        sent.end(body);
      };
      const hold = [...this.holds].find((h) => h.active && h.matches(record));
      if (hold) hold.park(record, forward);
      else forward();
    });
  }
}

function hostAndPort(target: string): { host: string; port: number } {
  const { hostname, port } = new URL(target.includes("://") ? target : `http://${target}`);
  return { host: hostname, port: Number(port) };
}
