// The backend conformance suite (test/contract/conformance/) on etcd's v2 API.
import { etcdTarget } from "./conformance/etcd-target";
import { runConformance } from "./conformance/suite";

runConformance(etcdTarget("v2"));
