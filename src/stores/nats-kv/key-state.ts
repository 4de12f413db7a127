// The election key as a member sees it: a value (the holder's name) or a
// marker, with its revision and when it was seen, and what a follower or an
// observer makes of it: who holds the key, and by when that holder's entry
// must have aged out unless renewed.
import { untilAborted } from "../../util/abort";
import type { Clock } from "../../util/clock";
import type { KvEntry, NatsKvPort } from "./port";

/** A value, or a marker, of the election key as a member read or watched it. */
export interface KeyState {
  /** The holder's name; undefined when the key is absent, deleted or purged. */
  readonly name: string | undefined;
  /** The entry's revision; 0 when the key is absent. */
  readonly revision: number;
  /** When (on the member's clock) the entry was seen: the server wrote it before then. */
  readonly seenAt: number;
}

/** A value of the key: a write of the holder's name. */
export type ValueState = KeyState & { readonly name: string };

export function isValue(state: KeyState): state is ValueState {
  return state.name !== undefined;
}

/** What a follower or an observer knows of the member holding the key. */
export interface Holder {
  readonly name: string;
  /** The revision at which this holder's term was first seen: its create, if the follower saw that. */
  readonly token: number;
  /** The revision of its latest write seen. */
  revision: number;
  /** When (on the member's clock) its latest write must have aged out, unless renewed. */
  goneBy: number;
}

/** One read of the key, stamped on `clock` when its answer came. */
export async function readKey(kv: NatsKvPort, key: string, clock: Clock, signal: AbortSignal): Promise<KeyState> {
  const entry: KvEntry | undefined = await untilAborted("read election key", kv.get(key), signal);
  const seenAt = clock.now();
  return entry ? { name: entry.value, revision: entry.revision, seenAt } : { name: undefined, revision: 0, seenAt };
}

/** The holder whose write `state` shows, seen for the first time: it is gone by TTL after the write was seen. */
export function holderOf(state: ValueState, ttlMs: number): Holder {
  return { name: state.name, token: state.revision, revision: state.revision, goneBy: state.seenAt + ttlMs };
}
