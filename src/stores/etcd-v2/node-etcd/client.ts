// The part of the node-etcd client (4.x to 7.x) that the v2 adapter uses, made
// promise-shaped and cancellable. node-etcd calls back `(err, body, headers)`
// and returns a request that can be aborted; an aborted request never calls back.
import { abortReason } from "../../../util/abort";
import type { StoreNode } from "../port";

export type NodeEtcdCallback = (err: NodeEtcdError | null, body?: unknown, headers?: Record<string, string | string[] | undefined>) => void;

interface Abortable {
  abort?: () => void;
}

/** What node-etcd offers and the adapter needs; any client with these methods will do. */
export interface NodeEtcdClient {
  create(dir: string, value: string, options: object, callback: NodeEtcdCallback): Abortable | unknown;
  get(key: string, options: object, callback: NodeEtcdCallback): Abortable | unknown;
  set(key: string, value: string | null, options: object, callback: NodeEtcdCallback): Abortable | unknown;
  del(key: string, options: object, callback: NodeEtcdCallback): Abortable | unknown;
}

/** An error as node-etcd reports it: etcd's own (with `errorCode`) or "All servers returned error". */
export interface NodeEtcdError extends Error {
  errorCode?: number;
  /** For an answer that is not the v2 API's JSON: its HTTP status, where the client lets it be seen. */
  httpStatus?: number;
  errors?: Array<{ httperror?: { code?: string }; httpstatus?: number }>;
}

/** A body as node-etcd hands it over, parsed from etcd's JSON and not checked. */
export interface V2Body {
  action?: string;
  node?: StoreNode;
  prevNode?: StoreNode;
}

export function isNodeEtcdClient(client: unknown): client is NodeEtcdClient {
  if (typeof client !== "object" || client === null) return false;
  const c = client as Record<string, unknown>;
  return ["create", "get", "set", "del"].every((method) => typeof c[method] === "function");
}

/** etcd v2 error codes the adapter reads as answers. */
export const V2ErrorCode = {
  KeyNotFound: 100,
  EventIndexCleared: 401,
} as const;

export function v2ErrorCode(err: unknown): number | undefined {
  const code = (err as NodeEtcdError | undefined)?.errorCode;
  return typeof code === "number" ? code : undefined;
}

/** How one kind of call reads what node-etcd hands back: one object per kind, shared by every call of it. */
export interface AnswerReader<T> {
  /** The answer in a body and the X-Etcd-Index header; throws when the body is not the one expected. */
  answer(body: V2Body, etcdIndex: number | undefined, operation: string): T;
  /** An answer for a refusal the caller expects (an etcd error, no answer in time); undefined to reject with it. */
  refused?(err: NodeEtcdError | UnansweredError): T | undefined;
}

/**
 * Runs one node-etcd call and reads its answer with `reader`. Rejects with
 * the signal's reason when it aborts (a timeout signal gives a
 * RequestTimeoutError), and aborts the request so no socket is left waiting.
 * With `abandonAfterMs`, a deadline of the call's own (the only one, without
 * a signal): if no answer came by then, the request is aborted and the call
 * rejects with an UnansweredError, unless the reader answers for it. A long
 * poll re-armed on a deadline holds that deadline for as long as it waits: a
 * plain timer and a listener on `signal` take about 0.3 KB of heap, where a
 * timeout signal joined to `signal` with AbortSignal.any, and a listener on
 * that, take about 2.6 KB (Node 20). The answer is read in node-etcd's
 * callback, so a call costs one promise, as it did before the reader.
 */
