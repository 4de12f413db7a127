// The conformance target for etcd, on either API: a real etcd server, each
// member on its own client behind its own fault proxy (so one member can be
// cut off), and an operator's view of the store through EtcdAdmin (HTTP, the
// v3 JSON gateway and etcdctl), which holds no connection of its own.
import { Etcd3 } from "etcd3";
import type { ElectionBackend } from "../../../src/contract/backend";
import { EtcdV2Backend } from "../../../src/stores/etcd-v2/recipe";
import { etcd3Options } from "../../../src/stores/etcd-v3/etcd3/options";
import { DEFAULT_WATCH_REARM_INTERVAL_MS } from "../../../src/stores/etcd-v2/options";
import { EtcdV3Backend } from "../../../src/stores/etcd-v3/recipe";
import { etcd3Port } from "../../../src/stores/etcd-v3/etcd3/port";
import type { NodeEtcdClient } from "../../../src/stores/etcd-v2/node-etcd/client";
import { NodeEtcdAdapter } from "../../../src/stores/etcd-v2/node-etcd/adapter";
import { EtcdAdmin } from "../../faults/etcd-admin";
import type { Backend } from "../../faults/types";
import { startEtcd, type EtcdCluster } from "../../kit/etcd-server";
import { FaultProxy } from "../../kit/fault-proxy";
import { openWatches } from "../../kit/store-clients";
import type { ConformanceTarget, TargetElection } from "./target";

// eslint-disable-next-line @typescript-eslint/no-require-imports
const Etcd = require("node-etcd") as new (hosts: string[]) => NodeEtcdClient;

export function etcdTarget(api: Backend): ConformanceTarget {
  let cluster: EtcdCluster | undefined;
  let elections = 0;
  const started = () => {
    if (!cluster) throw new Error("the etcd target was not started");
    return cluster;
  };

  return {
    name: `etcd ${api}`,
    unsupported:
      api === "v2"
        ? {
            expireMember:
              "etcd v2 keys have no lease to revoke: a key expires only when its member stops refreshing it, " +
              "which is what the cut-connection cases do",
          }
        : {},
    async start() {
      cluster = await startEtcd({ enableV2: api === "v2" });
    },
    async stop() {
      await cluster?.close();
      cluster = undefined;
    },
    async election(label, ttlSeconds) {
      const etcd = started();
      const key = `/conformance-${api}/${++elections}-${label}`;
      const admin = new EtcdAdmin(api, etcd.hostPorts);
      /** Each member's proxy by name; every proxy opened, for cleanup. */
      const proxies = new Map<string, FaultProxy>();
      const allProxies: FaultProxy[] = [];
      const etcd3Clients: Etcd3[] = [];

      const keyOf = async (name: string) => {
        const entry = (await admin.line(key)).find((m) => m.name === name);
        if (!entry) throw new Error(`the store holds no membership for ${name}`);
        return entry.key;
      };

      const election: TargetElection = {
        async backend(name): Promise<ElectionBackend> {
          const proxy = await FaultProxy.start({ upstream: etcd.hostPorts });
          proxies.set(name, proxy);
          allProxies.push(proxy);
          if (api === "v2") return new EtcdV2Backend(new NodeEtcdAdapter(new Etcd([proxy.hostPort])), key, name, ttlSeconds, DEFAULT_WATCH_REARM_INTERVAL_MS);
          const client = new Etcd3(etcd3Options({ hosts: proxy.hostPort }));
          etcd3Clients.push(client);
          return new EtcdV3Backend(etcd3Port(client), key, name, ttlSeconds);
        },
        async members() {
          return (await admin.line(key)).map((m) => m.name);
        },
        async readLeader() {
          return (await admin.line(key))[0]?.name;
        },
        async deleteMember(name) {
          await admin.deleteKey(await keyOf(name));
        },
        async cutConnection(name) {
          const proxy = proxies.get(name);
          if (!proxy) throw new Error(`no member ${name} in this election`);
          proxy.setMode("blackhole");
        },
        openWatches: () => openWatches(etcd.clientUrls[0]!, api),
        async cleanup() {
          for (const client of etcd3Clients) client.close();
          await Promise.all(allProxies.map((proxy) => proxy.close()));
        },
      };
      if (api === "v3") election.expireMember = async (name) => admin.revokeLeaseOf(await keyOf(name));
      return election;
    },
  };
}
