// One LISTEN connection per adapter, shared by every election it listens
// for: a notification reaches only the connection that LISTENs, so it needs
// one of its own, kept for as long as anything listens.
//
// On a pg.Pool it is a client checked out with pool.connect(), handed back
// (after UNLISTEN *) once nothing listens, and closed if it failed. On a
// pg.Client it is the client itself, whose queries wait behind one another
// anyway. A connection that ends or fails ends every listening on it (each
// is told, and the state machine retries, which listens anew on a fresh
// connection); notifications sent meanwhile are lost, which the recipe
// survives: its followers also try at each lease's expiry.
//
// A connection that dies silently (a firewall that forgot it) is noticed
// only by TCP: give the pool `keepAlive: true` (docs/postgres.md). pg sets
// no timeout on a connect or a query, and TCP gives up on one whose packets
// are lost only minutes later: so a connection that a listener gave up
// waiting on (its connect, or its LISTEN, unanswered) is not waited on
// again: a connect is left to the next listen to ask anew, and a session
// whose LISTEN went unanswered is ended as a lost connection.
import { untilAborted } from "../../../util/abort";
import type { LeaseListener, LeaseListening } from "../port";
import { isPool, type PgConnection, type PgNotification, type PostgresClient } from "./client";

/** Turns a notification's payload into what a listener of `key` is told; undefined for one that is not about it. */
export type PayloadReader = (payload: string | undefined, key: string, listener: LeaseListener) => void;

interface Subscriber {
  readonly key: string;
  readonly listener: LeaseListener;
}

/** One connection that LISTENs, and who listens on which channel. */
class Session {
  readonly channels = new Map<string, Set<Subscriber>>();
  /** The LISTEN of each channel, once sent: a second listener of the channel waits for the same. */
  readonly listens = new Map<string, Promise<unknown>>();
  ended: Error | undefined;
  /** A probe (SharedListener.probe) is out. */
  probing = false;
  /** Ends the session as a lost connection: every listener is told. */
  fail: (error: Error) => void = () => undefined;

  constructor(
    readonly connection: PgConnection,
    /** Hands a pool's client back (or closes it, given an error); nothing for the user's own client. */
    readonly giveBack: (error?: Error) => void,
  ) {}
}

export class SharedListener {
  private session: Promise<Session> | undefined;
  /** The session `session` resolved with, once it did. */
  private current: Session | undefined;
  /** Counts the sessions asked for: one given up on while it opened never becomes `current`. */
  private opening = 0;

  constructor(
    private readonly client: PostgresClient,
    private readonly readPayload: PayloadReader,
    /** How long a probe of the connection may go unanswered (probe()); undefined: no probes. */
    private readonly probeTimeoutMs?: number,
  ) {}

  /** Listens on `channel` for notices about `key`; resolves once the LISTEN is in place. */
  async listen(channel: string, key: string, listener: LeaseListener, signal?: AbortSignal): Promise<LeaseListening> {
    const sessionAsked = this.session ?? (this.session = this.open());
    const session = await (signal ? untilAborted("listen", sessionAsked, signal) : sessionAsked).catch((err: unknown) => {
      if (this.session === sessionAsked) {
        this.session = undefined;
        this.opening++;
        // Given up while connecting: a connection that opens after all is of no use to anyone.
        if (signal?.aborted) sessionAsked.then((late) => late.fail(new Error("the LISTEN connection opened after its listener gave up")), () => undefined);
      }
      throw err;
    });
    if (session.ended) throw session.ended;
    const subscriber: Subscriber = { key, listener };
    let subscribers = session.channels.get(channel);
    if (!subscribers) session.channels.set(channel, (subscribers = new Set()));
    subscribers.add(subscriber);
    let listening = session.listens.get(channel);
    if (!listening) {
      listening = session.connection.query(`LISTEN ${quoteChannel(channel)}`);
      session.listens.set(channel, listening);
    }
    try {
      await (signal ? untilAborted("listen", listening, signal) : listening);
    } catch (err) {
      // Unanswered until the listener gave up: the connection is as good as lost, for everyone on it.
      if (signal?.aborted && !session.ended) session.fail(new Error("the LISTEN connection did not answer a LISTEN in time"));
      // The connection is probably gone: its end is reported to the others too.
      this.remove(session, channel, subscriber);
      if (session.listens.get(channel) === listening) session.listens.delete(channel);
      throw err;
    }
    let stopped = false;
    return {
      stop: () => {
        if (stopped) return;
        stopped = true;
        this.remove(session, channel, subscriber);
      },
      probe: () => {
        if (!stopped) this.probe(session);
      },
    };
  }

