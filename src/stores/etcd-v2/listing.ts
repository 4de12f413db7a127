// The members of a v2 election as a listing of its directory shows them:
// the in-order keys directly under it, oldest first.
import type { Leader } from "../../contract/backend";
import type { EtcdV2Port, StoreNode } from "./port";

export interface Member {
  key: string;
  name: string;
  createdIndex: number;
  /** Written without a TTL: by hand, as no member of ours or of 0.0.1 writes one. */
  permanent?: boolean;
}

const SORTED = { sorted: true } as const;

/** The members of the election in `dir`, oldest first, and the etcd index of the listing; given up after `abandonAfterMs` without an answer. */
export async function listMembers(
  port: EtcdV2Port,
  dir: string,
  signal: AbortSignal,
  abandonAfterMs?: number,
): Promise<{ members: Member[]; etcdIndex: number }> {
  const { node, etcdIndex } = await port.get("list members", dir, SORTED, signal, abandonAfterMs);
  // An election nobody has joined yet: etcd's answer still says where its index is.
  if (!node) return { members: [], etcdIndex };
  if (!node.dir) throw new Error(`election key ${dir} is not a directory in etcd`);
  // One pass: every member of a hundred started together lists the line.
  const members: Member[] = [];
  let inOrder = true;
  for (const n of node.nodes ?? []) {
    if (!isMembershipNode(n, dir)) continue;
    const previous = members.at(-1);
    if (previous && previous.createdIndex > n.createdIndex) inOrder = false;
    members.push({ key: n.key, name: n.value!, createdIndex: n.createdIndex, permanent: n.ttl === undefined });
  }
  // Sorted by key, in-order keys are in creation order; a key that only looks
  // like one may not be.
  if (!inOrder) members.sort((a, b) => a.createdIndex - b.createdIndex);
  return { members, etcdIndex };
}

/**
 * In-order keys directly under the election directory (as etcd names it in
 * answers: one leading slash, none trailing); anything else there is not a
 * member.
 */
export function isMembershipNode(node: StoreNode, dir: string): boolean {
  if (node.dir || typeof node.value !== "string") return false;
  const { key } = node;
  if (key.length !== dir.length + 21 || !key.startsWith(dir) || key[dir.length] !== "/") return false;
  TWENTY_DIGITS.lastIndex = dir.length + 1;
  return TWENTY_DIGITS.test(key);
}

/** Twenty digits to the end, from `lastIndex` (sticky: no copy of the key's tail). */
const TWENTY_DIGITS = /\d{20}$/y;

/** A member as the leader it is: its name and its fencing token. */
export function leaderOf(member: { name: string; createdIndex: number } | undefined): Leader | undefined {
  return member && { name: member.name, token: member.createdIndex };
}

/** The oldest member of a line kept by key. */
export function oldest(line: Map<string, Member>): Member | undefined {
  let first: Member | undefined;
  for (const member of line.values()) if (!first || member.createdIndex < first.createdIndex) first = member;
  return first;
}
