// What a follower remembers of the line ahead of it, without a store: the
// members older than itself as its one listing showed them, taken as they go,
// names and keys given back as listed (on v2, the name of the leader only:
// the others' names come from their own writes).
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { OlderMembers as V2OlderMembers } from "../../src/stores/etcd-v2/line";
import { OlderMembers as V3OlderMembers } from "../../src/stores/etcd-v3/line";
import { PackedNames } from "../../src/stores/etcd-v3/packed-names";

// Empty, one character, non-Latin-1 and astral names, a name holding what a
// separator might have been.
const NAMES = ["alpha", "", "b", "nœud-7", "🦀 crab", "with\u0000nul", "x".repeat(300), "last"];

describe("packed names", () => {
  it("gives every name back as given, whatever its characters", () => {
    const packed = new PackedNames(NAMES);
    assert.equal(packed.length, NAMES.length);
    assert.deepEqual(NAMES.map((_, i) => packed.at(i)), NAMES);
  });

  it("refuses an index outside the list instead of inventing a name", () => {
    const packed = new PackedNames(["a", "b"]);
    for (const index of [-1, 2, 0.5, Number.NaN]) assert.throws(() => packed.at(index), RangeError);
    assert.throws(() => new PackedNames([]).at(0), RangeError);
  });
});

describe("the line a v2 follower remembers", () => {
  const dir = "/election";
  const key = (createdIndex: number) => `${dir}/${String(createdIndex).padStart(20, "0")}`;
  // Differences of 1, 127, 128, 16384 and past 2^32 between neighbours: every varint length.
  const createdIndexes = [10, 11, 138, 266, 16650, 2 ** 33 + 7, 2 ** 33 + 8, 2 ** 40];
  const members = createdIndexes.map((createdIndex, i) => ({ key: key(createdIndex), name: NAMES[i]!, createdIndex }));
  const at = (createdIndex: number) => ({ key: key(createdIndex), createdIndex, seenAt: 99 });

  it("names the leader as listed, and gives each heir's key and createdIndex back as listed as the heirs go", () => {
    const line = new V2OlderMembers(dir, members, 99);
    assert.deepEqual(line.oldest(), { ...at(10), name: NAMES[0] });
    const heirs = [];
    for (let heir = line.heir(); heir; heir = line.heir()) {
      heirs.push(heir);
      assert.equal(line.removeHeir(heir.createdIndex + 1), false, "removed a member that is not the heir");
      assert.equal(line.removeHeir(heir.createdIndex), true);
    }
    assert.deepEqual(heirs, createdIndexes.slice(1).map(at));
    assert.equal(line.size, 1);
    assert.deepEqual(line.oldest(), { ...at(10), name: NAMES[0] });
    assert.equal(line.removeLast(11), false);
    assert.equal(line.removeLast(10), true);
    assert.equal(line.size, 0);
    assert.equal(line.oldest(), undefined);
  });

  it("lets each heir lead under the name it wrote, dropping the leader before it", () => {
    const line = new V2OlderMembers(dir, members, 99);
    assert.equal(line.heirLeads(10, "x"), false, "the leader cannot lead after itself");
    assert.equal(line.removeLast(10), false, "the leader is not the last one while a heir is behind it");
    for (const [i, createdIndex] of createdIndexes.slice(1).entries()) {
      assert.equal(line.size, createdIndexes.length - i);
      assert.equal(line.heirLeads(createdIndex, `leader ${i}`), true);
      assert.deepEqual(line.oldest(), { ...at(createdIndex), name: `leader ${i}` });
    }
    assert.equal(line.heir(), undefined);
    assert.equal(line.size, 1);
  });

  it("takes heirs leaving and heirs leading in any order", () => {
    const line = new V2OlderMembers(dir, members, 99);
    assert.equal(line.removeHeir(11), true);
    assert.equal(line.heirLeads(138, "c"), true);
    assert.equal(line.removeHeir(266), true);
    assert.deepEqual(line.heir(), at(16650));
    assert.equal(line.heirLeads(16650, "e"), true);
    assert.deepEqual(line.oldest(), { ...at(16650), name: "e" });
    assert.deepEqual(line.heir(), at(2 ** 33 + 7));
    assert.equal(line.size, 4);
  });

  it("keeps the name of a key written without a TTL, and only of such a key", () => {
    const line = new V2OlderMembers(dir, members.map((m, i) => ({ ...m, permanent: i === 3 })), 99);
    assert.equal(line.permanentName(createdIndexes[3]!), NAMES[3]);
    for (const [i, createdIndex] of createdIndexes.entries()) if (i !== 3) assert.equal(line.permanentName(createdIndex), undefined);
  });

  it("keeps a key that only looks like an in-order key as the key it is", () => {
    const odd = { key: `${dir}/${"7".repeat(20)}`, name: "odd", createdIndex: 3 };
    const oddHeir = { key: `${dir}/${"8".repeat(20)}`, name: "odd heir", createdIndex: 4 };
    const line = new V2OlderMembers(dir, [odd, oddHeir, members[0]!], 5);
    assert.equal(line.oldest()?.key, odd.key);
    assert.equal(line.heir()?.key, oddHeir.key);
    line.heirLeads(4, "odd heir");
    assert.equal(line.oldest()?.key, oddHeir.key);
    assert.equal(line.heir()?.key, key(10));
  });

  it("holds a thousand members behind the heir in a byte or two each", () => {
    const many = Array.from({ length: 1002 }, (_, i) => ({ key: key(100 + 3 * i), name: `member-${i}`, createdIndex: 100 + 3 * i }));
    const line = new V2OlderMembers(dir, many, 5000);
    const stream = (line as unknown as { behindHeir: string }).behindHeir;
    assert.equal(stream.length, 1000, "one byte per member for small differences");
    let count = 0;
    while (line.heir()) {
      assert.equal(line.heir()!.createdIndex, 100 + 3 * (count + 1));
      line.removeHeir(line.heir()!.createdIndex);
      count++;
    }
    assert.equal(count, 1001);
  });
});

