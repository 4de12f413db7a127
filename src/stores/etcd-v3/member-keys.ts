// The keys of etcd's recipe: a member is `<key>/<lease id in hex>`, and only
// such keys are members.

/** etcd's key suffix for a lease: the int64 ID in lowercase hex, unpadded (Go's %x). */
export function leaseHex(leaseId: string): string {
  return BigInt(leaseId).toString(16);
}

/**
 * Whether `suffix` is what leaseHex makes of a lease ID etcd grants, a
 * positive int64 in Go's %x: lowercase hex digits, no leading zero, no sign,
 * at most 7fffffffffffffff. Keys of a nested election (`cleanup/1041a2…`) or
 * that users write (`junk`, `0`) are not.
 */
export function isLeaseHex(suffix: string): boolean {
  return /^(?:[1-9a-f][0-9a-f]{0,14}|[1-7][0-9a-f]{15})$/.test(suffix);
}

/** The member keys of one election: `<key>/` followed by a lease ID in hex. */
export class MemberKeys {
  /** `<key>/`, which every member key starts with. */
  readonly prefix: string;

  constructor(key: string) {
    this.prefix = `${key}/`;
  }

  keyOf(leaseId: string): string {
    return this.prefix + leaseHex(leaseId);
  }

  /** Whether `key` is one of this election's members, not a nested election's key or a foreign one. */
  isMember(key: string): boolean {
    return key.startsWith(this.prefix) && isLeaseHex(key.slice(this.prefix.length));
  }

  /**
   * The keys from the first to the last of `front` (the oldest members, the
   * leader first) whose lease IDs came from the etcd member that granted the
   * leader's. etcd makes a lease ID of the granting member's ID, in its top 16
   * bits, and a count that only grows (pkg/idutil), so these keys sort as the
   * leases were granted, about as their members joined: the range holds the
   * oldest members and rarely any other key. Leases from other etcd members
   * sort elsewhere, and a range stretched over them would take in the keys of
   * most members that join later.
   */
  frontRange(leaderKey: string, front: ReadonlyArray<{ readonly key: string }>): KeysFromTo {
    const source = leaseSource(leaderKey.slice(this.prefix.length));
    let first = leaderKey;
    let last = leaderKey;
    for (const { key } of front) {
      if (leaseSource(key.slice(this.prefix.length)) !== source) continue;
      if (key < first) first = key;
      else if (key > last) last = key;
    }
    return { first, last };
  }
}

/** Keys from `first` to `last`, both included. */
export interface KeysFromTo {
  readonly first: string;
  readonly last: string;
}

/** What tells apart the lease IDs of different etcd members in leaseHex's form: length and all but the last 48 bits. */
function leaseSource(hex: string): string {
  return `${hex.length}:${hex.slice(0, -12)}`;
}
