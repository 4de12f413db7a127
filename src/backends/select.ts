// Picks the store protocol from the client the user passed in. Clients are
// recognised by shape, so this package never loads a client library itself.
import type { ElectionBackend } from "../backend";
import { EtcdV2Backend } from "./etcd-v2";
import { isNodeEtcdClient } from "./node-etcd-client";

export function backendFor(client: unknown, key: string, name: string, ttlSeconds: number): ElectionBackend {
  if (isNodeEtcdClient(client)) return new EtcdV2Backend(client, key, name, ttlSeconds);
  throw new TypeError(
    "etcd client not recognised: pass a node-etcd client (new Etcd(hosts)) for etcd's v2 API",
  );
}
