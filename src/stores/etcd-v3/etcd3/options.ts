// The etcd3 client settings elections need, as one call:
// `new Etcd3(etcdLeader.etcd3Options({ hosts }))`. Two of etcd3's defaults
// hurt an election (a third, gRPC's channelz, only costs memory: it is off):
//
// - No gRPC keepalive. etcd3 keeps one HTTP/2 connection per host. When it
//   dies without a FIN or an RST (a NAT gateway, an L4 load balancer or a
//   firewall that forgets an idle flow), every call on it times out and the
//   client never replaces it, until the kernel gives up on the TCP connection
//   (about 15 minutes on Linux). A leader steps down as it should, but cannot
//   rejoin. With a ping every 6 s that must be answered within 3 s, gRPC
//   drops the dead connection after about 9 s and dials a new one. (etcd
//   refuses pings more often than every 5 s by default: --grpc-keepalive-min-time.)
// - A circuit breaker per host that stays open for 5 s after three failed
//   calls. During an etcd outage the election's own retries trip it, and a
//   member then cannot renew or rejoin for 5 s after etcd is back: longer
//   than a short TTL. The breaker here half-opens after 250 ms; the
//   election's own back-off does the pacing. And it counts a burst of
//   failures as one (burst-breaker.ts): one connection reset fails
//   every call in flight on it at once, so counted one by one it tripped the
//   breaker whenever a partition healed, and a leader cut off for a few
//   seconds could rejoin only once it half-opened, 0.6 s after the heal at
//   best. Counted by bursts, it rejoins 0.1 to 0.25 s after it.
//
// A fourth, like channelz, only costs time and memory: a gRPC channel for
// each etcd service a client calls. The services of a client made with these
// options share one (shared-channel.ts).
//
// The breaker comes from cockatiel, which etcd3 depends on, and the channel
// from grpc-js, which it also depends on. Both are loaded from where etcd3
// itself is installed, so that this package depends on none of them.
import { createRequire } from "node:module";
import type { IOptions } from "etcd3";
import { log } from "../../../util/log";
import { ConsecutiveBurstsBreaker } from "./burst-breaker";
import { sharedChannelFactory, type ChannelFactory, type GrpcChannelClass } from "./shared-channel";

/** etcd3's options, every one optional here: `hosts` defaults as etcd3's own does. */
export type Etcd3Options = Partial<IOptions>;

/** gRPC channel settings: a ping every 6 s, a dead connection dropped 3 s after an unanswered one. */
export const KEEPALIVE_CHANNEL_OPTIONS = {
  "grpc.keepalive_time_ms": 6_000,
  "grpc.keepalive_timeout_ms": 3_000,
  // Ping an idle connection too: a follower's only traffic may be a watch that has nothing to say.
  "grpc.keepalive_permit_without_calls": 1,
  // No channelz: its registry and the trace events it keeps for each of the
  // three channels an etcd3 client opens took 5 of the 73 KiB of heap an idle
  // member with a client of its own held, for a debugging service nothing
  // here serves.
  "grpc.enable_channelz": 0,
  // grpc-js keeps each call's unsent messages, up to this many bytes, for a
  // retry, and copies what is left of them each time one is sent: a burst of
  // writes on a stream costs the square of their number. Ten thousand
  // followers re-arming their watches when a session closed spent 1.2 s of
  // CPU there, at the default 1 MiB. Past the limit a write waits for the
  // one before it to be sent. A unary request (at most a few KiB here) still
  // fits, and keeps grpc-js's transparent retry.
  "grpc.per_rpc_retry_buffer_size": 16 * 1024,
} as const;

/** How long the breaker of a host stays open after it trips (see the top of this file). */
const HALF_OPEN_AFTER_MS = 250;
/** Consecutive bursts of failures that trip it (etcd3's own default count, of failures). */
const BURSTS_TO_OPEN = 3;

/**
 * Options for `new Etcd3(...)` with gRPC keepalive, a short circuit breaker
 * and one gRPC channel for the client's services. `overrides` win; its
 * `grpcOptions` and `faultHandling` are merged into the defaults, entry by
 * entry.
 */
export function etcd3Options(overrides: Etcd3Options = {}): IOptions {
  const { grpcOptions, faultHandling, ...rest } = overrides;
  const { cockatiel, isRecoverableError, Channel } = loadFromEtcd3();
  const channels: { channelFactoryOverride?: ChannelFactory } = Channel ? { channelFactoryOverride: sharedChannelFactory(Channel) } : {};
  return {
    hosts: "127.0.0.1:2379",
    ...rest,
    grpcOptions: { ...KEEPALIVE_CHANNEL_OPTIONS, ...channels, ...grpcOptions },
    faultHandling: { host: shortCircuitBreaker(cockatiel, isRecoverableError), ...faultHandling },
  };
}

interface Cockatiel {
  circuitBreaker(policy: unknown, options: { halfOpenAfter: number; breaker: unknown }): unknown;
  handleWhen(predicate: (err: Error) => boolean): unknown;
}

/** A factory of per-host breakers, as etcd3's `faultHandling.host` takes it. */
function shortCircuitBreaker(
  cockatiel: Cockatiel,
  isRecoverableError: (err: Error) => boolean,
): NonNullable<IOptions["faultHandling"]>["host"] {
  return (() =>
    cockatiel.circuitBreaker(cockatiel.handleWhen(isRecoverableError), {
      halfOpenAfter: HALF_OPEN_AFTER_MS,
      breaker: new ConsecutiveBurstsBreaker(BURSTS_TO_OPEN),
    })) as NonNullable<IOptions["faultHandling"]>["host"];
}

function loadFromEtcd3(): {
  cockatiel: Cockatiel;
  isRecoverableError: (err: Error) => boolean;
  Channel: GrpcChannelClass | undefined;
} {
  let etcd3Entry: string;
  try {
    etcd3Entry = require.resolve("etcd3");
  } catch (err) {
    throw new Error("etcdLeader.etcd3Options() needs the etcd3 package: npm install etcd3", { cause: err });
  }
  const fromEtcd3 = createRequire(etcd3Entry);
  let cockatiel: Cockatiel;
  try {
    cockatiel = fromEtcd3("cockatiel") as Cockatiel;
  } catch (err) {
    throw new Error(
      `etcdLeader.etcd3Options() could not load cockatiel, the circuit-breaker library etcd3 depends on, ` +
        `from where etcd3 is installed (${etcd3Entry}): reinstall etcd3, or build the options yourself ` +
        `(docs/etcd-clients.md, "Configuring the etcd3 client")`,
      { cause: err },
    );
  }
  const { isRecoverableError } = fromEtcd3(etcd3Entry) as { isRecoverableError: (err: Error) => boolean };
  return { cockatiel, isRecoverableError, Channel: grpcChannelClass(fromEtcd3) };
}

/** grpc-js's Channel, as etcd3 loads it; without it, etcd3's own channels, one per service. */
function grpcChannelClass(fromEtcd3: NodeJS.Require): GrpcChannelClass | undefined {
  try {
    const { Channel } = fromEtcd3("@grpc/grpc-js") as { Channel?: GrpcChannelClass };
    if (typeof Channel === "function") return Channel;
    log.v3("grpc-js has no Channel class: each etcd3 service keeps a channel of its own");
  } catch (err) {
    log.v3("could not load grpc-js from where etcd3 is installed (%s): each service keeps a channel of its own", (err as Error).message);
  }
  return undefined;
}
