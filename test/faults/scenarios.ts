// Every fault scenario, in the order the suite and the soak run them.
import { clusterLeaderCrash, etcdLongOutage, etcdQuickRestart } from "./etcd-faults";
import { commandGroupStopped, hookGroupHungUp } from "./group-faults";
import { gracefulStop, sigkillLeader, sigstopLeader } from "./member-faults";
import { partitionFollower, partitionLeaderBlackhole, partitionLeaderReset, slowLeaderLink } from "./network-faults";
import { natsBucketRecreate, natsKeyPurge } from "./nats-faults";
import { silentFollowerThenLeaderLeaves, silentLeader } from "./silent-faults";
import { externalDelete, historyGone, wholeElectionDelete } from "./store-faults";
import type { Scenario } from "./types";

export const SCENARIOS: readonly Scenario[] = [
  gracefulStop,
  sigkillLeader,
  sigstopLeader,
  commandGroupStopped,
  hookGroupHungUp,
  partitionLeaderBlackhole,
  partitionLeaderReset,
  partitionFollower,
  slowLeaderLink,
  silentLeader,
  silentFollowerThenLeaderLeaves,
  etcdQuickRestart,
  etcdLongOutage,
  clusterLeaderCrash,
  historyGone,
  externalDelete,
  wholeElectionDelete,
  natsKeyPurge,
  natsBucketRecreate,
];

/**
 * The scenarios about the store and the member's link to it, without those
 * about the CLI's process groups or a second kind of partition, which do not
 * depend on the store: what the PostgreSQL and Redis files of `npm test` run.
 */
export const STORE_SCENARIOS: readonly Scenario[] = [
  gracefulStop,
  sigkillLeader,
  sigstopLeader,
  partitionLeaderBlackhole,
  silentLeader,
  etcdQuickRestart,
  etcdLongOutage,
  externalDelete,
];
