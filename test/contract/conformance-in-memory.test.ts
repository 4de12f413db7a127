// The backend conformance suite (test/contract/conformance/) on the README's in-memory
// backend (examples/in-memory-backend.ts).
import { inMemoryTarget } from "./conformance/in-memory-target";
import { runConformance } from "./conformance/suite";

runConformance(inMemoryTarget());