export function call<T>(
  operation: string,
  start: (callback: NodeEtcdCallback) => unknown,
  signal: AbortSignal | undefined,
  abandonAfterMs: number | undefined,
  reader: AnswerReader<T>,
): Promise<T> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(abortReason(operation, signal));
    let settled = false;
    let deadline: ReturnType<typeof setTimeout> | undefined;
    const settle = () => {
      settled = true;
      signal?.removeEventListener("abort", onAbort);
      if (deadline !== undefined) clearTimeout(deadline);
    };
    const refuse = (err: NodeEtcdError | UnansweredError) => {
      const answer = reader.refused?.(err);
      if (answer === undefined) reject(err);
      else resolve(answer);
    };
    const onAbort = () => {
      if (settled) return;
      settle();
      abortRequest(request);
      reject(abortReason(operation, signal!));
    };
    let request: unknown;
    request = start((err, body, headers) => {
      if (settled) return;
      settle();
      if (err) return refuse(explain(err));
      // node-etcd parses JSON and passes anything else on as text, without an error.
      if (typeof body === "string" && body !== "") return reject(notAV2Answer(operation, body, statusOf(request)));
      try {
        resolve(reader.answer((body ?? {}) as V2Body, indexFrom(headers), operation));
      } catch (unexpected) {
        reject(unexpected);
      }
    });
    if (settled) return;
    signal?.addEventListener("abort", onAbort, { once: true });
    if (abandonAfterMs !== undefined) {
      deadline = setTimeout(() => {
        if (settled) return;
        settle();
        abortRequest(request);
        refuse(new UnansweredError(operation, abandonAfterMs));
      }, abandonAfterMs);
      // Like a timeout signal's timer: a pending call alone does not keep the process running.
      deadline.unref();
    }
  });
}

/** A call given `abandonAfterMs` had no answer by then; its request was aborted. */
export class UnansweredError extends Error {
  override readonly name = "UnansweredError";
  constructor(operation: string, afterMs: number) {
    super(`no answer to ${operation} within ${afterMs} ms`);
  }
}

/**
 * node-etcd reports every transport failure as "All servers returned error",
 * with the reasons in `errors`; name them in the message, where people look.
 */
function explain(err: NodeEtcdError): NodeEtcdError {
  if (err.errorCode !== undefined || !Array.isArray(err.errors) || err.errors.length === 0) return err;
  const reasons = err.errors.map((e) => {
    const failure = e as { server?: string; httperror?: { code?: string; message?: string }; httpstatus?: number };
    const why = failure.httperror?.code ?? failure.httperror?.message ?? `HTTP ${failure.httpstatus}`;
    return failure.server ? `${failure.server}: ${why}` : why;
  });
  const explained: NodeEtcdError = new Error(`${err.message} (${reasons.join("; ")})`, { cause: err });
  explained.errors = err.errors;
  return explained;
}

/**
 * An answer that is not the v2 API's JSON. etcd 3.4 serves no v2 API unless
 * started with --enable-v2 (its default is off), and then answers every v2
 * request with Go's plain "404 page not found".
 */
function notAV2Answer(operation: string, body: string, status: number | undefined): NodeEtcdError {
  const answer = `${status === undefined ? "" : `HTTP ${status} `}(${JSON.stringify(body.trim().slice(0, 200))})`;
  const v2Disabled = status === 404 || body.startsWith("404 page not found");
  const error: NodeEtcdError = new Error(
    v2Disabled
      ? `etcd answered ${operation} with ${answer}: the v2 API is disabled: ` +
          "start etcd with --enable-v2=true, or pass an etcd3 client for the v3 API"
      : `etcd answered ${operation} with ${answer}, which is not a v2 API answer: is the client given etcd's client URL?`,
  );
  if (status !== undefined) error.httpStatus = status;
  return error;
}

/**
 * The HTTP status of the answer. node-etcd (4 to 7) returns a token that
 * keeps the request last sent, and the request keeps its response; another
 * client may not, and then the status is unknown.
 */
function statusOf(request: unknown): number | undefined {
  const status = (request as { req?: { response?: { statusCode?: unknown } } } | undefined)?.req?.response?.statusCode;
  return typeof status === "number" ? status : undefined;
}

function abortRequest(request: unknown): void {
  const abort = (request as Abortable | undefined)?.abort;
  if (typeof abort === "function") abort.call(request);
}

/** The store's index when it answered (X-Etcd-Index), where the client passed headers on. */
function indexFrom(headers: Record<string, string | string[] | undefined> | undefined): number | undefined {
  const raw = headers?.["x-etcd-index"];
  const value = Number(Array.isArray(raw) ? raw[0] : raw);
  return Number.isFinite(value) && value > 0 ? value : undefined;
}
