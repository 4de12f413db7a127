// `--backend nats`: the election on a key of a JetStream KV bucket, through
// `etcd-leader/nats`. The flags are the `nats` tool's own: --server (also
// NATS_URL), --tlscert/--tlskey/--tlsca, --user/--password, and --bucket.
//
// The NATS client packages (@nats-io/transport-node and @nats-io/kv) are
// optional peers, loaded here only when --backend nats is given. The bucket
// is opened and its status read before any command starts, so that a server
// that cannot be reached, a bucket that does not exist and a --ttl that is
// not the bucket's each fail at once, with a message, instead of being
// retried in silence.
//
// NATS applies the bucket's TTL (max_age) to every key in it, so a member's
// TTL is the bucket's: --ttl may be left out, and one that differs is an error.
import { natsLeader, type NatsKvBucket } from "../../nats";
import { loadClient } from "./load-client";
import { CliError, EXIT } from "../exit";
import type { Store } from "./store";

export interface NatsFlags {
  /** Comma-separated server URLs. */
  server?: string | undefined;
  bucket?: string | undefined;
  tlscert?: string | undefined;
  tlskey?: string | undefined;
  tlsca?: string | undefined;
  user?: string | undefined;
  password?: string | undefined;
}

/** As the `nats` tool: NATS_URL, else a server on this host. */
const DEFAULT_SERVER = "nats://127.0.0.1:4222";
/** What --backend nats needs installed beside etcd-leader. */
const NATS_PACKAGES = "@nats-io/transport-node @nats-io/kv";
/** How long the first connection and the bucket's status may take. */
const CONNECT_TIMEOUT_MS = 5_000;

interface NatsConnection {
  close(): Promise<void>;
}
type Connect = (options: object) => Promise<NatsConnection>;
type KvmClass = new (nc: NatsConnection) => { open(name: string): Promise<NatsKvBucket> };

export async function connectNats(flags: NatsFlags): Promise<Store> {
  const bucketName = flags.bucket;
  if (bucketName === undefined || bucketName === "") {
    throw new CliError(
      EXIT.usage,
      "--backend nats needs --bucket NAME, the KV bucket that holds the election; make it with a TTL, e.g. nats kv add --ttl 10s leaders",
    );
  }
  const servers = (flags.server ?? process.env.NATS_URL ?? DEFAULT_SERVER)
    .split(",")
    .map((url) => url.trim())
    .filter((url) => url !== "");
  if (servers.length === 0) throw new CliError(EXIT.usage, "--server is empty: give at least one, e.g. --server nats://127.0.0.1:4222");
  const description = `NATS KV bucket ${bucketName} at ${servers.join(",")}`;
  const flagsToCheck = "check --server (or NATS_URL), --bucket, the TLS files (--tlsca, --tlscert, --tlskey), and --user/--password";

  const auth = credentials(flags);
  const { connect } = loadClient("@nats-io/transport-node", "--backend nats", NATS_PACKAGES) as { connect: Connect };
  const { Kvm } = loadClient("@nats-io/kv", "--backend nats", NATS_PACKAGES) as { Kvm: KvmClass };
  let nc: NatsConnection;
  try {
    nc = await connect({
      servers,
      name: "etcd-leader",
      timeout: CONNECT_TIMEOUT_MS,
      // A member outlives a server restart: reconnect for as long as it runs.
      maxReconnectAttempts: -1,
      reconnectTimeWait: 250,
      ...auth,
    });
  } catch (err) {
    throw new CliError(EXIT.unavailable, `cannot connect to NATS at ${servers.join(",")}: ${messageOf(err)}\n${flagsToCheck}`);
  }
  const closeConnection = () => nc.close().catch(() => undefined);
  let bucket: NatsKvBucket;
  let bucketTtlMs: number;
  try {
    bucket = await openBucket(new Kvm(nc), bucketName, description, flagsToCheck);
    bucketTtlMs = (await bucket.status()).ttl;
  } catch (err) {
    await closeConnection();
    if (err instanceof CliError) throw err;
    if (bucketIsMissing(err)) {
      throw new CliError(
        EXIT.unavailable,
        `there is no KV bucket ${bucketName} at ${servers.join(",")} (or JetStream is off there): ` +
          `make it with a TTL, e.g. nats kv add --ttl 10s ${bucketName}, or check --bucket`,
      );
    }
    throw new CliError(EXIT.unavailable, `cannot read ${description}: ${messageOf(err)}\n${flagsToCheck}`);
  }

  return {
    description,
    flagsToCheck,
    election: async (key, name, ttlSeconds, options = {}) => {
      if (ttlSeconds !== undefined && ttlSeconds * 1000 !== bucketTtlMs) {
        throw new CliError(
          EXIT.usage,
          `--ttl ${ttlSeconds} differs from the TTL of bucket ${bucketName} (max_age ${bucketTtlMs / 1000} s), ` +
            "which NATS applies to every key in it: leave --ttl out, or give the bucket that TTL",
        );
      }
      try {
        return await natsLeader(bucket, key, name, options);
      } catch (err) {
        // A bucket without a TTL, or one too short for the timing: the
        // library's message names both.
        if (err instanceof RangeError) throw new CliError(EXIT.usage, `bucket ${bucketName}: ${err.message}`);
        throw keyRefused(err);
      }
    },
    observe: (key) => {
      try {
        return natsLeader.observe(bucket, key);
      } catch (err) {
        throw keyRefused(err);
      }
    },
    whoLeads: (key, requestTimeout) =>
      natsLeader.whoLeads(bucket, key, { requestTimeout }).catch((err: unknown) => {
        throw keyRefused(err);
      }),
    candidates: (key, requestTimeout) =>
      Promise.resolve()
        .then(() => natsLeader.candidates(bucket, key, { requestTimeout }))
        .catch((err: unknown) => {
          throw keyRefused(err);
        }),
    close: closeConnection,
  };
}

