// The backend conformance suite (test/contract/conformance/) on the NATS KV backend,
// against a real nats-server with JetStream.
import { natsTarget } from "./conformance/nats-target";
import { runConformance } from "./conformance/suite";

runConformance(natsTarget());
