// The cluster's fault scenario (test/faults/nats-cluster-faults.ts) that
// `npm test` runs once: the stream's leader killed as the election's leader
// stops. `npm run soak -- --backend nats-cluster` runs all eight, ten times each.
import { natsClusterKillStreamLeaderHandover } from "./nats-cluster-faults";
import { runFaultSuite } from "./suite";

runFaultSuite("nats-cluster", [natsClusterKillStreamLeaderHandover]);
