// A member of a NATS KV election written on the raw bucket the way the Go
// nats-kv-leader-elect works (/work/shared/STORES.md), for tests of mixed
// elections:
// - no watch: it learns of nothing between its ticks;
// - one ticker, every 0.75 × TTL, as Go's time.Ticker (a tick that falls
//   while the previous one runs waits for it, and later ones are dropped);
// - a candidate's tick is create(key, name), its errors swallowed;
// - a leader's tick is update(key, name, its last revision); a failure
//   (wrong revision, or no answer within the update timeout, 5 s as nats.go's)
//   is a loss, noticed at that tick, and the next campaign waits a full tick;
// - after winning a create it says it leads (isLeader() true) only after its
//   next successful update plus 200 ms;
// - the value is its name, and it never deletes the key, not even on stop.
import type { KV } from "@nats-io/kv";

/** nats.go's default JetStream request timeout, which the Go library's updates run under. */
export const GO_UPDATE_TIMEOUT_MS = 5_000;
/** The pause after the first update following a win before the Go member says it leads. */
const ANNOUNCE_AFTER_UPDATE_MS = 200;

type GoState = "candidate" | "won" | "leader";

export interface GoMemberEvent {
  type: "won" | "announced" | "lost";
  /** performance.now() */
  at: number;
  revision?: number;
}

export class GoStyleMember {
  readonly events: GoMemberEvent[] = [];
  private state: GoState = "candidate";
  private lastRevision = 0;
  /** When (performance.now()) the answer to its latest successful write came: the write was applied before. */
  lastWriteAnsweredAt = -Infinity;
  private ticker: NodeJS.Timeout | undefined;
  private announceTimer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;
  /** A tick fell while the previous one ran: Go's ticker channel holds one. */
  private tickPending = false;
  private stopped = false;

  constructor(
    private readonly kv: KV,
    private readonly key: string,
    readonly name: string,
    /** The bucket's TTL in ms; the member ticks every 0.75 of it. */
    private readonly ttlMs: number,
    private readonly updateTimeoutMs = GO_UPDATE_TIMEOUT_MS,
  ) {}

  /** The campaign interval: 0.75 × TTL. */
  get interval(): number {
    return 0.75 * this.ttlMs;
  }

  /** As IsLeader(): true once it announced, until a failed update. */
  isLeader(): boolean {
    return this.state === "leader";
  }

  /** Starts ticking; the first tick at once (the library's WithoutSplay). */
  start(): this {
    this.stopped = false;
    this.ticker = setInterval(() => this.onTick(), this.interval);
    this.onTick();
    return this;
  }

  /**
   * One tick now, for a test that drives the member by hand (without
   * start()): a create, or an update if it holds the key. Resolves with
   * whether it holds the key afterwards.
   */
  async tick(): Promise<boolean> {
    await this.campaign();
    return this.state !== "candidate";
  }

  /**
   * Stops ticking, as a stop or a crash does: the key stays until it ages
   * out, and the member forgets it. Resolves once a tick in progress is over.
   */
  async stop(): Promise<void> {
    this.stopped = true;
    clearInterval(this.ticker);
    await this.running;
    clearTimeout(this.announceTimer);
    this.state = "candidate";
    this.lastRevision = 0;
  }

  private onTick(): void {
    if (this.stopped) return;
    if (this.running) {
      this.tickPending = true;
      return;
    }
    this.running = this.campaign().finally(() => {
      this.running = undefined;
      if (this.tickPending && !this.stopped) {
        this.tickPending = false;
        this.onTick();
      }
    });
  }

  private async campaign(): Promise<void> {
    if (this.state === "candidate") {
      try {
        this.lastRevision = await this.kv.create(this.key, this.name);
        this.lastWriteAnsweredAt = performance.now();
      } catch {
        return;
      }
      this.state = "won";
      this.record("won", this.lastRevision);
      return;
    }
    try {
      this.lastRevision = await this.withTimeout(this.kv.update(this.key, this.name, this.lastRevision));
      this.lastWriteAnsweredAt = performance.now();
    } catch {
      clearTimeout(this.announceTimer);
      this.state = "candidate";
      this.lastRevision = 0;
      this.record("lost");
      return;
    }
    if (this.state === "won") {
      this.announceTimer = setTimeout(() => {
        if (this.state !== "won") return;
        this.state = "leader";
        this.record("announced", this.lastRevision);
      }, ANNOUNCE_AFTER_UPDATE_MS);
    }
  }

  private withTimeout<T>(request: Promise<T>): Promise<T> {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`no answer within ${this.updateTimeoutMs} ms`)), this.updateTimeoutMs);
    });
    return Promise.race([request, timeout]).finally(() => clearTimeout(timer));
  }

  private record(type: GoMemberEvent["type"], revision?: number): void {
    this.events.push({ type, at: performance.now(), ...(revision === undefined ? {} : { revision }) });
  }
}
