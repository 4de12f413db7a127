// The simulated stores, by the name the command line and the tests give them.
import type { StoreFactory, StoreKind } from "../store";
import { simEtcdV2 } from "./etcd-v2";
import { simEtcdV3 } from "./etcd-v3";
import { simNatsKv } from "./nats-kv";
import { simPostgres } from "./postgres";
import { simRedis } from "./redis";

export const SIM_STORES: Partial<Record<StoreKind, StoreFactory>> = {
  "etcd-v3": simEtcdV3,
  "nats-kv": simNatsKv,
  "etcd-v2": simEtcdV2,
  redis: simRedis,
  postgres: simPostgres,
};
