// The etcd3 client settings the README recommends for elections: etcd3's
// default per-host circuit breaker stays open for 5 s after three failures,
// longer than a short TTL, so a member could not renew or rejoin for 5 s after
// etcd came back. This breaker half-opens after 1 s; the election's own
// back-off does the rest.
import { circuitBreaker, ConsecutiveBreaker, handleWhen } from "cockatiel";
import { isRecoverableError, type IOptions } from "etcd3";

export function electionFaultHandling(): IOptions["faultHandling"] {
  return {
    host: () => circuitBreaker(handleWhen(isRecoverableError), { halfOpenAfter: 1_000, breaker: new ConsecutiveBreaker(3) }),
  };
}