describe("the line a v3 follower remembers", () => {
  const prefix = "election/";
  // Lease IDs in hex as etcd gives them: up to 16 digits, no leading zero.
  const hexes = ["1", "ff", "694d7a2a1f3c4b05", "7fffffffffffffff", "100000000", "abcdef12", "3", "10"];
  const members = NAMES.map((name, i) => ({ key: prefix + hexes[i]!, name, createRevision: 100 + i }));

  it("gives back each end as listed, and takes members from either end", () => {
    const line = new V3OlderMembers(prefix, members, 500);
    assert.deepEqual(line.at("oldest"), members[0]);
    assert.deepEqual(line.at("newest"), members.at(-1));
    assert.equal(line.remove(104), false, "removed a member from the middle");
    assert.equal(line.remove(107), true);
    assert.equal(line.remove(100), true);
    assert.deepEqual(line.at("oldest"), members[1]);
    assert.deepEqual(line.at("newest"), members[6]);
    const rest = [];
    while (line.size > 0) {
      rest.push(line.at("oldest")!);
      line.remove(line.at("oldest")!.createRevision);
    }
    assert.deepEqual(rest, members.slice(1, 7));
    assert.equal(line.at("oldest"), undefined);
  });

  it("with a gap between its two ends, is exhausted once either end has gone, and is never empty before", () => {
    // members[0..3) the oldest, members[3..8) the newest before ours.
    const fromFront = new V3OlderMembers(prefix, members, 500, 3);
    for (const m of members.slice(0, 2)) {
      assert.equal(fromFront.remove(m.createRevision), true);
      assert.equal(fromFront.exhausted, false);
    }
    assert.deepEqual(fromFront.at("oldest"), members[2]);
    assert.equal(fromFront.remove(members[2]!.createRevision), true);
    assert.equal(fromFront.exhausted, true);
    assert.equal(fromFront.isEmpty, false);
    assert.equal(fromFront.at("oldest"), undefined, "no member known at the front");
    assert.equal(fromFront.remove(members[7]!.createRevision), false, "nothing is taken from an exhausted line");

    const fromBack = new V3OlderMembers(prefix, members, 500, 3);
    for (const m of members.slice(3).reverse()) assert.equal(fromBack.remove(m.createRevision), true);
    assert.equal(fromBack.exhausted, true);
    assert.equal(fromBack.isEmpty, false);

    const whole = new V3OlderMembers(prefix, members, 500);
    for (const m of members) whole.remove(m.createRevision);
    assert.equal(whole.exhausted, false);
    assert.equal(whole.isEmpty, true);
  });

  it("takes a later listing of its oldest end, and keeps the newest end and the revision it was listed at", () => {
    // members[0..3) the oldest, members[3..8) the newest before ours.
    const line = new V3OlderMembers(prefix, members, 500, 3);
    assert.equal(line.oldestEndSize, 3);
    assert.equal(line.newestEndStart, 103);
    line.remove(100);
    line.remove(101);
    assert.equal(line.oldestEndSize, 1);
    const later = [
      members[2]!,
      { key: `${prefix}abc`, name: "between-1", createRevision: 102.5 },
      { key: `${prefix}abd`, name: "between-2", createRevision: 102.7 },
    ];
    // A full listing: more may stand between it and the newest end.
    const refilled = line.withOldestEnd(later, true)!;
    assert.equal(refilled.listedAt, 500);
    assert.equal(refilled.oldestEndSize, 3);
    assert.deepEqual(refilled.oldestEnd(10), later);
    assert.deepEqual(refilled.at("newest"), members[7]);
    for (const m of later) refilled.remove(m.createRevision);
    assert.equal(refilled.exhausted, true);
    // A listing that reached the newest end: the line is whole again, no gap.
    const whole = line.withOldestEnd(later, false)!;
    assert.equal(whole.oldestEndSize, undefined);
    assert.deepEqual(whole.oldestEnd(20), [...later, ...members.slice(3)]);
    assert.equal(whole.withOldestEnd(later, true), undefined, "no gap to fill");
    // A full listing of nothing but keys of no member cannot stand for the oldest end.
    assert.equal(line.withOldestEnd([], true), undefined);
    // One that found no member and reached the newest end leaves that end alone.
    assert.deepEqual(line.withOldestEnd([], false)!.at("oldest"), members[3]);
  });

  it("refuses a gap that leaves an end empty", () => {
    assert.throws(() => new V3OlderMembers(prefix, members, 500, 0), RangeError);
    assert.throws(() => new V3OlderMembers(prefix, members, 500, members.length), RangeError);
  });
});
