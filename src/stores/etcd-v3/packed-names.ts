// The names of the members in a follower's line, packed into one string.
//
// A v3 follower remembers the name of every member older than itself, so that
// it names the next leader at once when the leader goes
// (line.ts). Kept as one string each, decoded from etcd's
// answer, a name costs a string header and a pointer besides its characters:
// about 40 bytes for a name of ten characters, where its characters and where
// it ends take 18. With a thousand members in one process, each follower
// remembering up to a thousand names, that was a tenth of what a follower
// held (heap per member at N = 1000: 105.9 KiB, 95.2 packed). Only the name of
// a member that comes to the front is ever read back, once.
//
// Not on v2, for now: node-etcd's answers go through JSON.parse, which interns
// string values of up to 10 characters, so short names are shared by every
// follower of one process already, and packing them costs more (44.2 KiB per
// member at N = 1000 with ten-character names, 49.3 packed). Longer names are
// not interned, and would be cheaper packed.

export class PackedNames {
  /** Every name, one after the other. */
  private readonly text: string;
  /** Where each name ends in `text`: name i runs from ends[i - 1] (0 for the first) to ends[i]. */
  private readonly ends: number[];

  constructor(names: readonly string[]) {
    this.text = names.join("");
    // Sized once: an array grown by push() keeps up to half as much again spare.
    this.ends = new Array<number>(names.length);
    let end = 0;
    names.forEach((name, i) => {
      end += name.length;
      this.ends[i] = end;
    });
  }

  get length(): number {
    return this.ends.length;
  }

  /** The name at `index` (0 is the first given). */
  at(index: number): string {
    if (!Number.isInteger(index) || index < 0 || index >= this.ends.length) throw new RangeError(`no name at ${index} of ${this.ends.length}`);
    return this.text.slice(index === 0 ? 0 : this.ends[index - 1]!, this.ends[index]!);
  }
}
