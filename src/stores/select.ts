// Picks the store protocol from the client the user passed in. Clients are
// recognised by shape, so this package never loads a client library itself.
import type { ElectionBackend } from "../contract/backend";
import type { ElectionOptions, ResolvedOptions } from "../election/options";
import { resolveV2Options } from "./etcd-v2/options";
import { EtcdV2Backend } from "./etcd-v2/recipe";
import { EtcdV3Backend } from "./etcd-v3/recipe";
import { isEtcd3Client } from "./etcd-v3/etcd3/client";
import { etcd3Port } from "./etcd-v3/etcd3/port";
import { isNodeEtcdClient } from "./etcd-v2/node-etcd/client";
import { NodeEtcdAdapter } from "./etcd-v2/node-etcd/adapter";

/**
 * The backend for `client`: `resolved` is the election's timing, `given` the
 * options as the caller gave them, for the store's own (the v2 store's `v2`).
 */
export function backendFor(
  client: unknown,
  key: string,
  name: string,
  resolved: Pick<ResolvedOptions, "ttlSeconds">,
  given: ElectionOptions = {},
): ElectionBackend {
  // node-etcd first: its shape (create/get/set/del) is the one 0.0.1 accepted.
  if (isNodeEtcdClient(client)) {
    return new EtcdV2Backend(new NodeEtcdAdapter(client), key, name, resolved.ttlSeconds, resolveV2Options(given).watchRearmInterval);
  }
  if (given.v2 !== undefined) {
    throw new TypeError("the v2 option is for the etcd v2 store (a node-etcd client); this client is not one: leave it out");
  }
  // Its old place among the timing options is still checked, as it always was.
  resolveV2Options(given);
  if (isEtcd3Client(client)) return new EtcdV3Backend(etcd3Port(client), key, name, resolved.ttlSeconds);
  throw new TypeError(
    "etcd client not recognised: pass an etcd3 client (new Etcd3({ hosts })) for etcd's v3 API, " +
      "or a node-etcd client (new Etcd(hosts)) for its v2 API",
  );
}
