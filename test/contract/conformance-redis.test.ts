// The backend conformance suite (test/contract/conformance/) on the Redis
// backend, against a real redis-server.
import { redisTarget } from "./conformance/redis-target";
import { runConformance } from "./conformance/suite";

runConformance(redisTarget());