async function openBucket(kvm: InstanceType<KvmClass>, name: string, description: string, flagsToCheck: string): Promise<NatsKvBucket> {
  try {
    return await kvm.open(name);
  } catch (err) {
    // The client checks the name before it asks the server.
    if (/invalid bucket name/i.test(messageOf(err))) {
      throw new CliError(EXIT.usage, `--bucket ${JSON.stringify(name)}: ${messageOf(err)}; a bucket name is letters, digits, - and _`);
    }
    throw new CliError(EXIT.unavailable, `cannot open ${description}: ${messageOf(err)}\n${flagsToCheck}`);
  }
}

/** The library refuses a key NATS would refuse with a TypeError; here that is a usage error. */
function keyRefused(err: unknown): unknown {
  return err instanceof TypeError && err.message.startsWith("NATS refuses the key") ? new CliError(EXIT.usage, err.message) : err;
}

/**
 * What the NATS client says when a bucket does not exist: its stream is not
 * found (JetStream's error 10059), or nothing answers JetStream's API at all
 * (JetStream is off on that server).
 */
function bucketIsMissing(err: unknown): boolean {
  const { code, name, cause } = (err ?? {}) as { code?: unknown; name?: unknown; cause?: { message?: unknown } };
  if (code === 10059 || name === "StreamNotFoundError") return true;
  return name === "JetStreamNotEnabled" && String(cause?.message ?? "").startsWith("no responders");
}

/** The `nats` tool's flags, as nats.js's connect options. */
function credentials(flags: NatsFlags): object {
  if ((flags.tlscert === undefined) !== (flags.tlskey === undefined)) {
    throw new CliError(EXIT.usage, "--tlscert and --tlskey go together: give both (the client certificate and its private key), or neither");
  }
  if (flags.password !== undefined && flags.user === undefined) throw new CliError(EXIT.usage, "--password needs --user: give the user name too");
  const tls = {
    ...(flags.tlsca !== undefined ? { caFile: flags.tlsca } : {}),
    ...(flags.tlscert !== undefined ? { certFile: flags.tlscert, keyFile: flags.tlskey } : {}),
  };
  return {
    ...(Object.keys(tls).length > 0 ? { tls } : {}),
    ...(flags.user !== undefined ? { user: flags.user, pass: flags.password ?? "" } : {}),
  };
}

function messageOf(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
