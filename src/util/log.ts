// Diagnostics through the `debug` package: DEBUG=etcd-leader:* shows everything,
// DEBUG=etcd-leader:election only the state machine.
import createDebug from "debug";

export const log = {
  election: createDebug("etcd-leader:election"),
  observer: createDebug("etcd-leader:observer"),
  v2: createDebug("etcd-leader:v2"),
  v3: createDebug("etcd-leader:v3"),
  nats: createDebug("etcd-leader:nats"),
  redis: createDebug("etcd-leader:redis"),
  postgres: createDebug("etcd-leader:postgres"),
};
