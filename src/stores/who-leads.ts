// "Who leads, once": one read of an election's leader without joining it or
// following it. Every backend answers it (ElectionBackend.readLeader).
import type { Leader } from "../contract/backend";
import { checkOptions, checkSignal } from "../util/abort";
import { backendFor } from "./select";
import { abortError } from "../leadership/lost";
import { resolveOptions, type ElectionOptions } from "../election/options";

export interface WhoLeadsOptions extends Pick<ElectionOptions, "requestTimeout"> {
  /** Gives up: the promise rejects with an AbortError whose `cause` is the signal's reason. */
  signal?: AbortSignal | undefined;
}

/**
 * The leader of the election at `key`, or undefined while nobody leads.
 * Bounded by the request timeout. The client and key are checked by the caller.
 */
export async function whoLeads(client: unknown, key: string, options?: WhoLeadsOptions): Promise<Leader | undefined> {
  const { signal: given, ...tuning } = checkOptions(options, "whoLeads()");
  const signal = checkSignal(given, "whoLeads()");
  const resolved = resolveOptions(undefined, tuning);
  if (signal?.aborted) throw abortError(signal.reason);
  // The name is never written: a read holds no membership.
  const backend = backendFor(client, key, "observer", resolved, tuning);
  const timeout = AbortSignal.timeout(resolved.requestTimeout);
  try {
    return await backend.readLeader(signal ? AbortSignal.any([signal, timeout]) : timeout);
  } catch (err) {
    if (signal?.aborted) throw abortError(signal.reason);
    throw err;
  }
}
