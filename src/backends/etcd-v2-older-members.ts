// The members older than a waiting v2 member, as its one listing showed them,
// kept small: a follower remembers every member older than itself (no member
// can become older later), and with a thousand members in one process that
// is most of what a follower holds. Each member is its createdIndex and its
// name, in two plain arrays (an in-order key is its createdIndex,
// zero-padded, so the key follows from the number), instead of an object
// with its key. The name stays: when the leader goes, a follower names the
// next one at once, without a read (see etcd-v2.ts). A key under the
// directory that merely looks like an in-order key (20 digits, but not its
// own createdIndex) is kept by name, so it is watched as the key it is.
//
// Members only ever go from the two ends: the watched ones are the oldest (the
// leader) and the newest (the one just before ours).

/** One member of the line, whole: what the watches hold. */
export interface LineMember {
  key: string;
  name: string;
  createdIndex: number;
  /** An etcd index at which it was known to exist: a watch of it starts after it. */
  seenAt: number;
}

export type LineEnd = "oldest" | "newest";

export class OlderMembers {
  /** Oldest first; members [first, end) are still in line. */
  private readonly createdIndexes: number[];
  private readonly names: string[];
  private first = 0;
  private end: number;
  /** Keys that are not `<dir>/<createdIndex, zero-padded>`, by createdIndex; usually none. */
  private readonly unusualKeys: Map<number, string> | undefined;

  /** `members` oldest first, all directly under `dirPath`, listed at etcd index `listedAt`. */
  constructor(
    private readonly dirPath: string,
    members: ReadonlyArray<{ key: string; name: string; createdIndex: number }>,
    readonly listedAt: number,
  ) {
    this.createdIndexes = members.map((m) => m.createdIndex);
    this.names = members.map((m) => m.name);
    this.end = members.length;
    for (const member of members) {
      if (member.key === this.inOrderKey(member.createdIndex)) continue;
      this.unusualKeys ??= new Map();
      this.unusualKeys.set(member.createdIndex, member.key);
    }
  }

  get size(): number {
    return this.end - this.first;
  }

  /** The member at that end, as seen by the listing; undefined when none is left. */
  at(end: LineEnd): LineMember | undefined {
    if (this.size === 0) return undefined;
    const i = end === "oldest" ? this.first : this.end - 1;
    const createdIndex = this.createdIndexes[i]!;
    return { key: this.keyOf(createdIndex), name: this.names[i]!, createdIndex, seenAt: this.listedAt };
  }

  /** Drops the member with this createdIndex if it is at one end; false if it is not in line. */
  remove(createdIndex: number): boolean {
    if (this.size === 0) return false;
    if (this.createdIndexes[this.end - 1] === createdIndex) this.end--;
    else if (this.createdIndexes[this.first] === createdIndex) this.first++;
    else return false;
    return true;
  }

  private keyOf(createdIndex: number): string {
    return this.unusualKeys?.get(createdIndex) ?? this.inOrderKey(createdIndex);
  }

  /** The key etcd gives an in-order member created at `createdIndex`. */
  private inOrderKey(createdIndex: number): string {
    return `${this.dirPath}/${String(createdIndex).padStart(20, "0")}`;
  }
}
