// Watches on one Watch stream per etcd3 client, shared by every election
// that uses the client, with their creations pipelined.
//
// etcd3's own watch manager creates one watch at a time: it writes a create
// request and waits for etcd's answer before it writes the next. Each watch
// waits a round trip behind every one queued before it, and the queue is
// copied at each addition and searched from the front at each answer. A
// process running ten thousand elections on one session (twenty thousand
// watches) got them created at about 330 a second, and each event answer
// cost a search of every watcher. Until a member's watch of its own key is
// created it reads that key at each renewal (recipe.ts), so such a process
// was never idle.
//
// Here every create request is written at once. etcd serves the requests of
// one stream in the order they were written, and answers each create before
// any event of that watch (events that come first are held back until the
// watch's ID is announced: etcd's sendLoop, server/etcdserver/api/v3rpc/
// watch.go), so the answers to creates come back in the order of the
// requests: each goes to the oldest create still waiting. Once created, a
// watch is found by its ID in a map.
//
// A watch cancelled before etcd answered its create is cancelled at etcd
// when the answer comes (its ID is known only then). etcd answers a cancel
// with a cancelled answer for the ID, which nobody holds any more: dropped.
//
// A failure of the stream (etcd restarted, the connection broke, the stream
// ended) fails every watch on it, written or not: none resumes by itself, so
// no event can be skipped (client.ts). The next watch opens another stream,
// after a back-off if the last ones failed. The stream is closed once no
// watch is left on it, so that a process whose elections all stopped exits
// by itself.
import type { FilterType, IDuplexStream, IEvent, IWatchRequest, IWatchResponse } from "etcd3";
import { log } from "../../../util/log";
import type { Etcd3Client } from "./client";
import { closeStream, perPool, StreamOpener } from "./pool-streams";

type Stream = IDuplexStream<IWatchRequest, IWatchResponse>;

/** What one watch asks of etcd, with the namespace's prefix applied. */
export interface RawWatchRequest {
  readonly key: Buffer;
  readonly rangeEnd?: Buffer;
  /** Decimal, as etcd3 sends int64s. */
  readonly startRevision: string;
  readonly deletesOnly: boolean;
}

/** Where one watch's news goes. Nothing is called after `cancelled` or `failed`, or once the watch was cancelled here. */
export interface WatchReceiver {
  /** etcd confirmed the watch: every change from its start revision on will come. */
  created(): void;
  /** The events of one answer, in revision order. */
  events(events: readonly IEvent[]): void;
  /** etcd cancelled the watch: `reason` as etcd gave it (etcd 3.4 gives none after a compaction), and the compaction's revision, "0" if none. */
  cancelled(reason: string, compactRevision: string): void;
  /** The stream the watch was on failed. */
  failed(err: unknown): void;
}

const enum WatchState {
  /** Waiting for the stream to open. */
  Unwritten,
  /** Its create request is written; etcd's answer is awaited. */
  Creating,
  Created,
  /** Cancelled here, failed or cancelled by etcd: nothing more goes to its receiver. */
  Done,
}

/** One watch on the shared stream; `cancel()` ends it. */
export class StreamWatch {
  /** etcd's ID for it, once created. */
  id: string | undefined;
  state = WatchState.Unwritten;

  constructor(
    private readonly stream: SharedWatchStream,
    /** Dropped once written: the watch needs it no more. */
    public request: RawWatchRequest | undefined,
    readonly receiver: WatchReceiver,
  ) {}

  /** Stops the watch; its receiver hears nothing more. Idempotent. */
  cancel(): void {
    this.stream.cancel(this);
  }
}

/** etcd's FilterType.NOPUT: deletions only. */
const NO_PUT = 0 as FilterType;


/**
 * The watch stream shared by every election on `client`, made on first use.
 * Namespaces of one Etcd3 client share its connection pool, and so one
 * stream too (their watches carry their prefix in their keys).
 */
export const watchStreamOf = perPool((client) => new SharedWatchStream(client));

export class SharedWatchStream {
  private stream: Stream | undefined;
  /** Watches whose create request waits for the stream to open, oldest first. */
  private unwritten: StreamWatch[] = [];
  /** Watches whose create request is written and not yet answered, oldest first (from `creatingHead` on). */
  private creating: StreamWatch[] = [];
  private creatingHead = 0;
  /** Created watches by etcd's ID. */
  private readonly byId = new Map<string, StreamWatch>();
  /** Watches not done: the stream stays open while there is one. */
  private live = 0;
  private closeCheckScheduled = false;
  /** IDs of created watches cancelled here in this turn, whose cancels are still to be written (cancelLater). */
  private cancels: string[] = [];
  private readonly opener: StreamOpener<Stream>;

  constructor(client: Etcd3Client) {
    this.opener = new StreamOpener(() => client.watchClient.watch());
  }

  /** Watches not yet cancelled or failed: for tests and diagnostics. */
  get size(): number {
    return this.live;
  }

  /** Starts a watch; its create request goes out at once if the stream is open. */
  watch(request: RawWatchRequest, receiver: WatchReceiver): StreamWatch {
    const watch = new StreamWatch(this, request, receiver);
    this.live++;
    if (this.stream) this.write(this.stream, watch);
    else {
      this.unwritten.push(watch);
      this.open();
    }
    return watch;
  }

  cancel(watch: StreamWatch): void {
    const state = watch.state;
    if (state === WatchState.Done) return;
    this.finish(watch);
    if (state === WatchState.Unwritten) {
      // Skipped when the stream opens.
    } else if (state === WatchState.Created && watch.id !== undefined) {
      this.byId.delete(watch.id);
      if (this.stream) this.cancelLater(watch.id);
    }
    // Creating: cancelled at etcd once its create is answered and its ID known.
  }

