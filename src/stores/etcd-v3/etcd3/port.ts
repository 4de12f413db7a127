// The v3 recipe's port (../port.ts) on an etcd3 client. What the client needs
// besides its own calls is here and beside it: unary calls bounded by a
// signal without cancelling them, a few dozen on the connection at a time
// (unary-calls.ts), and each call's gRPC status and outcome reviewed
// (client.ts, advice.ts); renewals on one keep-alive stream per
// client (keepalive-stream.ts); and watches that report a failure instead of
// resuming past events (client.ts).
import type { ComparatorBuilder, IRangeResponse, ITxnResponse, MultiRangeBuilder, SingleRangeBuilder } from "etcd3";
import type { FencedWriteResult } from "../../../contract/backend";
import { log } from "../../../util/log";
import { leaseHex } from "../member-keys";
import {
  LeaseNotFoundError,
  type CampaignAnswer,
  type CampaignRequest,
  type EtcdV3Port,
  type SessionPort,
  type GrantedLease,
  type RangeAnswer,
  type RangeRequest,
  type WatchSet,
} from "../port";
import { Etcd3Advisor } from "./advice";
import { etcd3Call, isLeaseNotFound, Watches, withGrpcStatus, type Etcd3Client } from "./client";
import { Etcd3KeyValue, rangeAnswer } from "./key-value";
import { KeyReads } from "./key-reads";
import { UnaryCalls } from "./unary-calls";
import { keepAliveStreamOf, type SharedKeepAliveStream } from "./keepalive-stream";

const ports = new WeakMap<Etcd3Client, Etcd3Port>();

/** The port on `client` (an Etcd3 or a namespace of one), made on first use and shared by every election on it. */
export function etcd3Port(client: Etcd3Client): Etcd3Port {
  let port = ports.get(client);
  if (!port) ports.set(client, (port = new Etcd3Port(client)));
  return port;
}

export class Etcd3Port implements EtcdV3Port, SessionPort {
  private readonly advisor: Etcd3Advisor;
  private readonly keepAliveStream: SharedKeepAliveStream;
  /** Unary calls on the client's connection, a few dozen at a time (unary-calls.ts). */
  private readonly calls = new UnaryCalls();
  /** Reads of one key each, made in one turn, sent together (key-reads.ts). */
  private readonly keyReads: KeyReads;

  constructor(private readonly client: Etcd3Client) {
    this.advisor = new Etcd3Advisor(client);
    this.keepAliveStream = keepAliveStreamOf(client);
    this.keyReads = new KeyReads(client, this.calls);
  }

  // A unary etcd3 call, bounded by `signal` (not cancelled: see client.ts);
  // its outcome also tells the advisor how the client fares.
  range(request: RangeRequest, operation: string, signal: AbortSignal): Promise<RangeAnswer> {
    if (isPlainKeyRead(request)) return this.advisor.follow(etcd3Call(operation, this.keyReads.read(request.key, signal), signal));
    return this.advisor.follow(etcd3Call(operation, this.calls.run(() => this.rangeOf(request).exec(), signal), signal), plainRangeAnswer);
  }

  campaign({ key, value, leaseId }: CampaignRequest): Promise<CampaignAnswer> {
    return this.calls
      .run(() => this.client.if(key, "Create", "==", 0).then(this.client.put(key).value(value).lease(leaseId)).else(this.client.get(key)).commit())
      .then(
        (txn) => campaignAnswer(txn),
        (err: unknown) => {
          // A put on a lease etcd no longer has: a session's lease that was
          // revoked or expired since it was last confirmed.
          if (isLeaseNotFound(err)) throw new LeaseNotFoundError(leaseId, { cause: err });
          throw err;
        },
      );
  }

  fencedTransaction(key: string, createRevision: number, operations: readonly unknown[], signal: AbortSignal): Promise<FencedWriteResult> {
    const sending = this.calls.run(
      () =>
        this.client
          .if(key, "Create", "==", createRevision)
          .then(...(operations as Parameters<ComparatorBuilder["then"]>))
          .commit(),
      signal,
    );
    return this.advisor.follow(etcd3Call("fenced write", sending, signal), (txn) => ({
      succeeded: txn.succeeded,
      revision: Number(txn.header.revision),
      response: txn,
    }));
  }

  deleteMember(key: string, createRevision: number | undefined, signal: AbortSignal): Promise<void> {
    const deleting: Promise<unknown> = this.calls.run(
      (): Promise<unknown> =>
        createRevision === undefined
          ? this.client.delete().key(key).exec()
          : this.client.if(key, "Create", "==", createRevision).then(this.client.delete().key(key)).commit(),
      signal,
    );
    return this.advisor.follow(etcd3Call("delete member", deleting, signal)).then(() => undefined);
  }

