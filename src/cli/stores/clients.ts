// Builds the store a command talks to. For etcd, from etcdctl's flags:
// --endpoints (or ETCDCTL_ENDPOINTS), --cacert/--cert/--key, --user/--password,
// and --api v2 for node-etcd; `--backend nats`, `postgres` and `redis` hand
// over to nats-store.ts, postgres-store.ts and redis-store.ts. This is the
// one place that knows how each etcd client library is configured; the
// commands only see a Store.
//
// The clients are optional peer dependencies of the package: they are loaded
// here, only for the API asked for, and a missing one is reported with the
// command that installs it.
import { readFileSync } from "node:fs";
import etcdLeader = require("../../index");
import { CliError, EXIT } from "../exit";
import { connectNats, type NatsFlags } from "./nats-store";
import { connectPostgres, type PostgresFlags } from "./postgres-store";
import { connectRedis, type RedisFlags } from "./redis-store";
import { loadClient } from "./load-client";
import type { Store } from "./store";

export type Api = "v3" | "v2";

export interface ConnectionFlags {
  backend: "etcd" | "nats" | "postgres" | "redis";
  nats: NatsFlags;
  postgres: PostgresFlags;
  redis: RedisFlags;
  endpoints: string[];
  api: Api;
  cacert?: string | undefined;
  cert?: string | undefined;
  key?: string | undefined;
  user?: string | undefined;
  password?: string | undefined;
}

export async function connect(flags: ConnectionFlags): Promise<Store> {
  if (flags.backend === "nats") return connectNats(flags.nats);
  if (flags.backend === "postgres") return connectPostgres(flags.postgres);
  if (flags.backend === "redis") return connectRedis(flags.redis);
  const { client, description, close } = connectEtcd(flags);
  return {
    description,
    flagsToCheck: "check --endpoints (or ETCDCTL_ENDPOINTS), the TLS files (--cacert, --cert, --key), --user, and --api",
    election: async (key, name, ttlSeconds, options = {}) =>
      etcdLeader({ client, key, name, ...(ttlSeconds === undefined ? {} : { ttl: ttlSeconds }), ...options }),
    observe: (key) => etcdLeader.observe({ client, key }),
    whoLeads: (key, requestTimeout) => etcdLeader.whoLeads(client, key, { requestTimeout }),
    candidates: (key, requestTimeout) => etcdLeader.candidates(client, key, { requestTimeout }),
    close: async () => close(),
  };
}

function connectEtcd(flags: ConnectionFlags): { client: unknown; description: string; close(): void } {
  const tls = readTlsFiles(flags);
  const { user, password } = splitUser(flags);
  const description = `etcd ${flags.api} at ${flags.endpoints.join(",")}`;
  if (flags.api === "v2") {
    const Etcd = loadClient("node-etcd", "--api v2") as new (hosts: string[], options: object) => unknown;
    const client = new Etcd(flags.endpoints, {
      ...(tls.ca ? { ca: tls.ca } : {}),
      ...(tls.cert ? { cert: tls.cert, key: tls.key } : {}),
      ...(user !== undefined ? { auth: { user, pass: password ?? "" } } : {}),
    });
    // node-etcd keeps no connection open between requests.
    return { client, description, close: () => undefined };
  }
  const { Etcd3 } = loadClient("etcd3", "the v3 API (the default)") as { Etcd3: new (options: object) => { close(): void } };
  // etcd3's type insists on a CA with a client certificate, but grpc-js falls
  // back to the system's CAs.
  const options = {
    hosts: flags.endpoints,
    ...(tls.ca || tls.cert
      ? {
          credentials: {
            ...(tls.ca ? { rootCertificate: tls.ca } : {}),
            ...(tls.cert ? { certChain: tls.cert, privateKey: tls.key } : {}),
          },
        }
      : {}),
    ...(user !== undefined ? { auth: { username: user, password: password ?? "" } } : {}),
  } as etcdLeader.Etcd3Options;
  // The settings the library recommends for elections: gRPC keepalive and a short circuit breaker.
  const client = new Etcd3(etcdLeader.etcd3Options(options));
  return { client, description, close: () => client.close() };
}

function readTlsFiles(flags: ConnectionFlags): { ca?: Buffer; cert?: Buffer; key?: Buffer } {
  if ((flags.cert === undefined) !== (flags.key === undefined)) {
    throw new CliError(EXIT.usage, "--cert and --key go together: give both (the client certificate and its private key), or neither");
  }
  const read = (flag: string, path: string | undefined) => {
    if (path === undefined) return undefined;
    try {
      return readFileSync(path);
    } catch (err) {
      throw new CliError(EXIT.usage, `--${flag} ${path}: cannot read it (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`);
    }
  };
  const files: { ca?: Buffer; cert?: Buffer; key?: Buffer } = {};
  const ca = read("cacert", flags.cacert);
  const cert = read("cert", flags.cert);
  const key = read("key", flags.key);
  if (ca) files.ca = ca;
  if (cert) files.cert = cert;
  if (key) files.key = key;
  return files;
}

/** etcdctl takes `--user name:password` or `--user name --password pw`. */
function splitUser(flags: ConnectionFlags): { user?: string; password?: string } {
  if (flags.user === undefined) {
    if (flags.password !== undefined) throw new CliError(EXIT.usage, "--password needs --user: give the user name too");
    return {};
  }
  const colon = flags.user.indexOf(":");
  if (colon >= 0 && flags.password === undefined) {
    return { user: flags.user.slice(0, colon), password: flags.user.slice(colon + 1) };
  }
  return flags.password === undefined ? { user: flags.user } : { user: flags.user, password: flags.password };
}
