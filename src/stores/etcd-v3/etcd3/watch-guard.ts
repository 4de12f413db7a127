// A guard for one race in etcd3 1.1.x's watch manager that would otherwise
// end the user's process.
//
// When etcd cancels a watch itself (its start revision was compacted away)
// while this side is cancelling the same watch, etcd answers twice: once for
// its own cancellation, once for the cancel request. etcd3 drops the watcher on
// the first answer and throws "Failed to find watcher for IWatchResponse" on
// the second, inside the gRPC stream's data handler, where nobody can catch it:
// an unhandled rejection, fatal by Node's default. An answer for a watch etcd3
// has already dropped has nobody to go to, so the guard drops it instead of
// letting etcd3 throw. Everything else goes to etcd3 as before. If etcd3's
// internals are not what this expects, nothing is changed.
import { log } from "../../../util/log";

interface WatchResponseLike {
  canceled?: boolean;
  watch_id?: unknown;
}

interface WatchManagerLike {
  watchers: Array<{ id: unknown }>;
  handleResponse(res: WatchResponseLike): void;
}

const guarded = new WeakSet<object>();

/** Installs the guard on the watch manager of `client` (an Etcd3 or a namespace of one), once. */
export function guardWatchManager(client: object): void {
  const manager = (client as { watchManager?: unknown }).watchManager;
  if (!isWatchManager(manager) || guarded.has(manager)) return;
  guarded.add(manager);
  const handleResponse = manager.handleResponse;
  manager.handleResponse = function (this: WatchManagerLike, res: WatchResponseLike): void {
    if (!this.watchers.some((watcher) => watcher.id === res.watch_id)) {
      log.v3("dropped an answer (canceled: %s) for watch %s, which etcd3 no longer holds", res.canceled, res.watch_id);
      return;
    }
    handleResponse.call(this, res);
  };
}

function isWatchManager(value: unknown): value is WatchManagerLike {
  const manager = value as Partial<WatchManagerLike> | undefined;
  return typeof manager === "object" && manager !== null && Array.isArray(manager.watchers) && typeof manager.handleResponse === "function";
}
