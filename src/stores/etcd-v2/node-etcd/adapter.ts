// The etcd v2 port (../port.ts) on a node-etcd client: every request in the
// shape node-etcd takes, and every answer, header and refusal read back into
// the port's terms. What is node-etcd's own stays here: its callbacks and
// abort() (client.ts), its retries (turned off), its error objects and codes,
// and the deadline that abandons a long poll.
import type { EtcdV2Port, Found, GetOptions, NotFound, StoreNode, Unanswered, WaitAnswer } from "../port";
import { call, type AnswerReader, type NodeEtcdClient, type NodeEtcdError, UnansweredError, V2ErrorCode, v2ErrorCode, type V2Body } from "./client";

/** node-etcd retries some failures on its own for up to half a minute; the state machine retries instead. */
const NO_CLIENT_RETRIES = { maxRetries: 0 } as const;

export class NodeEtcdAdapter implements EtcdV2Port {
  constructor(private readonly client: NodeEtcdClient) {}

  createInOrder(
    operation: string,
    dir: string,
    value: string,
    ttlSeconds: number,
    signal: AbortSignal | undefined,
    abandonAfterMs?: number,
  ): Promise<Found> {
    return call(operation, (cb) => this.client.create(dir, value, { ttl: ttlSeconds, ...NO_CLIENT_RETRIES }, cb), signal, abandonAfterMs, WRITTEN);
  }

  get(operation: string, key: string, options: GetOptions, signal: AbortSignal, abandonAfterMs?: number): Promise<Found | NotFound> {
    const query: { maxRetries: number; sorted?: true; quorum?: true } = { ...NO_CLIENT_RETRIES };
    if (options.sorted) query.sorted = true;
    if (options.quorum) query.quorum = true;
    return call(operation, (cb) => this.client.get(key, query, cb), signal, abandonAfterMs, READ);
  }

  setIfExists(
    operation: string,
    key: string,
    value: string | null,
    ttlSeconds: number,
    signal: AbortSignal | undefined,
    abandonAfterMs?: number,
  ): Promise<Found | NotFound> {
    const options = value === null ? { refresh: true } : {};
    return call(
      operation,
      (cb) => this.client.set(key, value, { ttl: ttlSeconds, ...options, prevExist: true, ...NO_CLIENT_RETRIES }, cb),
      signal,
      abandonAfterMs,
      READ,
    );
  }

  delete(operation: string, key: string, signal: AbortSignal | undefined, abandonAfterMs?: number): Promise<boolean> {
    return call(operation, (cb) => this.client.del(key, { ...NO_CLIENT_RETRIES }, cb), signal, abandonAfterMs, DELETED);
  }

  wait(key: string, fromIndex: number, recursive: boolean, signal: AbortSignal, abandonAfterMs: number): Promise<WaitAnswer> {
    return call(
      "watch",
      (cb) => this.client.get(key, { wait: true, waitIndex: fromIndex, recursive, ...NO_CLIENT_RETRIES }, cb),
      signal,
      abandonAfterMs,
      EVENT,
    );
  }
}

/** A create's or a write's answer: the node it left. */
const WRITTEN: AnswerReader<Found> = {
  answer: (body, etcdIndex, operation) => found(requireNode(body, operation), etcdIndex),
};

/** A read's or a conditional write's answer: the node, or that etcd holds no such key. */
const READ: AnswerReader<Found | NotFound> = {
  answer: (body, etcdIndex, operation) => found(requireNode(body, operation), etcdIndex),
  refused: (err) => (v2ErrorCode(err) === V2ErrorCode.KeyNotFound ? { node: undefined, etcdIndex: errorIndex(err) } : undefined),
};

const DELETED: AnswerReader<boolean> = {
  answer: () => true,
  refused: (err) => (v2ErrorCode(err) === V2ErrorCode.KeyNotFound ? false : undefined),
};

const UNANSWERED: Unanswered = { kind: "unanswered" };

/** A long poll's answer: the event, a history etcd has forgotten, or no answer within the poll's bound. */
const EVENT: AnswerReader<WaitAnswer> = {
  answer: (body: V2Body, _etcdIndex, operation) => ({ kind: "event", action: body.action ?? "", node: requireNode(body, operation) }),
  refused: (err) => {
    if (err instanceof UnansweredError) return UNANSWERED;
    if (v2ErrorCode(err) === V2ErrorCode.EventIndexCleared) return { kind: "history-gone", historyStart: historyStartOf(err) };
    return undefined;
  },
};

/**
 * A node and the index etcd answered at. A client that does not pass the
 * X-Etcd-Index header on leaves the node's own indexes to go by: the index
 * of a key's last write, or of the last write under a directory the listing
 * shows. etcd was at least there when it answered.
 */
function found(node: StoreNode, etcdIndex: number | undefined): Found {
  if (etcdIndex !== undefined) return { node, etcdIndex };
  let highestSeen = node.modifiedIndex;
  for (const child of node.nodes ?? []) if (child.modifiedIndex > highestSeen) highestSeen = child.modifiedIndex;
  return { node, etcdIndex: highestSeen };
}

function requireNode(body: V2Body, operation: string): StoreNode {
  if (!body.node) throw new Error(`etcd answered ${operation} without a node`);
  return withTtls(body.node);
}

/** A node as etcd answers it: with the `expiration` of a key that has a TTL. */
type EtcdNode = StoreNode & { readonly expiration?: string; readonly nodes?: readonly EtcdNode[] };

/**
 * A key whose time is up, which etcd's sync has not removed yet, has a TTL
 * of 0 in the port's terms. etcd leaves its `ttl` out (Go rounds what is
 * left down to 0, and the field is omitted when empty) and keeps its
 * `expiration`; read as it comes, it would pass for a key written without a
 * TTL, by hand, which never goes (listing.ts), and a follower would name a
 * member that is gone the leader.
 */
function withTtls(node: EtcdNode): StoreNode {
  const nodes = node.nodes?.some(pastItsTime) ? node.nodes.map(withTtls) : node.nodes;
  if (!pastItsTime(node) && nodes === node.nodes) return node;
  return { ...node, ...(pastItsTime(node) ? { ttl: 0 } : {}), ...(nodes ? { nodes } : {}) };
}

function pastItsTime(node: EtcdNode): boolean {
  return node.ttl === undefined && typeof node.expiration === "string";
}

/** The etcd index an error answer carries (etcd puts it in the body's `index`). */
function errorIndex(err: unknown): number {
  const index = (err as { error?: { index?: unknown } }).error?.index;
  return typeof index === "number" ? index : 0;
}

/**
 * The oldest index etcd still holds events from, as a 401 names it in its
 * cause ("the requested history has been cleared [<oldest>/<asked>]");
 * undefined if it does not.
 */
function historyStartOf(err: NodeEtcdError): number | undefined {
  const cause = (err as { error?: { cause?: unknown } }).error?.cause;
  const match = typeof cause === "string" ? /\[(\d+)\/\d+\]/.exec(cause) : null;
  return match ? Number(match[1]) : undefined;
}
