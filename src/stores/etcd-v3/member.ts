// A member of the line as a follower or an observer follows it: its key, the
// name it goes by, and the revisions that order it and say where to watch it from.
import type { Leader } from "../../contract/backend";
import type { ListedMember } from "./line";
import type { KeyValue } from "./port";

export interface Member {
  key: string;
  name: string;
  createRevision: number;
  /** A revision at which the member was known to exist; a watch of it starts after it. */
  seenAt: number;
}

/** A member as the leader it is: its name and its fencing token. */
export function leaderOf(member: Member | undefined): Leader | undefined {
  return member && { name: member.name, token: member.createRevision };
}

/** A member from the line, as the listing saw it: watched from there, a removal since is replayed. */
export function fromLine({ key, name, createRevision }: ListedMember, listedAt: number): Member {
  return { key, name, createRevision, seenAt: listedAt };
}

/** A member as etcd holds its key, seen at the key's latest change unless said otherwise. */
export function memberOf(kv: KeyValue, seenAt = kv.modRevision): Member {
  return { key: kv.key, name: kv.value, createRevision: kv.createRevision, seenAt };
}
