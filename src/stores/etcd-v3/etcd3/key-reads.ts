// Reads of single keys made in one turn of the event loop, sent together as
// read-only transactions of up to 128 reads each (etcd's default
// --max-txn-ops).
//
// Why: a member whose own key no etcd watch is confirmed to see reads it at
// each renewal (recipe.ts), and the members of one session renew together,
// at the session's keep-alive. When a session's ten thousand elections
// change leader at once (another process closed its session), every new
// leader renews at once, before the watch of its key is made: ten thousand
// reads, each a gRPC call, on a process that is busy with the ten thousand
// changes besides. Here they timed out by the thousand, and those leaders
// stepped down again. As transactions of 128 they are 79 calls.
//
// A read-only transaction is served as a read (linearizable, not through
// raft's log), each of its reads as the Range it carries, all at one
// revision: the transaction's. What each caller gets is what its own Range
// would have answered at that revision.
import type { IRangeResponse, ITxnResponse } from "etcd3";
import { onAbort } from "../../../util/abort";
import type { RangeAnswer } from "../port";
import { rangeAnswer } from "./key-value";
import type { Etcd3Client } from "./client";
import type { UnaryCalls } from "./unary-calls";

/** etcd's default --max-txn-ops: more operations in one transaction are refused. */
export const READS_PER_TRANSACTION = 128;

interface KeyRead {
  readonly key: Buffer;
  readonly resolve: (answer: RangeAnswer) => void;
  readonly reject: (err: unknown) => void;
  readonly signal: AbortSignal;
  /** Drops the abort listener. */
  readonly detach: () => void;
}

export class KeyReads {
  private pending: KeyRead[] = [];
  private scheduled = false;

  constructor(
    private readonly client: Etcd3Client,
    private readonly calls: UnaryCalls,
  ) {}

  /**
   * Reads `key` (without the namespace's prefix) as a Range of that key
   * would, in a transaction with the other reads asked for in this turn.
   * If `signal` aborts before the transaction is sent, the read is dropped.
   */
  read(key: string, signal: AbortSignal): Promise<RangeAnswer> {
    if (signal.aborted) return Promise.reject(signal.reason);
    return new Promise<RangeAnswer>((resolve, reject) => {
      const prefix = this.client.prefix;
      const raw = prefix && prefix.length > 0 ? Buffer.concat([prefix, Buffer.from(key)]) : Buffer.from(key);
      const detach = onAbort(signal, () => reject(signal.reason));
      this.pending.push({ key: raw, resolve, reject, signal, detach });
      if (!this.scheduled) {
        this.scheduled = true;
        setImmediate(() => this.flush());
      }
    });
  }

  private flush(): void {
    this.scheduled = false;
    const reads = this.pending.filter((read) => !read.signal.aborted);
    this.pending = [];
    for (let at = 0; at < reads.length; at += READS_PER_TRANSACTION) {
      this.send(reads.slice(at, at + READS_PER_TRANSACTION));
    }
  }

  private send(reads: KeyRead[]): void {
    const namespaceLength = this.client.prefix?.length ?? 0;
    const request = { success: reads.map((read) => ({ request_range: { key: read.key } })) };
    this.calls.run(() => this.client.kv.txn(request)).then(
      (txn: ITxnResponse) => {
        reads.forEach((read, i) => {
          read.detach();
          const range = txn.responses[i]?.response_range;
          if (!range) return read.reject(new Error(`etcd answered a transaction of ${reads.length} reads with ${txn.responses.length} answers`));
          read.resolve(rangeAnswer({ ...range, header: txn.header } as IRangeResponse, namespaceLength));
        });
      },
      (err: unknown) => {
        for (const read of reads) {
          read.detach();
          read.reject(err);
        }
      },
    );
  }
}
