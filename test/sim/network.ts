// The network between the members and the store: each member's process has
// one link to the store, which carries its requests, their answers, and what
// the store pushes to it (watch events), each after a delay drawn from a
// distribution with a long tail. Faults act on a link:
//
// - `lose`: a request is lost before the store sees it, or an answer after the
//   store applied the request (the member never learns which);
// - `cut`: nothing gets through, one way or both, without a word (a silent
//   partition, a connection that died without a FIN); what is sent meanwhile,
//   either way, is held, as TCP holds and sends it again, and arrives once
//   the cut heals, unless the connection was found dead first;
// - `congest`: every message takes longer, either way, for a while (a link
//   near its capacity, a stalled proxy);
// - `reset`: the connection breaks (an RST, a restarted store): requests in
//   flight and streams fail at once, and new requests fail until it is back.
//
// What a lost or cut request becomes depends on the client's transport:
// - "multiplexed" (gRPC for etcd3, a NATS connection): every call and stream
//   rides one connection, and TCP loses nothing on a connection that lives.
//   So a lost request or answer is the connection dying under it: nothing
//   more gets through it, either way, until the client's keepalive finds it
//   dead (KEEPALIVE_MS), and every call in flight and every stream on it
//   fails then; a cut that outlives the
//   keepalive does the same, and while it lasts, a new call fails after the
//   client's connect timeout.
// - "requests" (HTTP/1.1 for node-etcd): each request on a socket of its own;
//   a lost request or answer, or one cut off, hangs in silence until its
//   caller gives up on it.
//
// Messages on one link arrive in the order they were sent, as on a TCP
// connection. A member whose process is paused receives nothing until it
// resumes (its process holds the deliveries).
import type { SimProcess, Scheduler, Random } from "./world";

/** A connection error, as a client reports a refused, reset or dead connection. */
export class ConnectionError extends Error {
  override readonly name = "ConnectionError";
}

export interface LatencyModel {
  /** One-way delay of one message, in ms. */
  draw(random: Random): number;
}

/** Mostly around `typicalMs`, with a tail: one message in `tailEvery` takes up to `tailMs`. */
export function longTail(typicalMs: number, tailMs: number, tailEvery: number): LatencyModel {
  return {
    draw: (random) => {
      const base = typicalMs * (0.5 + random.next());
      return random.chance(1 / tailEvery) ? base + random.next() * tailMs : base;
    },
  };
}

export type CutDirection = "to-store" | "from-store" | "both";

export type Transport = "multiplexed" | "requests";

/** How long a dead connection takes to be found so (gRPC keepalive, a NATS ping). */
export const KEEPALIVE_MS = 3_000;
/** How long a new connection attempt takes to fail while the store cannot be reached. */
export const CONNECT_TIMEOUT_MS = 1_000;

export class Link {
  private cutToStore = false;
  private cutFromStore = false;
  /** The connection was found dead during the current cut: new calls fail to connect until it heals. */
  private deadInCut = false;
  private down = false;
  /** Answers and pushes held by a cut toward the member, in order, with when the store sent each. */
  private heldIn: Array<{ deliver: () => void; sentAt: number }> = [];
  /** Requests held by a cut toward the store, in order. */
  private heldOut: Array<{ arrive: () => void; sentAt: number }> = [];
  private lastArrival = 0;
  private lastOutArrival = 0;
  private lossToStore = 0;
  private lossFromStore = 0;
  /** Added to every message's delay, each way, while the link is congested. */
  private congestion = { toStore: 0, fromStore: 0 };
  private readonly brokenListeners = new Set<(error: Error) => void>();
  /** Calls in flight on a multiplexed connection, which fail with it. */
  private readonly inFlight = new Set<(error: Error) => void>();
  private keepaliveTimer: ReturnType<Scheduler["at"]> | undefined;
  /** Which connection this is: a break starts a new one, and what travelled on the old one is gone. */
  private connection = 0;
  /** When a connection that lost a message is found dead. */
  private lostConnection: ReturnType<Scheduler["at"]> | undefined;
  /** The longest a message took to reach the member so far (its delay, and what a cut or a pause held it). */
  longestDelivery = 0;
  /** The longest a request took to reach the store so far (its delay, and what a cut held it). */
  longestRequest = 0;

