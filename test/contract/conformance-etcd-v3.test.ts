// The backend conformance suite (test/contract/conformance/) on etcd's v3 API.
import { etcdTarget } from "./conformance/etcd-target";
import { runConformance } from "./conformance/suite";

runConformance(etcdTarget("v3"));
