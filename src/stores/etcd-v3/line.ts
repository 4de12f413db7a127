// The members older than a waiting v3 member, as its listing showed them,
// kept small. When the one it watches goes, a follower watches and names the
// next one without a read (see follower.ts), so it keeps what makes a member's
// key and tells that key from a later one of the same name, the lease ID and
// the create revision, as three numbers (24 bytes a member in a plain array),
// and its name, packed with the others into one string (packed-names.ts),
// instead of an object with its key (about 150 bytes in all).
//
// A long line is listed as its two ends only, the oldest members and the
// newest before ours, with a gap between them that nobody here knows: only
// the ends are ever watched. The oldest end can be read again on its own
// before it runs out (withOldestEnd); once either end has no member left
// before the gap, the line is `exhausted` and must be listed again.
//
// A member's key is `<prefix><lease ID in hex>` (isLeaseHex in member-keys.ts: at
// most 16 digits, no leading zero). A lease ID is an int64, more than a double
// holds exactly, so it is kept as its high and low 32 bits.
//
// Members only ever go from the two ends: the watched ones are the oldest (the
// leader) and the newest (the one just before ours).

import { PackedNames } from "./packed-names";

export interface ListedMember {
  /** `<prefix><lease ID in lowercase hex>`. */
  key: string;
  name: string;
  createRevision: number;
}

export type LineEnd = "oldest" | "newest";

/** Numbers kept per member: create revision, then the lease ID's high and low 32 bits. */
const STRIDE = 3;
const LOW_DIGITS = 8;

export class OlderMembers {
  private readonly entries: number[];
  private readonly names: PackedNames;
  /** Members [first, end) are still in line, oldest first. */
  private first = 0;
  private end: number;

  /**
   * `members` oldest first, every key `prefix` followed by a lease ID in hex,
   * listed at `listedAt`. With `gapAt`, members[0, gapAt) are the oldest and
   * members[gapAt, ...) the newest, and unknown members may stand between.
   */
  constructor(
    private readonly prefix: string,
    members: readonly ListedMember[],
    readonly listedAt: number,
    private readonly gapAt?: number,
  ) {
    if (gapAt !== undefined && !(gapAt > 0 && gapAt < members.length)) {
      throw new RangeError(`a gap at ${gapAt} leaves an end of ${members.length} members empty`);
    }
    this.names = new PackedNames(members.map((m) => m.name));
    // Sized once: an array grown by push() keeps up to half as much again spare.
    this.entries = new Array<number>(members.length * STRIDE);
    members.forEach(({ key, createRevision }, i) => {
      const hex = key.slice(prefix.length);
      const high = hex.length > LOW_DIGITS ? parseInt(hex.slice(0, -LOW_DIGITS), 16) : 0;
      this.entries[i * STRIDE] = createRevision;
      this.entries[i * STRIDE + 1] = high;
      this.entries[i * STRIDE + 2] = parseInt(hex.slice(-LOW_DIGITS), 16);
    });
    this.end = members.length;
  }

  /** Members known to be in line; with a gap, more may be. */
  get size(): number {
    return this.end - this.first;
  }

  /** No member is older: none known, and no gap. */
  get isEmpty(): boolean {
    return this.size === 0 && this.gapAt === undefined;
  }

  /** An end has no known member left before the gap: list the line again to go on. */
  get exhausted(): boolean {
    return this.gapAt !== undefined && (this.first === this.gapAt || this.end === this.gapAt);
  }

  /** How many members are known at the oldest end, before the gap; undefined without a gap. */
  get oldestEndSize(): number | undefined {
    return this.gapAt === undefined ? undefined : Math.max(0, this.gapAt - this.first);
  }

  /** The create revision of the first member past the gap; undefined without a gap or a member there. */
  get newestEndStart(): number | undefined {
    return this.gapAt === undefined || this.end === this.gapAt ? undefined : this.entries[this.gapAt * STRIDE];
  }

  /**
   * The same line with its oldest end replaced by `front`, a later listing
   * of the members from the oldest end on up to the newest end, oldest first:
   * `full` if that listing stopped at its limit, so that more members may
   * stand between it and the newest end. Undefined if there is no gap, or if
   * a full listing found no member (nothing to stand for that end).
   *
   * Every member keeps `listedAt`, the earlier listing's revision: a watch
   * from there replays whatever happened to them since either listing.
   */
  withOldestEnd(front: readonly ListedMember[], full: boolean): OlderMembers | undefined {
    if (this.gapAt === undefined || this.end === this.gapAt || (full && front.length === 0)) return undefined;
    const newest: ListedMember[] = [];
    for (let i = this.gapAt; i < this.end; i++) newest.push(this.member(i));
    return new OlderMembers(this.prefix, [...front, ...newest], this.listedAt, full ? front.length : undefined);
  }

  /** The member at that end, or undefined when none is known there. */
  at(end: LineEnd): ListedMember | undefined {
    if (this.size === 0 || this.exhausted) return undefined;
    return this.member(end === "oldest" ? this.first : this.end - 1);
  }

  /**
   * The members still in line at the oldest end, oldest first, at most
   * `limit`: those before the gap, or without one every member.
   */
  oldestEnd(limit: number): ListedMember[] {
    if (this.exhausted) return [];
    const stop = Math.min(this.gapAt ?? this.end, this.end, this.first + limit);
    const members: ListedMember[] = [];
    for (let i = this.first; i < stop; i++) members.push(this.member(i));
    return members;
  }

  private member(i: number): ListedMember {
    const base = i * STRIDE;
    const [createRevision, high, low] = this.entries.slice(base, base + STRIDE) as [number, number, number];
    const hex = high > 0 ? high.toString(16) + low.toString(16).padStart(LOW_DIGITS, "0") : low.toString(16);
    return { key: this.prefix + hex, name: this.names.at(i), createRevision };
  }

  /** Drops the member with this create revision if it is at one end; false if it is not in line. */
  remove(createRevision: number): boolean {
    if (this.size === 0 || this.exhausted) return false;
    if (this.entries[(this.end - 1) * STRIDE] === createRevision) this.end--;
    else if (this.entries[this.first * STRIDE] === createRevision) this.first++;
    else return false;
    return true;
  }
}
