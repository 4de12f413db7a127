// Health probes over HTTP: a request handler for node:http (and so for
// Express, Fastify's middie, Koa's adapters and the like) that answers
// `/livez` and `/readyz` from `election.health()`, with 200 or 503 and a
// small JSON body saying why. Kubernetes' probes read the status; people
// read the body.
//
// Several elections may stand behind one handler (a process that shards its
// work): the process is live while every one is, ready while every one is.
import type { IncomingMessage, ServerResponse } from "node:http";
import { resolveHealthOptions, type ElectionHealth, type HealthOptions, type Verdict } from "../election/health";

/** Anything with a health(): an Election. */
export interface HealthSource {
  health(options?: HealthOptions): ElectionHealth;
}

/** The elections to answer for: one, a list, or a function that lists them at each request. */
export type HealthTarget = HealthSource | readonly HealthSource[] | (() => Iterable<HealthSource>);

/**
 * `(req, res)` for `http.createServer()`, or `(req, res, next)` as middleware:
 * a request for another path goes to `next` (404 without one).
 */
export type HealthRequestHandler = (req: IncomingMessage, res: ServerResponse, next?: (err?: unknown) => void) => void;

/** The JSON body of an answer. */
export interface HealthAnswer {
  /** "ok" with status 200, "fail" with 503. */
  readonly status: "ok" | "fail";
  /** Which check: "live" for /livez, "ready" for /readyz. */
  readonly check: "live" | "ready";
  /** Each election's verdict for this check, and what it knows. */
  readonly elections: ReadonlyArray<Pick<ElectionHealth, "name" | "store" | "state" | "leading" | "leader" | "sinceConfirmedMs" | "failingForMs"> & Verdict>;
}

const PATHS = { "/livez": "live", "/readyz": "ready" } as const;

/**
 * A handler answering `GET /livez` and `GET /readyz` (and HEAD) for
 * `target`, judged with `options` (readiness, unhealthyAfter; checked now,
 * against the first election's TTL for the default bound).
 */
export function healthHandler(target: HealthTarget, options?: HealthOptions): HealthRequestHandler {
  const sources = sourcesOf(target);
  // Checked here, once, so that a mistake shows at start-up rather than at the first probe.
  resolveHealthOptions(options, 10_000, "healthHandler()");
  return (req, res, next) => {
    const path = (req.url ?? "/").split("?", 1)[0]!.replace(/\/+$/, "") || "/";
    const check = PATHS[path as keyof typeof PATHS];
    if (!check) {
      if (next) return next();
      return send(res, 404, { error: `no such probe: ${path}; the probes are /livez and /readyz` }, req.method === "HEAD");
    }
    if (req.method !== "GET" && req.method !== "HEAD") {
      res.setHeader("Allow", "GET, HEAD");
      return send(res, 405, { error: `${req.method} ${path}: only GET and HEAD are answered` }, false);
    }
    let answer: HealthAnswer;
    try {
      answer = judge([...sources()], check, options);
    } catch (err) {
      // A probe that cannot be judged is a failed one, and says why.
      return send(res, 503, { status: "fail", check, error: (err as Error)?.message ?? String(err) }, req.method === "HEAD");
    }
    send(res, answer.status === "ok" ? 200 : 503, answer, req.method === "HEAD");
  };
}

function judge(sources: HealthSource[], check: "live" | "ready", options: HealthOptions | undefined): HealthAnswer {
  const elections = sources.map((source) => {
    const health = source.health(options);
    const verdict = health[check];
    return {
      name: health.name,
      store: health.store,
      state: health.state,
      leading: health.leading,
      leader: health.leader,
      sinceConfirmedMs: health.sinceConfirmedMs,
      failingForMs: health.failingForMs,
      ok: verdict.ok,
      reason: verdict.reason,
    };
  });
  // No election: nothing is wedged, and nothing is ready to serve as a member.
  const ok = check === "live" ? elections.every((e) => e.ok) : elections.length > 0 && elections.every((e) => e.ok);
  return { status: ok ? "ok" : "fail", check, elections };
}

function sourcesOf(target: HealthTarget): () => Iterable<HealthSource> {
  if (typeof target === "function") return target;
  const list = Array.isArray(target) ? [...(target as readonly HealthSource[])] : [target as HealthSource];
  for (const [i, source] of list.entries()) {
    if (typeof (source as Partial<HealthSource> | null)?.health !== "function") {
      throw new TypeError(`healthHandler(): ${Array.isArray(target) ? `elections[${i}]` : "the election"} has no health() method: pass an Election, a list of them, or a function returning them`);
    }
  }
  return () => list;
}

function send(res: ServerResponse, status: number, body: object, head: boolean): void {
  const text = JSON.stringify(body);
  res.statusCode = status;
  res.setHeader("Content-Type", "application/json; charset=utf-8");
  res.setHeader("Cache-Control", "no-store");
  res.setHeader("Content-Length", Buffer.byteLength(text));
  res.end(head ? undefined : text);
}
