// A connection that goes silent (a NAT gateway or a firewall that forgot the
// flow, a peer that vanished without a FIN) answers nothing and reports
// nothing: ioredis waits on it for as long as TCP does, which on Linux is
// minutes past the last keepalive probe. Every election on the client would
// wait with it, and a member that stepped down would never come back.
//
// So the adapter watches its own requests: one still unanswered after
// `silentAfterMs` makes it ask the client a PING; a PING unanswered as long
// again means that nothing comes back on that connection, and the client is
// told to drop it and connect again (ioredis's `disconnect(true)`). A server
// that is only slow answers the PING behind the request, in order, and is
// left alone. One check at a time, per client.
//
// What ioredis does with commands that were on the dropped connection (it
// sends them again once reconnected) is safe here: their member counted
// them from before they were first sent, and a win that arrives after the
// member stopped waiting is given back (adapter.ts).
import { log } from "../../../util/log";

/** The part of an ioredis client a silence check uses; a client without it is not checked. */
export interface PingableClient {
  ping?(): Promise<unknown>;
  disconnect?(reconnect?: boolean): void;
}

export class SilenceWatch {
  /** A check under way: its PING is out. */
  private checking = false;

  constructor(
    private readonly client: PingableClient,
    /** How long a request, and then a PING, may go unanswered before the connection counts as silent. */
    private readonly silentAfterMs: number,
    /** What the checks are named in the log. */
    private readonly what: string,
  ) {}

  /** Watches `request`: if it is still unanswered after silentAfterMs, the connection is checked. */
  watch<T>(request: Promise<T>): Promise<T> {
    if (typeof this.client.ping !== "function" || typeof this.client.disconnect !== "function") return request;
    const timer = setTimeout(() => this.check(), this.silentAfterMs);
    // The check must not hold a process open that has nothing else to do.
    timer.unref?.();
    const clear = () => clearTimeout(timer);
    request.then(clear, clear);
    return request;
  }

  /** PINGs the client; unanswered within silentAfterMs, its connection is dropped and made again. */
  private check(): void {
    if (this.checking) return;
    this.checking = true;
    let answered = false;
    const timer = setTimeout(() => {
      this.checking = false;
      if (answered) return;
      log.redis("%s: a request and a PING went unanswered for %d ms each: the connection is silent; connecting again", this.what, this.silentAfterMs);
      this.client.disconnect!(true);
    }, this.silentAfterMs);
    timer.unref?.();
    const done = () => {
      answered = true;
      this.checking = false;
      clearTimeout(timer);
    };
    // A PING that fails (the connection closed meanwhile) needs no more help: ioredis reconnects by itself.
    this.client.ping!().then(done, done);
  }
}
