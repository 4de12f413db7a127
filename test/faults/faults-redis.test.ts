// The fault suite (test/faults/suite.ts) on Redis, on a redis-server that
// writes its append-only file before it answers, so that a restart keeps
// what it acknowledged (test/stores/redis/ covers one that does not): the
// store's own faults (a restart, an outage past the TTL, an outside DEL), a
// leader cut off at its TCP proxy, frozen, crashed or stopped, and a
// connection gone silent. `npm run soak -- --backend redis` runs every
// scenario that applies, the process-group ones too.
import { runFaultSuite } from "./suite";
import { STORE_SCENARIOS } from "./scenarios";

runFaultSuite("redis", STORE_SCENARIOS);
