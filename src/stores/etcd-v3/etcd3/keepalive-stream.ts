// Lease renewals on one LeaseKeepAlive stream per etcd3 client, shared by
// every election that uses the client.
//
// A renewal is one message `{ ID: lease }` on the stream and its answer is the
// next one etcd sends for that lease: etcd serves a keep-alive stream one
// request at a time, so the answers for one lease come back in the order the
// requests were written. Each lease has its own queue of waiters, in that
// order, and an answer goes to the head of its lease's queue.
//
// A renewal that stops waiting (its request timed out, or its election
// stopped) after its request was written stays in the queue, abandoned, so
// that its late answer is dropped rather than taken for the answer to a newer
// request: that answer renewed the lease from an older send time than the
// newer request's, and the leader's deadline is counted from the newer one.
// One that stops waiting before its request was written (the stream was still
// opening) leaves the queue and is never sent.
//
// Those placeholders are bounded: a stream on which renewals time out twice
// in a row with no answer at all in between is taken for broken (etcd, or the
// connection, has stopped answering it; the requests after them would only
// queue up behind) and is dropped like a failed one.
//
// When the stream fails (etcd restarted, the connection broke) every renewal
// waiting on it fails at once, with the stream's error, and each election
// retries as it would any failed renewal. The next renewal opens a new stream,
// after a back-off if the last ones failed.
//
// The stream is open only while some lease on the client is in use: opened
// a little after the first lease is granted (or at its first renewal, if
// that comes sooner), closed when the last lease is released (its election
// left), so that a process whose elections all stopped has nothing open and
// exits by itself. Not at the grant itself: a member is then still joining
// and listing its line, and so are the others started with it; a hundred
// members in one process opening a hundred streams in that moment followed
// their leader about a quarter later (medians 214 → 163 ms here).
import type { ILeaseKeepAliveRequest, ILeaseKeepAliveResponse, IDuplexStream } from "etcd3";
import { abortReason } from "../../../util/abort";
import { RequestTimeoutError } from "../../../contract/errors";
import { log } from "../../../util/log";
import type { Etcd3Client } from "./client";
import { closeStream, perPool, StreamOpener } from "./pool-streams";

type Stream = IDuplexStream<ILeaseKeepAliveRequest, ILeaseKeepAliveResponse>;

interface Waiter {
  readonly resolve: (response: ILeaseKeepAliveResponse) => void;
  readonly reject: (err: unknown) => void;
  /** The request is on the stream: its answer will come, or the stream fails. */
  written: boolean;
  /** The stream's answer count when the request was written. */
  answersBefore: number;
  /** Nobody waits for the answer any more; it is dropped when it comes. */
  abandoned: boolean;
}

/** Renewals timed out in a row, with no answer on the stream since any of them was written, that make it broken. */
const SILENT_TIMEOUTS_TO_DROP = 2;

/**
 * The keep-alive stream shared by every election on `client`; made on first
 * use. Namespaces of one Etcd3 client share its connection pool (`pool`, which
 * etcd3 keeps to itself), and so share one stream too; a lease is the
 * cluster's, whichever namespace renews it.
 */
export const keepAliveStreamOf = perPool((client) => new SharedKeepAliveStream(client));

export class SharedKeepAliveStream {
  private stream: Stream | undefined;
  /** Waiters per lease ID (decimal, as etcd3 gives it), in the order their requests were (or will be) written. */
  private readonly waiters = new Map<string, Waiter[]>();
  /** Leases whose elections may still renew them; the stream stays open while there is one. */
  private readonly inUse = new Set<string>();
  private readonly opener: StreamOpener<Stream>;
  /** Answers on the current stream so far. */
  private answers = 0;
  /** Renewals that timed out in a row on the current stream with no answer since they were written. */
  private silentTimeouts = 0;
  /** The opening retain() scheduled, and when it is due. */
  private openLater: { timer: ReturnType<typeof setTimeout>; dueAt: number } | undefined;

  constructor(client: Etcd3Client) {
    this.opener = new StreamOpener(() => client.leaseClient.leaseKeepAlive());
  }

  /**
   * Renews `leaseId` with one message on the shared stream and resolves with
   * etcd's answer (a TTL of 0: the lease is gone). Rejects when the stream
   * fails, or when the signal aborts (the request may still have reached etcd).
   */
  renew(leaseId: string, signal: AbortSignal): Promise<ILeaseKeepAliveResponse> {
    if (signal.aborted) return Promise.reject(abortReason("keep-alive", signal));
    this.inUse.add(leaseId);
    return new Promise((resolve, reject) => {
      const onAbort = () => {
        const reason = abortReason("keep-alive", signal);
        if (waiter.written) {
          waiter.abandoned = true;
          if (reason instanceof RequestTimeoutError) this.timedOut(waiter);
        } else {
          this.removeWaiter(leaseId, waiter);
        }
        reject(reason);
      };
      const waiter: Waiter = {
        resolve: (response) => {
          signal.removeEventListener("abort", onAbort);
          resolve(response);
        },
        reject: (err) => {
          signal.removeEventListener("abort", onAbort);
          reject(err);
        },
        written: false,
        answersBefore: 0,
        abandoned: false,
      };
      signal.addEventListener("abort", onAbort, { once: true });
      const queue = this.waiters.get(leaseId) ?? [];
      queue.push(waiter);
      this.waiters.set(leaseId, queue);
      if (this.stream) this.write(this.stream, leaseId, waiter);
      else this.open();
    });
  }

