// The backend conformance suite (test/contract/conformance/) on the PostgreSQL
// backend, against a real PostgreSQL 15.
import { postgresTarget } from "./conformance/postgres-target";
import { runConformance } from "./conformance/suite";

runConformance(postgresTarget());
