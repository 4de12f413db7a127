// The fault suite (test/faults/suite.ts) on NATS JetStream KV.
import { runFaultSuite } from "./suite";

runFaultSuite("nats");