  constructor(
    readonly process: SimProcess,
    private readonly scheduler: Scheduler,
    private readonly random: Random,
    private readonly latency: LatencyModel,
    readonly transport: Transport,
  ) {}

  /**
   * A request: `apply` runs at the store when the request arrives (unless it
   * is lost or cut off) and its result travels back; the promise settles on
   * the member's side, as the transport has it (above), or when `signal`
   * aborts it.
   */
  request<T>(apply: () => T, signal?: AbortSignal): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      let settled = false;
      const settle = (outcome: () => void) => {
        if (settled) return;
        settled = true;
        signal?.removeEventListener("abort", onAbort);
        this.inFlight.delete(failWithConnection);
        outcome();
      };
      const onAbort = () => settle(() => reject(signal!.reason));
      const failWithConnection = (error: Error) => this.process.run(() => settle(() => reject(error)));
      if (signal?.aborted) return onAbort();
      signal?.addEventListener("abort", onAbort, { once: true });
      // Refused by the member's own network stack: no message of the connection, so no cut or break holds it up.
      if (this.down) {
        this.scheduler.at(this.scheduler.now + this.latency.draw(this.random), () => failWithConnection(new ConnectionError("connection refused")));
        return;
      }
      const multiplexed = this.transport === "multiplexed";
      if (multiplexed && this.deadInCut) {
        this.scheduler.at(this.scheduler.now + CONNECT_TIMEOUT_MS, () => failWithConnection(new ConnectionError("cannot connect")));
        return;
      }
      this.inFlight.add(failWithConnection);
      const lost = () => {
        // On one connection, a message lost is the connection dead: its keepalive finds out, heal or not.
        if (multiplexed) this.lostConnection ??= this.scheduler.at(this.scheduler.now + KEEPALIVE_MS, () => {
          this.lostConnection = undefined;
          this.break(new ConnectionError("keepalive timed out"));
        });
        // What was in flight, or is sent, on it meanwhile goes nowhere.
      };
      if (this.random.chance(this.lossToStore)) return lost();
      this.toStore(() => {
        // The reset that took the store down failed this call already.
        if (this.down) return;
        let result: { value: T } | { error: unknown };
        try {
          result = { value: apply() };
        } catch (error) {
          result = { error };
        }
        if (this.random.chance(this.lossFromStore)) return lost();
        this.toMember(() => settle(() => ("value" in result ? resolve(result.value) : reject(result.error))));
      });
    });
  }

  /** What the store pushes to the member (a watch event): delivered in order, held by a cut, dropped by a reset. */
  push(deliver: () => void): void {
    if (this.down) return;
    this.toMember(deliver);
  }

  /** Called when the connection breaks (a reset, or a dead connection found so): its streams fail. */
  onBroken(listener: (error: Error) => void): () => void {
    this.brokenListeners.add(listener);
    return () => this.brokenListeners.delete(listener);
  }

  cut(direction: CutDirection): void {
    if (direction !== "from-store") this.cutToStore = true;
    if (direction !== "to-store") this.cutFromStore = true;
    this.dying();
  }

  heal(): void {
    this.cutToStore = false;
    this.cutFromStore = false;
    this.deadInCut = false;
    this.scheduler.cancel(this.keepaliveTimer);
    this.keepaliveTimer = undefined;
    const out = this.heldOut;
    this.heldOut = [];
    for (const { arrive, sentAt } of out) this.toStore(arrive, sentAt);
    const held = this.heldIn;
    this.heldIn = [];
    for (const { deliver, sentAt } of held) this.toMember(deliver, sentAt);
  }

  /** The connection breaks now: what is held is lost, calls and streams fail; it stays down until `restore()`. */
  reset(): void {
    this.break(new ConnectionError("connection reset"), true);
    this.down = true;
  }

  restore(): void {
    this.down = false;
  }

  /** Congestion from now on: every message takes about `ms` more, the way it goes (0: none). */
  setCongestion(ms: number, direction: CutDirection = "both"): void {
    this.congestion = { toStore: direction === "from-store" ? 0 : ms, fromStore: direction === "to-store" ? 0 : ms };
  }

  /** One message's delay on this link now, going `way`. */
  private delay(way: "toStore" | "fromStore"): number {
    const extra = this.congestion[way];
    return this.latency.draw(this.random) + (extra > 0 ? extra * (0.5 + this.random.next()) : 0);
  }

  /** Losses from now on: the chance of losing a request before the store, and an answer after it. */
  setLoss(toStore: number, fromStore: number): void {
    this.lossToStore = toStore;
    this.lossFromStore = fromStore;
  }

  /** The connection no longer carries anything: its keepalive finds it dead after KEEPALIVE_MS, unless a heal comes first. */
  private dying(): void {
    if (this.keepaliveTimer) return;
    this.keepaliveTimer = this.scheduler.at(this.scheduler.now + KEEPALIVE_MS, () => {
      this.keepaliveTimer = undefined;
      if (this.cutToStore || this.cutFromStore) this.deadInCut = true;
      this.break(new ConnectionError("keepalive timed out"));
    });
  }

  /**
   * The connection is gone: what it held and carried is lost, its streams
   * fail, and with `failCalls` its calls in flight too (a reset; and found
   * dead, on one multiplexed connection: a socket per request that went
   * silent fails nothing, each request hangs until its caller gives up).
   */
  private break(error: Error, failCalls = this.transport === "multiplexed"): void {
    this.connection++;
    this.heldIn = [];
    this.heldOut = [];
    this.scheduler.cancel(this.keepaliveTimer);
    this.keepaliveTimer = undefined;
    this.scheduler.cancel(this.lostConnection);
    this.lostConnection = undefined;
    if (failCalls) {
      for (const fail of [...this.inFlight]) fail(error);
      this.inFlight.clear();
    }
    for (const listener of [...this.brokenListeners]) this.process.run(() => listener(error));
  }

  /** Carries a request to the store after a delay, held while cut, dropped while the connection is dead. */
  private toStore(arrive: () => void, sentAt = this.scheduler.now): void {
    if (this.lostConnection) return;
    if (this.cutToStore) {
      this.heldOut.push({ arrive, sentAt });
      return;
    }
    // In order, as on one connection.
    const arrival = Math.max(this.lastOutArrival, this.scheduler.now + this.delay("toStore"));
    this.lastOutArrival = arrival;
    const connection = this.connection;
    this.scheduler.at(arrival, () => {
      // The connection died, or broke, while it travelled.
      if (this.lostConnection || this.connection !== connection) return;
      this.longestRequest = Math.max(this.longestRequest, this.scheduler.now - sentAt);
      arrive();
    });
  }

  /** Delivers to the member after a delay, in order, held while cut; the member's process runs it. */
  private toMember(deliver: () => void, sentAt = this.scheduler.now): void {
    if (this.lostConnection) return;
    if (this.cutFromStore) {
      this.heldIn.push({ deliver, sentAt });
      return;
    }
    const arrival = Math.max(this.lastArrival, this.scheduler.now + this.delay("fromStore"));
    this.lastArrival = arrival;
    const connection = this.connection;
    this.scheduler.at(arrival, () => {
      if (this.lostConnection || this.connection !== connection) return; // the connection died, or broke, while it travelled
      this.process.run(() => {
        // Counted when it runs: a pause of the member holds it too.
        this.longestDelivery = Math.max(this.longestDelivery, this.scheduler.now - sentAt);
        deliver();
      });
    });
  }
}
