// The cluster's fault scenarios (test/faults/nats-cluster-faults.ts) that
// `npm test` runs once: the stream's leader killed as the election's leader
// stops, and cut off while a member leads. `npm run soak -- --backend
// nats-cluster` runs all eight, ten times each.
import { natsClusterKillStreamLeaderHandover, natsClusterPartitionStreamLeader } from "./nats-cluster-faults";
import { runFaultSuite } from "./suite";

runFaultSuite("nats-cluster", [natsClusterKillStreamLeaderHandover, natsClusterPartitionStreamLeader]);
