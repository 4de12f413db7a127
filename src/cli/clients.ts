// Builds the store client a command talks through, from etcdctl's flags:
// --endpoints (or ETCDCTL_ENDPOINTS), --cacert/--cert/--key, --user/--password,
// and --api v2 for node-etcd. This is the one place that knows how each client
// library is configured; the commands only see `client` and `close()`.
//
// The clients are optional peer dependencies of the package: they are loaded
// here, only for the API asked for, and a missing one is reported with the
// command that installs it.
import { readFileSync } from "node:fs";
import etcdLeader = require("../index");
import { CliError, EXIT } from "./exit";

export type Api = "v3" | "v2";

export interface ConnectionFlags {
  backend: "etcd" | "nats";
  /** NATS: the server URL and the KV bucket. */
  server?: string | undefined;
  bucket?: string | undefined;
  endpoints: string[];
  api: Api;
  cacert?: string | undefined;
  cert?: string | undefined;
  key?: string | undefined;
  user?: string | undefined;
  password?: string | undefined;
}

export interface StoreConnection {
  /** What the library's factory takes: an Etcd3 or a node-etcd client. */
  client: unknown;
  /** For messages: "etcd v3 at http://127.0.0.1:2379". */
  description: string;
  close(): void;
}

export function connect(flags: ConnectionFlags): StoreConnection {
  if (flags.backend === "nats") {
    // The flags are reserved (--server, --bucket, NATS's own names); the NATS KV backend plugs in here.
    throw new CliError(EXIT.usage, "the NATS backend is not available in this build: use --backend etcd (the default)");
  }
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
  // etcd3's type insists on a CA with a client certificate, but grpc-js falls back to the system's CAs.
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

function loadClient(name: "etcd3" | "node-etcd", forWhat: string): unknown {
  try {
    return require(name);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== "MODULE_NOT_FOUND") throw err;
    throw new CliError(
      EXIT.unavailable,
      `the ${name} client is not installed, and ${forWhat} needs it: install it beside etcd-leader (npm install ${name})`,
    );
  }
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
