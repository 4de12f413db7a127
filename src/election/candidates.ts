// "Who is in line": one read of every member of an election, in order, the
// leader first, without taking part. Queue-style stores (etcd) hold every
// member's key and answer with the whole line; a race-style store (NATS KV)
// holds nothing for a member that does not lead, so its answer is the leader
// alone, and says so (`scope`). A backend's answer is checked here: it is
// another party's code.
import type { ElectionBackend, Leader } from "../contract/backend";
import { leaderProblem } from "../contract/answers";
import { abortError } from "../leadership/lost";
import { untilAborted } from "../util/abort";

export interface Candidates {
  /**
   * "line": every member in line (etcd). "leader": the leader alone, because
   * the store keeps nothing for members that do not lead (NATS KV, and any
   * backend without readCandidates): the others cannot be known.
   */
  readonly scope: "line" | "leader";
  /** The members, the leader first, then in the order they would lead; empty when nobody leads. */
  readonly members: readonly Leader[];
}

/**
 * The candidates of `backend`'s election, within `timeoutMs` (and until
 * `signal`, the caller's, aborts: then an AbortError whose cause is its
 * reason). A backend's answer that is not a list of `{ name, token }` with
 * tokens growing along the line is a TypeError naming the backend and the
 * member.
 */
export async function readCandidates(backend: ElectionBackend, timeoutMs: number, signal?: AbortSignal): Promise<Candidates> {
  if (signal?.aborted) throw abortError(signal.reason);
  const timeout = AbortSignal.timeout(timeoutMs);
  const bound = signal ? AbortSignal.any([signal, timeout]) : timeout;
  try {
    return await untilAborted("read candidates", readChecked(backend, bound), bound);
  } catch (err) {
    if (signal?.aborted) throw abortError(signal.reason);
    throw err;
  }
}

async function readChecked(backend: ElectionBackend, signal: AbortSignal): Promise<Candidates> {
  const store = backend.description ?? "the backend";
  if (!backend.readCandidates) {
    const leader = await backend.readLeader(signal);
    const problem = leaderProblem(leader);
    if (problem) throw new TypeError(`${store} answered readLeader with a leader that ${problem}`);
    return { scope: "leader", members: leader ? [{ name: leader.name, token: leader.token }] : [] };
  }
  const answer: unknown = await backend.readCandidates(signal);
  if (!Array.isArray(answer)) {
    throw new TypeError(`${store} answered readCandidates with ${answer === null ? "null" : typeof answer}, not a list of { name, token }`);
  }
  const members: Leader[] = [];
  for (const [i, member] of answer.entries()) {
    const problem = member === undefined ? "is undefined, not { name, token }" : leaderProblem(member);
    if (problem) throw new TypeError(`${store} answered readCandidates with a member ${i} that ${problem}`);
    const { name, token } = member as Leader;
    const before = members.at(-1);
    if (before && !(token > before.token)) {
      throw new TypeError(
        `${store} answered readCandidates out of order: member ${i} (${name}) has token ${token}, not above ${before.name}'s ${before.token}`,
      );
    }
    members.push({ name, token });
  }
  return { scope: "line", members };
}