  /**
   * A statement on the LISTEN connection, bounded by probeTimeoutMs: one
   * left unanswered ends the session as a lost connection, so that its
   * listeners listen again on a fresh one. One probe at a time per session.
   */
  private probe(session: Session): void {
    const timeoutMs = this.probeTimeoutMs;
    if (timeoutMs === undefined || session.ended || session.probing) return;
    session.probing = true;
    session.connection.query({ text: "SELECT 1", query_timeout: timeoutMs }).then(
      () => {
        session.probing = false;
      },
      (err: unknown) => {
        session.probing = false;
        if (!session.ended) session.fail(new Error(`the LISTEN connection did not answer within ${timeoutMs} ms: ${(err as Error).message}`));
      },
    );
  }

  private remove(session: Session, channel: string, subscriber: Subscriber): void {
    const subscribers = session.channels.get(channel);
    if (!subscribers?.delete(subscriber) || subscribers.size > 0) return;
    session.channels.delete(channel);
    session.listens.delete(channel);
    if (session.ended) return;
    if (session.channels.size === 0 && isPool(this.client)) {
      // Nothing listens any more: the pool gets its client back, listening to nothing.
      this.forget(session);
      this.close(session);
      return;
    }
    session.connection.query(`UNLISTEN ${quoteChannel(channel)}`).catch(() => undefined);
  }

  /** The next listen() opens a session of its own. */
  private forget(session: Session): void {
    if (this.current !== session) return;
    this.current = undefined;
    this.session = undefined;
  }

  private close(session: Session): void {
    session.ended = new Error("the LISTEN connection was handed back");
    session.connection.query("UNLISTEN *").then(
      () => session.giveBack(),
      (err: unknown) => session.giveBack(err instanceof Error ? err : new Error(String(err))),
    );
  }

  private async open(): Promise<Session> {
    const client = this.client;
    const asked = ++this.opening;
    const connection = isPool(client) ? await client.connect() : client;
    let givenBack = false;
    const session = new Session(connection, (error) => {
      if (givenBack) return;
      givenBack = true;
      connection.removeListener("notification", onNotification);
      connection.removeListener("error", onError);
      connection.removeListener("end", onEnd);
      if ("release" in connection && typeof connection.release === "function") connection.release(error);
    });
    const onNotification = (message: PgNotification) => {
      const subscribers = session.channels.get(message.channel);
      if (!subscribers) return;
      for (const { key, listener } of [...subscribers]) this.readPayload(message.payload, key, listener);
    };
    const end = (error: Error) => {
      if (session.ended) return;
      session.ended = error;
      this.forget(session);
      const subscribers = [...session.channels.values()].flatMap((set) => [...set]);
      session.channels.clear();
      session.listens.clear();
      session.giveBack(error);
      for (const { listener } of subscribers) listener.onEnd(error);
    };
    // Without a listener of its own, an error on a checked-out client is an uncaught exception.
    const onError = (err: Error) => end(new Error(`the LISTEN connection failed: ${err.message}`, { cause: err }));
    const onEnd = () => end(new Error("the LISTEN connection ended"));
    connection.on("notification", onNotification);
    connection.on("error", onError);
    connection.on("end", onEnd);
    session.fail = end;
    if (this.opening === asked) this.current = session;
    return session;
  }
}

/** A channel name as LISTEN takes it: quoted (the name is ours, hex and underscores, but quoted all the same). */
function quoteChannel(channel: string): string {
  return `"${channel.replace(/"/g, '""')}"`;
}
