// What to configure when an etcd3 client misbehaves in a way its settings
// explain. Two patterns have one cause each, and a fix the user must make on
// the client (the library never builds one):
//
// - Request after request times out: most likely a connection that went
//   silent without a FIN or an RST, which etcd3 keeps using until the kernel
//   gives up on it (about 15 minutes) unless gRPC keepalive is on.
// - etcd3's default circuit breaker is open: it refuses every call to the
//   host for 5 s after three failures, longer than a short TTL.
//
// Each is said once per client (all elections on a client share it), added
// to the error the member reports anyway: the advice should be seen, not
// repeated on every retry.
import { RequestTimeoutError } from "../../../contract/errors";

/** Timeouts in a row on one client before the advice is given. */
export const TIMEOUTS_BEFORE_ADVICE = 3;

const ADVICE_SECTION = 'see "Configuring the etcd3 client" in etcd-leader\'s docs/etcd-clients.md';

export const KEEPALIVE_ADVICE =
  "etcd3 requests keep timing out on this client: a connection that died without a FIN or RST " +
  "(a NAT gateway or firewall dropping an idle flow) is used until the kernel's TCP timeout, about 15 minutes, " +
  "unless gRPC keepalive is on. Create the client with new Etcd3(etcdLeader.etcd3Options({ hosts })); " +
  ADVICE_SECTION;

export const BREAKER_ADVICE =
  "etcd3's default circuit breaker is open: it refuses every call to this host for 5 s after three failures, " +
  "longer than a short TTL. Create the client with new Etcd3(etcdLeader.etcd3Options({ hosts })), " +
  "whose breaker half-opens after 250 ms; " +
  ADVICE_SECTION;

interface ClientAdvice {
  consecutiveTimeouts: number;
  keepaliveAdvised: boolean;
  breakerAdvised: boolean;
}

/** Per connection pool, which every namespace of one Etcd3 client shares. */
const byClient = new WeakMap<object, ClientAdvice>();

/** Watches the outcome of one client's calls and adds advice to an error when it is due. */
export class Etcd3Advisor {
  private readonly state: ClientAdvice;
  private readonly hasKeepalive: boolean;
  private readonly hasDefaultBreaker: boolean;

  constructor(client: object) {
    const { pool, options } = client as { pool?: unknown; options?: EtcdClientOptions };
    const owner = typeof pool === "object" && pool !== null ? pool : client;
    let state = byClient.get(owner);
    if (!state) byClient.set(owner, (state = { consecutiveTimeouts: 0, keepaliveAdvised: false, breakerAdvised: false }));
    this.state = state;
    // A client whose options cannot be read (another implementation of the same
    // calls) is advised anyway: once is cheap.
    this.hasKeepalive = options?.grpcOptions?.["grpc.keepalive_time_ms"] !== undefined;
    this.hasDefaultBreaker = options?.faultHandling?.host === undefined;
  }

  /**
   * `pending`, with its failure reviewed; a success ends a run of timeouts.
   * `answer` makes what it resolves with of the client's answer, in the same
   * step.
   */
  follow<T, U = T>(pending: Promise<T>, answer?: (value: T) => U): Promise<U> {
    return pending.then(
      (value) => {
        this.succeeded();
        return answer ? answer(value) : (value as unknown as U);
      },
      (err: unknown) => {
        throw this.review(err);
      },
    );
  }

  /** A call on the client was answered: a run of timeouts is over. */
  succeeded(): void {
    this.state.consecutiveTimeouts = 0;
  }

  /** The error to report for `err`: the same one, or, once per client, one that says what to configure. */
  review(err: unknown): unknown {
    if (err instanceof RequestTimeoutError) {
      this.state.consecutiveTimeouts++;
      if (!this.hasKeepalive && !this.state.keepaliveAdvised && this.state.consecutiveTimeouts >= TIMEOUTS_BEFORE_ADVICE) {
        this.state.keepaliveAdvised = true;
        return advised(err, KEEPALIVE_ADVICE);
      }
      return err;
    }
    if (isBrokenCircuit(err) && this.hasDefaultBreaker && !this.state.breakerAdvised) {
      this.state.breakerAdvised = true;
      return advised(err, BREAKER_ADVICE);
    }
    return err;
  }
}

interface EtcdClientOptions {
  grpcOptions?: Record<string, unknown>;
  faultHandling?: { host?: unknown };
}

/** cockatiel's BrokenCircuitError, recognised by its flag: the class is not ours to import. */
function isBrokenCircuit(err: unknown): err is Error {
  return typeof err === "object" && err !== null && (err as { isBrokenCircuitError?: unknown }).isBrokenCircuitError === true;
}

/**
 * The error itself, its message followed by the advice. Each error here is
 * made for the one failed call, so nothing else holds it, and its class stays
 * what callers check (`RequestTimeoutError`, cockatiel's BrokenCircuitError).
 */
function advised(err: Error, advice: string): Error {
  err.message = `${err.message}. ${advice}`;
  return err;
}
