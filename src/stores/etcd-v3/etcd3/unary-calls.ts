// How many unary calls (reads, transactions, lease grants and revokes) the
// elections on one etcd3 client have on its connection at once. The rest wait
// here, first come first served.
//
// Why: every call is an HTTP/2 stream on the client's one connection, and so
// are the LeaseKeepAlive stream and the Watch stream, whose messages then
// take their turn with every answer in flight. Measured here on one client:
// with 5,000 reads in flight at all times, watches were created at 1.7 a
// second (7,000 a second on an idle client), so a keep-alive's answer came
// too late as well; ten thousand elections on one session (whose renewals
// read each election's key until its watch is made) then lost every term
// together, over and over. With 32 in flight the same reads went through
// at 8,800 a second and watches were made at 330 a second; with 16, 7,400 and
// 500; with 64, 9,700 and 190.
//
// A call waiting here has sent nothing: if its signal aborts first it is
// dropped, and etcd never sees it.
import { onAbort } from "../../../util/abort";

export const UNARY_CALLS_AT_ONCE = 32;

interface Waiting {
  start: () => void;
}

export class UnaryCalls {
  private inFlight = 0;
  private readonly waiting: Waiting[] = [];

  constructor(private readonly atOnce: number = UNARY_CALLS_AT_ONCE) {}

  /** Calls in flight and waiting, for tests and diagnostics. */
  get load(): { inFlight: number; waiting: number } {
    return { inFlight: this.inFlight, waiting: this.waiting.length };
  }

  /**
   * Makes `call` once fewer than the limit are in flight, and settles as it
   * does. If `signal` aborts while it waits, it rejects with the signal's
   * reason and the call is never made.
   */
  run<T>(call: () => Promise<T>, signal?: AbortSignal): Promise<T> {
    if (signal?.aborted) return Promise.reject(signal.reason);
    if (this.waiting.length === 0 && this.inFlight < this.atOnce) return this.make(call);
    return new Promise<T>((resolve, reject) => {
      const waiter: Waiting = {
        start: () => {
          detach?.();
          this.make(call).then(resolve, reject);
        },
      };
      const detach = signal
        ? onAbort(signal, () => {
            const at = this.waiting.indexOf(waiter);
            if (at >= 0) this.waiting.splice(at, 1);
            reject(signal.reason);
          })
        : undefined;
      this.waiting.push(waiter);
    });
  }

  private make<T>(call: () => Promise<T>): Promise<T> {
    this.inFlight++;
    let made: Promise<T>;
    try {
      made = call();
    } catch (err) {
      made = Promise.reject(err);
    }
    const done = () => {
      this.inFlight--;
      if (this.inFlight < this.atOnce) this.waiting.shift()?.start();
    };
    made.then(done, done);
    return made;
  }
}