  /**
   * Writes the cancel of watch `id` after the work under way in this turn,
   * with every other cancel asked for in it; or, if no watch is left then,
   * closes the stream instead, which ends them all at etcd. A session that
   * closes cancels ten thousand leaders' watches in one turn: one stream
   * closed, not ten thousand requests written and answered (and grpc-js
   * copies a stream's unsent writes at each write it completes).
   */
  private cancelLater(id: string): void {
    this.cancels.push(id);
    this.scheduleCloseCheck();
  }

  private finish(watch: StreamWatch): void {
    watch.state = WatchState.Done;
    watch.request = undefined;
    if (--this.live === 0) this.scheduleCloseCheck();
  }

  private write(stream: Stream, watch: StreamWatch): void {
    const request = watch.request!;
    watch.state = WatchState.Creating;
    watch.request = undefined;
    this.creating.push(watch);
    stream.write({
      create_request: {
        key: request.key,
        range_end: request.rangeEnd,
        start_revision: request.startRevision,
        filters: request.deletesOnly ? [NO_PUT] : undefined,
      },
    });
  }

  private open(): void {
    this.opener.open(
      (stream) => {
        // Every watch was cancelled while it opened.
        if (this.live === 0) {
          this.unwritten = [];
          return closeStream(stream);
        }
        this.attach(stream);
      },
      (err) => this.failAll(err),
    );
  }


  private attach(stream: Stream): void {
    this.stream = stream;
    stream.on("data", (response: IWatchResponse) => {
      if (this.stream === stream) this.answer(response);
    });
    stream.on("error", (err: unknown) => this.streamFailed(stream, err));
    stream.on("end", () => this.streamFailed(stream, new Error("etcd closed the watch stream")));
    const unwritten = this.unwritten;
    this.unwritten = [];
    for (const watch of unwritten) if (watch.state === WatchState.Unwritten) this.write(stream, watch);
  }

  private answer(response: IWatchResponse): void {
    this.opener.answered();
    if (response.created) return this.createAnswered(response);
    const watch = this.byId.get(String(response.watch_id));
    // A watch cancelled here: its last events, and etcd's answer to the cancel.
    if (!watch) return;
    if (response.canceled) {
      this.byId.delete(watch.id!);
      this.finish(watch);
      return watch.receiver.cancelled(response.cancel_reason ?? "", String(response.compact_revision ?? "0"));
    }
    if (response.events?.length) watch.receiver.events(response.events);
  }

  private createAnswered(response: IWatchResponse): void {
    const watch = this.creating[this.creatingHead];
    if (!watch) {
      log.v3("dropped etcd's answer to a watch create nobody sent (watch %s)", response.watch_id);
      return;
    }
    this.creating[this.creatingHead++] = undefined as unknown as StreamWatch;
    if (this.creatingHead > 1024 && this.creatingHead * 2 > this.creating.length) {
      this.creating = this.creating.slice(this.creatingHead);
      this.creatingHead = 0;
    }
    const id = String(response.watch_id);
    if (watch.state === WatchState.Done) {
      // Cancelled while etcd created it: etcd refused it (no ID to cancel), or now cancel it there.
      if (!response.canceled) this.stream?.write({ cancel_request: { watch_id: id } });
      return;
    }
    watch.id = id;
    if (response.canceled) {
      this.finish(watch);
      return watch.receiver.cancelled(response.cancel_reason ?? "", String(response.compact_revision ?? "0"));
    }
    watch.state = WatchState.Created;
    this.byId.set(id, watch);
    watch.receiver.created();
  }

  private streamFailed(stream: Stream, err: unknown): void {
    if (this.stream !== stream) return;
    this.stream = undefined;
    this.cancels = [];
    log.v3("the watch stream failed: %s", (err as Error)?.message ?? err);
    this.opener.failed();
    this.failAll(err);
    closeStream(stream);
  }


  /** Fails every watch, created or not: the stream they are (or were to be) on is gone. */
  private failAll(err: unknown): void {
    const watches = [...this.unwritten, ...this.creating.slice(this.creatingHead), ...this.byId.values()];
    this.unwritten = [];
    this.creating = [];
    this.creatingHead = 0;
    this.byId.clear();
    for (const watch of watches) {
      if (watch.state === WatchState.Done) continue;
      this.finish(watch);
      watch.receiver.failed(err);
    }
  }

  /**
   * After the work under way in this turn: writes the cancels asked for in
   * it, or closes the stream if no watch is left. A watch started meanwhile
   * (a new leader's of its own key, as its follower's watches close) keeps
   * it open.
   */
  private scheduleCloseCheck(): void {
    if (this.closeCheckScheduled) return;
    this.closeCheckScheduled = true;
    setImmediate(() => {
      this.closeCheckScheduled = false;
      const stream = this.stream;
      const cancels = this.cancels;
      this.cancels = [];
      if (!stream) return;
      if (this.live > 0) {
        for (const id of cancels) stream.write({ cancel_request: { watch_id: id } });
        return;
      }
      this.stream = undefined;
      // Creates still unanswered were all cancelled: their answers have nobody to go to.
      this.creating = [];
      this.creatingHead = 0;
      log.v3("closing the watch stream: no watch left");
      closeStream(stream);
    });
  }
}


/** The end of the range of keys starting with `prefix` (etcd's range_end for a prefix). */
export function prefixEnd(prefix: Buffer): Buffer {
  for (let i = prefix.length - 1; i >= 0; i--) {
    if (prefix[i]! < 0xff) {
      const end = Buffer.from(prefix.subarray(0, i + 1));
      end[i]!++;
      return end;
    }
  }
  // Every byte is 0xff: every key from the prefix on.
  return Buffer.from([0]);
}
