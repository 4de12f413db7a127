// The fault suite (test/faults/suite.ts) on etcd's v3 API.
import { runFaultSuite } from "./suite";

runFaultSuite("v3");