  /**
   * `leaseId` was granted and will be renewed: the stream opens within
   * `openWithinMs` if it is not open, so that the first renewal, due later,
   * does not wait for it. (A renewal's deadline counts from before it is
   * written; time spent opening the stream would come off the leader's
   * margin.) A renewal that comes first opens it at once.
   */
  retain(leaseId: string, openWithinMs: number): void {
    this.inUse.add(leaseId);
    if (this.stream || this.opener.isOpening) return;
    const dueAt = performance.now() + openWithinMs;
    if (this.openLater && this.openLater.dueAt <= dueAt) return;
    this.cancelOpenLater();
    const timer = setTimeout(() => {
      this.openLater = undefined;
      if (!this.stream && this.inUse.size > 0) this.open();
    }, openWithinMs);
    // A renewal keeps the process alive and opens the stream itself.
    timer.unref();
    this.openLater = { timer, dueAt };
  }

  private cancelOpenLater(): void {
    if (this.openLater) clearTimeout(this.openLater.timer);
    this.openLater = undefined;
  }

  /** The lease will not be renewed again (its election left): the stream closes when no lease is left. */
  release(leaseId: string): void {
    this.inUse.delete(leaseId);
    if (this.inUse.size > 0) return;
    this.cancelOpenLater();
    this.failAll(new Error("the keep-alive stream was closed: no lease left to renew"));
    const stream = this.stream;
    this.stream = undefined;
    if (stream) {
      log.v3("closing the keep-alive stream: no lease left to renew");
      closeStream(stream);
    }
  }

  private write(stream: Stream, leaseId: string, waiter: Waiter): void {
    waiter.written = true;
    waiter.answersBefore = this.answers;
    stream.write({ ID: leaseId });
  }

  private timedOut(waiter: Waiter): void {
    if (!this.stream || this.answers !== waiter.answersBefore) return;
    if (++this.silentTimeouts < SILENT_TIMEOUTS_TO_DROP) return;
    this.streamFailed(this.stream, new Error(`etcd answered none of the last ${this.silentTimeouts} keep-alives on the stream in time; opening another`));
  }

  private open(): void {
    this.cancelOpenLater();
    this.opener.open(
      (stream) => {
        // Every lease was released while it opened.
        if (this.inUse.size === 0) return closeStream(stream);
        this.attach(stream);
      },
      (err) => this.failAll(err),
    );
  }


  private attach(stream: Stream): void {
    this.stream = stream;
    this.answers = 0;
    this.silentTimeouts = 0;
    stream.on("data", (response: ILeaseKeepAliveResponse) => {
      if (this.stream === stream) this.answer(response);
    });
    stream.on("error", (err: unknown) => this.streamFailed(stream, err));
    stream.on("end", () => this.streamFailed(stream, new Error("etcd closed the keep-alive stream")));
    for (const [leaseId, queue] of this.waiters) {
      for (const waiter of queue) if (!waiter.written) this.write(stream, leaseId, waiter);
    }
  }

  private answer(response: ILeaseKeepAliveResponse): void {
    this.opener.answered();
    this.answers++;
    this.silentTimeouts = 0;
    const leaseId = String(response.ID);
    const queue = this.waiters.get(leaseId);
    const waiter = queue?.shift();
    if (queue?.length === 0) this.waiters.delete(leaseId);
    if (!waiter) {
      log.v3("dropped a keep-alive answer for lease %s that nobody asked for", leaseId);
      return;
    }
    if (!waiter.abandoned) waiter.resolve(response);
  }

  private streamFailed(stream: Stream, err: unknown): void {
    if (this.stream !== stream) return;
    this.stream = undefined;
    log.v3("the keep-alive stream failed: %s", (err as Error)?.message ?? err);
    this.opener.failed();
    this.failAll(err);
    closeStream(stream);
  }


  /** Fails every renewal waiting, written or not: none of their answers can come now. */
  private failAll(err: unknown): void {
    const queues = [...this.waiters.values()];
    this.waiters.clear();
    for (const queue of queues) for (const waiter of queue) if (!waiter.abandoned) waiter.reject(err);
  }

  private removeWaiter(leaseId: string, waiter: Waiter): void {
    const queue = this.waiters.get(leaseId);
    if (!queue) return;
    queue.splice(queue.indexOf(waiter), 1);
    if (queue.length === 0) this.waiters.delete(leaseId);
  }
}