  awaitAnswer<T>(operation: string, answer: Promise<T>, signal: AbortSignal): Promise<T> {
    return this.advisor.follow(etcd3Call(operation, answer, signal));
  }

  watches<Name extends string>(signal: AbortSignal): WatchSet<Name> {
    return new Watches<Name>(this.client, signal);
  }

  grantLease(ttlSeconds: number): Promise<GrantedLease> {
    return this.calls.run(() => this.client.leaseClient.leaseGrant({ TTL: ttlSeconds })).then((lease) => {
      const granted: GrantedLease = { id: lease.ID, ttlSeconds: Number(lease.TTL) };
      // At the default refresh interval (half the TTL) the first renewal comes a
      // quarter of the TTL after the grant at the soonest (src/election/renewal.ts); one that
      // comes sooner opens the stream itself.
      this.keepAliveStream.retain(lease.ID, (granted.ttlSeconds * 1000) / 8);
      return granted;
    });
  }

  keepAlive(leaseId: string, signal: AbortSignal): Promise<number> {
    return this.keepAliveStream.renew(leaseId, signal).then(
      (answer) => {
        this.advisor.succeeded();
        return Number(answer.TTL);
      },
      (err: unknown) => {
        const reviewed = this.advisor.review(err);
        if (isLeaseNotFound(reviewed)) throw new LeaseNotFoundError(leaseId, { cause: reviewed });
        throw withGrpcStatus(reviewed);
      },
    );
  }

  async revokeLease(leaseId: string, signal: AbortSignal): Promise<void> {
    const revoking = this.advisor.follow(
      etcd3Call("revoke lease", this.calls.run(() => this.client.leaseClient.leaseRevoke({ ID: leaseId }), signal), signal),
    );
    // Released once the revoke is answered: with the client's last lease this
    // closes the keep-alive stream, work that would hold the revoke back if
    // done in the turn that sends it.
    try {
      await revoking;
    } catch (err) {
      if (!isLeaseNotFound(err)) throw err;
    } finally {
      this.keepAliveStream.release(leaseId);
    }
  }

  abandonLease(leaseId: string): void {
    this.keepAliveStream.release(leaseId);
    this.calls.run(() => this.client.leaseClient.leaseRevoke({ ID: leaseId })).then(
      () => log.v3("revoked abandoned lease %s", leaseHex(leaseId)),
      (err: unknown) => log.v3("could not revoke abandoned lease %s: %s", leaseHex(leaseId), (err as Error).message),
    );
  }

  /** etcd3's builder for a Range: `get` for one key (a limit of 1), `getAll` for a prefix or a range. */
  private rangeOf(request: RangeRequest): SingleRangeBuilder | MultiRangeBuilder {
    const { key, prefix, range, sortByCreate, limit, minCreateRevision, maxCreateRevision, revision } = request;
    let builder: SingleRangeBuilder | MultiRangeBuilder;
    if (key !== undefined) {
      builder = this.client.get(key);
    } else {
      let all = this.client.getAll();
      if (prefix !== undefined) all = all.prefix(prefix);
      else if (range !== undefined) all = all.inRange(range);
      else throw new TypeError("a range read needs a key, a prefix or a range");
      if (sortByCreate !== undefined) all = all.sort("Create", sortByCreate === "ascend" ? "Ascend" : "Descend");
      if (limit !== undefined) all = all.limit(limit);
      builder = all;
    }
    if (minCreateRevision !== undefined) builder = builder.minCreateRevision(minCreateRevision);
    if (maxCreateRevision !== undefined) builder = builder.maxCreateRevision(maxCreateRevision);
    if (revision !== undefined) builder = builder.revision(revision);
    return builder;
  }
}

/** A read of one key as it is now, and nothing else. */
function isPlainKeyRead(request: RangeRequest): request is RangeRequest & { key: string } {
  const { key, prefix, range, sortByCreate, limit, minCreateRevision, maxCreateRevision, revision } = request;
  return (
    key !== undefined &&
    [prefix, range, sortByCreate, limit, minCreateRevision, maxCreateRevision, revision].every((option) => option === undefined)
  );
}

function plainRangeAnswer(response: IRangeResponse): RangeAnswer {
  return rangeAnswer(response);
}

/** The transaction's answer in the port's terms. */
function campaignAnswer(txn: ITxnResponse): CampaignAnswer {
  const revision = Number(txn.header.revision);
  if (!txn.succeeded) {
    const existing = txn.responses[0]?.response_range?.kvs[0];
    return { succeeded: false, revision, existing: existing && new Etcd3KeyValue(existing) };
  }
  return { succeeded: true, revision, existing: undefined };
}
