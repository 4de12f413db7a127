// The members older than a waiting v2 member, as its one listing showed them,
// kept small: a follower remembers every member older than itself (no member
// can become older later), and with a thousand members in one process that
// was most of what a follower held (two arrays of a number and a name per
// member: 8 KiB for the average follower of a thousand).
//
// Members go from the front only: the leader, when the heir (the member next
// in line after it) announces that it leads, or the heir, when it goes. So
// the leader and the heir are kept whole, and the members behind the heir as
// one stream read from the front: each one's createdIndex as its difference
// from the one before, a base-128 varint, one character per byte of a
// one-byte string (on the heap, where it is counted, at a byte or two per
// member). Their names are not kept: a member behind the heir is named only
// once it leads, and then by its own write (the announcement, or a 0.0.1
// member's renewal), which carries its name; only a key written by hand
// without a TTL, which never writes again, keeps its name here.
//
// An in-order key is its createdIndex, zero-padded, so the key follows from
// the number; a key under the directory that merely looks like one (20
// digits, but not its own createdIndex) is kept by createdIndex, so it is
// watched as the key it is.

/** A member of the line: enough to watch it. */
export interface LineMember {
  key: string;
  createdIndex: number;
  /** An etcd index at which it was known to exist: a watch of it starts after it. */
  seenAt: number;
}

/** The leader: also its name, as listed or as it last wrote it. */
export interface LeadingMember extends LineMember {
  name: string;
}

export class OlderMembers {
  private leader: { createdIndex: number; name: string } | undefined;
  private heirIndex: number | undefined;
  /** The members behind the heir, oldest first, as varint differences (see above). */
  private readonly behindHeir: string;
  private cursor = 0;
  private leftBehindHeir: number;
  /** Keys that are not `<dir>/<createdIndex, zero-padded>`, by createdIndex; usually none. */
  private readonly unusualKeys: Map<number, string> | undefined;
  /**
   * The names of keys written without a TTL, by createdIndex; usually none.
   * Written by hand, they never announce nor renew, so the name is kept for
   * when such a key comes to lead.
   */
  private readonly permanentNames: Map<number, string> | undefined;

  /** `members` oldest first, all directly under `dirPath`, listed at etcd index `listedAt`. */
  constructor(
    private readonly dirPath: string,
    members: ReadonlyArray<{ key: string; name: string; createdIndex: number; permanent?: boolean }>,
    readonly listedAt: number,
  ) {
    const [leader, heir] = members;
    this.leader = leader && { createdIndex: leader.createdIndex, name: leader.name };
    this.heirIndex = heir?.createdIndex;
    this.behindHeir = encodeDifferences(members);
    this.leftBehindHeir = Math.max(0, members.length - 2);
    for (const member of members) {
      if (member.permanent) (this.permanentNames ??= new Map()).set(member.createdIndex, member.name);
      if (this.isInOrderKey(member.key, member.createdIndex)) continue;
      this.unusualKeys ??= new Map();
      this.unusualKeys.set(member.createdIndex, member.key);
    }
  }

  get size(): number {
    return (this.leader ? 1 : 0) + (this.heirIndex === undefined ? 0 : 1) + this.leftBehindHeir;
  }

  /** The oldest member still in line, as seen by the listing; undefined when none is left. */
  oldest(): LeadingMember | undefined {
    if (!this.leader) return undefined;
    return { ...this.member(this.leader.createdIndex), name: this.leader.name };
  }

  /** The member next in line after the oldest; undefined when there is none. */
  heir(): LineMember | undefined {
    return this.heirIndex === undefined ? undefined : this.member(this.heirIndex);
  }

  /** The name of a member written without a TTL, as listed; undefined for any other. */
  permanentName(createdIndex: number): string | undefined {
    return this.permanentNames?.get(createdIndex);
  }

  /** Drops the heir, if it has this createdIndex; false if it has not. The member behind it is the heir then. */
  removeHeir(createdIndex: number): boolean {
    if (this.heirIndex !== createdIndex) return false;
    this.heirIndex = this.nextBehindHeir();
    return true;
  }

  /** The heir, if it has this createdIndex, leads under `name`: the oldest is dropped. False if it has not. */
  heirLeads(createdIndex: number, name: string): boolean {
    if (this.heirIndex !== createdIndex) return false;
    this.leader = { createdIndex, name };
    this.heirIndex = this.nextBehindHeir();
    return true;
  }

  /** Drops the oldest member when it is the last one, if it has this createdIndex; false if it has not. */
  removeLast(createdIndex: number): boolean {
    if (this.size !== 1 || this.leader?.createdIndex !== createdIndex) return false;
    this.leader = undefined;
    return true;
  }

  private member(createdIndex: number): LineMember {
    return { key: this.keyOf(createdIndex), createdIndex, seenAt: this.listedAt };
  }

  private nextBehindHeir(): number | undefined {
    if (this.leftBehindHeir === 0 || this.heirIndex === undefined) return undefined;
    let difference = 0;
    let scale = 1;
    let byte: number;
    do {
      byte = this.behindHeir.charCodeAt(this.cursor++);
      difference += (byte % 128) * scale;
      scale *= 128;
    } while (byte >= 128);
    this.leftBehindHeir--;
    return this.heirIndex + difference;
  }

  private keyOf(createdIndex: number): string {
    return this.unusualKeys?.get(createdIndex) ?? this.inOrderKey(createdIndex);
  }

  /** The key etcd gives an in-order member created at `createdIndex`. */
  private inOrderKey(createdIndex: number): string {
    return `${this.dirPath}/${String(createdIndex).padStart(20, "0")}`;
  }

  /** Whether `key` is inOrderKey(createdIndex), without making that key. */
  private isInOrderKey(key: string, createdIndex: number): boolean {
    const { dirPath } = this;
    return (
      key.length === dirPath.length + 21 &&
      key.startsWith(dirPath) &&
      key[dirPath.length] === "/" &&
      Number(key.slice(dirPath.length + 1)) === createdIndex
    );
  }
}

/**
 * The createdIndex of each member behind the heir (the third on; ascending)
 * as its difference from the one before, in base-128 varints (arithmetic,
 * not bit operations: an etcd index may pass 2^32), one character per byte.
 */
function encodeDifferences(members: ReadonlyArray<{ createdIndex: number }>): string {
  if (members.length < 3) return "";
  const bytes: number[] = [];
  let previous = members[1]!.createdIndex;
  for (let i = 2; i < members.length; i++) {
    const { createdIndex } = members[i]!;
    let difference = createdIndex - previous;
    previous = createdIndex;
    while (difference >= 128) {
      bytes.push((difference % 128) + 128);
      difference = Math.floor(difference / 128);
    }
    bytes.push(difference);
  }
  // In slices: a call takes only so many arguments.
  const slices: string[] = [];
  for (let i = 0; i < bytes.length; i += 8192) slices.push(String.fromCharCode(...bytes.slice(i, i + 8192)));
  return slices.join("");
}
