// Picks the store protocol from the client the user passed in. Clients are
// recognised by shape, so this package never loads a client library itself.
import type { ElectionBackend } from "../contract/backend";
import type { ResolvedOptions } from "../election/options";
import { EtcdV2Backend } from "./etcd-v2/recipe";
import { EtcdV3Backend } from "./etcd-v3/recipe";
import { isEtcd3Client } from "./etcd-v3/etcd3/client";
import { isNodeEtcdClient } from "./etcd-v2/node-etcd/client";

export function backendFor(
  client: unknown,
  key: string,
  name: string,
  options: Pick<ResolvedOptions, "ttlSeconds" | "watchRearmInterval">,
): ElectionBackend {
  // node-etcd first: its shape (create/get/set/del) is the one 0.0.1 accepted.
  if (isNodeEtcdClient(client)) return new EtcdV2Backend(client, key, name, options.ttlSeconds, options.watchRearmInterval);
  if (isEtcd3Client(client)) return new EtcdV3Backend(client, key, name, options.ttlSeconds);
  throw new TypeError(
    "etcd client not recognised: pass an etcd3 client (new Etcd3({ hosts })) for etcd's v3 API, " +
      "or a node-etcd client (new Etcd(hosts)) for its v2 API",
  );
}
