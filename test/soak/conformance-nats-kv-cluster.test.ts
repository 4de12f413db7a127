// The backend conformance suite (test/contract/conformance/) on the NATS KV backend,
// against a JetStream cluster of three real nats-servers, each bucket replicated on all three.
// About a minute a run, so `npm test` leaves it out (it runs no file under test/s*/ but
// test/stores/); `npm run soak -- --part conformance` runs it ten times in a row.
import { natsTarget } from "../contract/conformance/nats-target";
import { runConformance } from "../contract/conformance/suite";

runConformance(natsTarget({ cluster: true }));
