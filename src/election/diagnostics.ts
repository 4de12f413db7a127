// Observability without a dependency: messages on node:diagnostics_channel,
// which cost nothing while nobody subscribes. Subscribe by name:
//
//   const diagnostics_channel = require("node:diagnostics_channel");
//   diagnostics_channel.subscribe("etcd-leader:renewal", (message) => ...);
//
// Every message names its source (the Election or LeaderObserver), the member
// (undefined for an observer) and the store ("etcd v3 /services/leader"). The
// messages are generic in their source so that this file, which the election
// and the observer publish through, needs neither; the package's entry gives
// them their sources.
import { channel } from "node:diagnostics_channel";
import type { ElectionError, ElectionPhase } from "../contract/errors";
import type { ElectionState } from "./state";

/** The channel names, as published. */
export const channels = {
  /** An election's state changed: StateMessage. */
  state: "etcd-leader:state",
  /** The store confirmed a renewal of a membership: RenewalMessage. */
  renewal: "etcd-leader:renewal",
  /** A failed step will be tried again after a delay: RetryMessage. */
  retry: "etcd-leader:retry",
  /** A store request failed (the same error as the `error` event): ErrorMessage. */
  error: "etcd-leader:error",
} as const;

interface Origin<S> {
  readonly source: S;
  /** The member's name; undefined for an observer. */
  readonly member: string | undefined;
  /** The backend's description of the election: "etcd v3 /services/leader". */
  readonly store: string;
}

export interface StateMessage<Source = object> extends Origin<Source> {
  readonly member: string;
  readonly from: ElectionState;
  readonly to: ElectionState;
  /** The fencing token when `to` is "leading", else undefined. */
  readonly token: number | undefined;
}

export interface RenewalMessage<Source = object> extends Origin<Source> {
  readonly member: string;
  /** The membership renewed (the etcd key). */
  readonly membership: string;
  /** From sending the renewal to its confirmation, in milliseconds. */
  readonly roundTripMs: number;
  /** Whether the member leads (after this renewal moved its deadline). */
  readonly leading: boolean;
}

export interface RetryMessage<Source = object> extends Origin<Source> {
  /** The step that failed: "join", "renew", "wait", "lead" or "observe". */
  readonly phase: ElectionPhase;
  /** Failures of this step in a row, this one included. */
  readonly attempt: number;
  /** How long until the next try, in milliseconds. */
  readonly delayMs: number;
  /** What failed, as the store or the client said it. */
  readonly error: unknown;
}

export interface ErrorMessage<Source = object> extends Origin<Source> {
  readonly error: ElectionError;
}

const stateChannel = channel(channels.state);
const renewalChannel = channel(channels.renewal);
const retryChannel = channel(channels.retry);
const errorChannel = channel(channels.error);

// Each publisher builds its message only when someone listens.

export function publishState(message: () => StateMessage): void {
  if (stateChannel.hasSubscribers) stateChannel.publish(message());
}

export function publishRenewal(message: () => RenewalMessage): void {
  if (renewalChannel.hasSubscribers) renewalChannel.publish(message());
}

export function publishRetry(message: () => RetryMessage): void {
  if (retryChannel.hasSubscribers) retryChannel.publish(message());
}

export function publishError(message: () => ErrorMessage): void {
  if (errorChannel.hasSubscribers) errorChannel.publish(message());
}
