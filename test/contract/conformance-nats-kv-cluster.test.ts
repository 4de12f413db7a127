// The backend conformance suite (test/contract/conformance/) on the NATS KV backend,
// against a JetStream cluster of three real nats-servers, each bucket replicated on all three.
import { natsTarget } from "./conformance/nats-target";
import { runConformance } from "./conformance/suite";

runConformance(natsTarget({ cluster: true }));
