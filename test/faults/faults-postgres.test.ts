// The fault suite (test/faults/suite.ts) on PostgreSQL: the store's own
// faults (a restart, an outage past the TTL, an outside DELETE of the row),
// a leader cut off at its TCP proxy, frozen, crashed or stopped, and a
// connection gone silent. `npm run soak -- --backend postgres` runs every
// scenario that applies, the process-group ones too.
import { runFaultSuite } from "./suite";
import { STORE_SCENARIOS } from "./scenarios";

runFaultSuite("postgres", STORE_SCENARIOS);
