// What an election member is doing, as one word, for dashboards and logs.
// `election.state` reads it; the `etcd-leader:state` diagnostics channel
// reports each change (diagnostics.ts).

/**
 * - `stopped`: not taking part (before start(), after stop()).
 * - `joining`: taking a place in line (creating its key, or its lease and key).
 * - `following`: holding a place in line behind the leader, or proving it is
 *   first before it leads.
 * - `leading`: this member leads and its lease deadline has not passed
 *   (exactly when isLeader() is true).
 * - `backing-off`: a step failed; waiting before trying again. A leader that
 *   still leads stays `leading` through its own retries.
 */
export type ElectionState = "stopped" | "joining" | "following" | "leading" | "backing-off";

/** The part of the state the campaign loop sets; `stopped` and `leading` follow from the election itself. */
export type CampaignActivity = Exclude<ElectionState, "stopped" | "leading">;

export function electionState(running: boolean, leading: boolean, activity: CampaignActivity): ElectionState {
  if (!running) return "stopped";
  return leading ? "leading" : activity;
}
