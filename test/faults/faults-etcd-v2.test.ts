// The fault suite (test/faults/suite.ts) on etcd's v2 API.
import { runFaultSuite } from "./suite";

runFaultSuite("v2");
