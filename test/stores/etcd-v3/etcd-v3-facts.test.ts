// The facts of etcd's v3 API that the recipe relies on (etcd-v3-facts.ts),
// held by a real etcd, through the etcd3 client's adapter of the port, and by
// the simulated etcd the simulation runs on (test/sim/stores/etcd-v3.ts):
// one set of cases, two targets.
import { after, before, describe, it } from "node:test";
import { Etcd3 } from "etcd3";
import { etcd3Port } from "../../../src/stores/etcd-v3/etcd3/port";
import { EtcdV3Store } from "../../sim/stores/etcd-v3";
import { Scheduler } from "../../sim/world";
import { startEtcd, type EtcdCluster } from "../../kit/etcd-server";
import { exitOrFail, sleep } from "../../kit/waiting";
import { V3_FACTS, type FactsTarget } from "./etcd-v3-facts";

let cases = 0;
const prefixFor = () => `/facts/${++cases}`;

describe("etcd v3 facts, on a real etcd", () => {
  let cluster: EtcdCluster;
  let client: Etcd3;
  let target: FactsTarget;

  before(async () => {
    cluster = await startEtcd({ enableV2: false });
    client = new Etcd3({ hosts: cluster.hostPorts });
    target = {
      name: "etcd",
      port: etcd3Port(client),
      operator: {
        put: async (key, value) => Number((await client.put(key).value(value).exec()).header.revision),
        deletePrefix: async (prefix) => Number((await client.delete().prefix(prefix).exec()).header.revision),
        compact: async () => {
          const { header } = await client.put("/facts-compaction").value("x").exec();
          await client.kv.compact({ revision: header.revision, physical: true });
        },
        elapse: (ms) => sleep(ms),
      },
    };
  });

  after(async () => {
    client?.close();
    await cluster?.close();
    exitOrFail();
  });

  for (const fact of V3_FACTS) it(fact.title, () => fact.run(target, prefixFor()));
});

describe("etcd v3 facts, on the simulated etcd", () => {
  for (const fact of V3_FACTS) {
    it(fact.title, async () => {
      const scheduler = new Scheduler();
      const store = new EtcdV3Store(scheduler);
      const target: FactsTarget = {
        name: "simulated etcd",
        port: store,
        operator: {
          put: async (key, value) => store.put({ [key]: value }),
          deletePrefix: async (prefix) => store.delete(...store.keysUnder(prefix)),
          compact: async () => store.compact(),
          elapse: (ms) => scheduler.runUntil(scheduler.now + ms),
        },
      };
      await fact.run(target, prefixFor());
    });
  }
});
