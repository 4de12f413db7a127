// `run --health-addr HOST:PORT` and `--metrics-addr HOST:PORT`: the member's
// health probes (/livez, /readyz: etcdLeader.healthHandler) and its
// Prometheus metrics (/metrics: etcdLeader.metrics on a registry of its own,
// prom-client loaded only then), each on an HTTP server, or both on one when
// the addresses are the same. The servers never keep the CLI alive by
// themselves, and close with it.
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import etcdLeader = require("../../index");
import { CliError, EXIT } from "../exit";

export interface Address {
  readonly host: string;
  /** 0: any free port (the one chosen is reported). */
  readonly port: number;
}

export interface HealthSettings extends Address {
  readonly readiness: etcdLeader.Readiness;
  /** Milliseconds; undefined: the library's default (60 s, or 3 TTLs if longer). */
  readonly unhealthyAfter: number | undefined;
}

export interface EndpointSettings {
  readonly health: HealthSettings | undefined;
  readonly metrics: Address | undefined;
}

/** What is being served, and how to stop it. */
export interface Endpoints {
  /** http://HOST:PORT of the health probes, if served. */
  readonly healthUrl: string | undefined;
  /** http://HOST:PORT of /metrics, if served. */
  readonly metricsUrl: string | undefined;
  close(): Promise<void>;
}

type Handler = (req: IncomingMessage, res: ServerResponse, next: () => void) => void;

/** Parses HOST:PORT ([IPv6]:PORT for IPv6); undefined if it is not one. */
export function parseAddress(text: string): Address | undefined {
  const match = /^(?:\[([^\]]+)\]|([^:[\]]+)):(\d{1,5})$/.exec(text.trim());
  if (!match) return undefined;
  const port = Number(match[3]);
  if (port > 65_535) return undefined;
  return { host: match[1] ?? match[2]!, port };
}

/**
 * Starts collecting metrics (before the election starts, so that its first
 * state is counted) and returns what serves them; undefined without
 * --metrics-addr. A missing prom-client is a CliError that says what to install.
 */
export function metricsHandler(settings: EndpointSettings): { handler: Handler; close(): void } | undefined {
  if (!settings.metrics) return undefined;
  const prom = loadPromClient();
  const registry = new prom.Registry();
  const metrics = etcdLeader.metrics({ register: registry, client: prom });
  return {
    handler: (req, res, next) => {
      if ((req.url ?? "/").split("?", 1)[0] !== "/metrics") return next();
      registry.metrics().then(
        (text) => {
          res.setHeader("Content-Type", registry.contentType);
          res.end(text);
        },
        (err: unknown) => {
          res.statusCode = 500;
          res.end(String((err as Error)?.message ?? err));
        },
      );
    },
    close: () => metrics.close(),
  };
}

export async function serveEndpoints(
  election: etcdLeader.Election,
  settings: EndpointSettings,
  metrics: { handler: Handler } | undefined,
): Promise<Endpoints> {
  const servers: Array<{ address: Address; flags: string[]; handlers: Handler[] }> = [];
  const add = (address: Address, flag: string, handler: Handler) => {
    const same = servers.find((s) => s.address.host === address.host && s.address.port === address.port && address.port !== 0);
    if (same) {
      same.flags.push(flag);
      same.handlers.push(handler);
    } else {
      servers.push({ address, flags: [flag], handlers: [handler] });
    }
  };
  if (settings.health) {
    const { readiness, unhealthyAfter } = settings.health;
    const health = etcdLeader.healthHandler(election, { readiness, ...(unhealthyAfter === undefined ? {} : { unhealthyAfter }) });
    add(settings.health, "--health-addr", health);
  }
  if (settings.metrics && metrics) add(settings.metrics, "--metrics-addr", metrics.handler);
  const started: Array<{ url: string; flags: string[]; close(): Promise<void> }> = [];
  try {
    for (const server of servers) started.push({ ...(await listen(server.address, server.flags, server.handlers)), flags: server.flags });
  } catch (err) {
    await Promise.all(started.map((s) => s.close()));
    throw err;
  }
  const urlOf = (flag: string) => started.find((s) => s.flags.includes(flag))?.url;
  return {
    healthUrl: urlOf("--health-addr"),
    metricsUrl: urlOf("--metrics-addr"),
    close: async () => {
      await Promise.all(started.map((s) => s.close()));
    },
  };
}

async function listen(address: Address, flags: string[], handlers: Handler[]): Promise<{ url: string; close(): Promise<void> }> {
  const server = createServer((req, res) => {
    const tryFrom = (i: number): void => {
      const handler = handlers[i];
      if (!handler) {
        res.statusCode = 404;
        res.setHeader("Content-Type", "text/plain; charset=utf-8");
        res.end(`not found: this serves ${flags.map((f) => (f === "--health-addr" ? "/livez, /readyz" : "/metrics")).join(", ")}\n`);
        return;
      }
      handler(req, res, () => tryFrom(i + 1));
    };
    tryFrom(0);
  });
  // A probe's idle connection must not hold the CLI open once it is done.
  server.keepAliveTimeout = 1_000;
  await new Promise<void>((resolve, reject) => {
    server.once("error", (err: NodeJS.ErrnoException) => {
      reject(
        new CliError(
          EXIT.unavailable,
          `${flags.join(" and ")} ${address.host}:${address.port}: cannot listen there (${err.code ?? err.message}): choose another address or port`,
        ),
      );
    });
    server.listen(address.port, address.host, () => resolve());
  });
  server.unref();
  const { address: host, port } = server.address() as AddressInfo;
  return {
    url: `http://${host.includes(":") ? `[${host}]` : host}:${port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

interface PromModule {
  Registry: new () => { metrics(): Promise<string>; readonly contentType: string };
}

function loadPromClient(): PromModule {
  try {
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    return require("prom-client") as PromModule;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== "MODULE_NOT_FOUND") throw err;
    throw new CliError(EXIT.unavailable, "--metrics-addr needs prom-client, which is not installed: install it beside etcd-leader (npm install prom-client)");
  }
}
