// `etcdLeader.candidates(client, key)`: who is in line at an etcd election,
// read once without joining it (src/election/candidates.ts).
import { readCandidates, type Candidates } from "../election/candidates";
import { resolveOptions, type ElectionOptions } from "../election/options";
import { checkOptions, checkSignal } from "../util/abort";
import { backendFor } from "./select";

export interface CandidatesOptions extends Pick<ElectionOptions, "requestTimeout"> {
  /** Gives up: the promise rejects with an AbortError whose `cause` is the signal's reason. */
  signal?: AbortSignal | undefined;
}

/** The candidates of the election at `key` on `client`, bounded by the request timeout. The client and key are checked by the caller. */
export async function candidates(client: unknown, key: string, options?: CandidatesOptions): Promise<Candidates> {
  const { signal: given, ...tuning } = checkOptions(options, "candidates()");
  const signal = checkSignal(given, "candidates()");
  const resolved = resolveOptions(undefined, tuning);
  // The name is never written: a read holds no membership.
  const backend = backendFor(client, key, "observer", resolved, tuning);
  return readCandidates(backend, resolved.requestTimeout, signal);
}
