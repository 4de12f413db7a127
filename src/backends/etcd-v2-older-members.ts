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
// Members go from the front, or just behind it: a follower watches the member
// next in line after the leader (the heir), and drops it when it goes; when
// the heir announces that it leads, the leader before it is gone.

/** One member of the line, whole: what the watches hold. */
export interface LineMember {
  key: string;
  name: string;
  createdIndex: number;
  /** An etcd index at which it was known to exist: a watch of it starts after it. */
  seenAt: number;
}

export class OlderMembers {
  /** Oldest first; members [first, end) are still in line. */
  private readonly createdIndexes: number[];
  private readonly names: string[];
  private first = 0;
  private readonly end: number;
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

  /** The oldest member still in line, as seen by the listing; undefined when none is left. */
  oldest(): LineMember | undefined {
    if (this.size === 0) return undefined;
    const createdIndex = this.createdIndexes[this.first]!;
    return { key: this.keyOf(createdIndex), name: this.names[this.first]!, createdIndex, seenAt: this.listedAt };
  }

  /** The member next in line after the oldest; undefined when there is none. */
  heir(): LineMember | undefined {
    if (this.size < 2) return undefined;
    const createdIndex = this.createdIndexes[this.first + 1]!;
    return { key: this.keyOf(createdIndex), name: this.names[this.first + 1]!, createdIndex, seenAt: this.listedAt };
  }

  /** Drops the heir, if it has this createdIndex; false if it has not. */
  removeHeir(createdIndex: number): boolean {
    if (this.size < 2 || this.createdIndexes[this.first + 1] !== createdIndex) return false;
    // The oldest moves into the heir's slot: the window stays one piece.
    this.createdIndexes[this.first + 1] = this.createdIndexes[this.first]!;
    this.names[this.first + 1] = this.names[this.first]!;
    this.first++;
    return true;
  }

  /** Drops the oldest member, if it has this createdIndex; false if it has not. */
  removeOldest(createdIndex: number): boolean {
    if (this.size === 0 || this.createdIndexes[this.first] !== createdIndex) return false;
    this.first++;
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
