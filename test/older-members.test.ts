// What a follower remembers of the line ahead of it, without a store: the
// members older than itself as its one listing showed them, taken from the
// ends as they go, names and keys given back as listed.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { OlderMembers as V2OlderMembers } from "../src/backends/etcd-v2-older-members";
import { OlderMembers as V3OlderMembers } from "../src/backends/etcd-v3-older-members";
import { PackedNames } from "../src/backends/packed-names";

// Empty, one character, non-Latin-1 and astral names, a name holding what a separator might have been.
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
  const members = NAMES.map((name, i) => ({ key: key(10 + i), name, createdIndex: 10 + i }));

  it("goes from the front only, naming each member and its key as listed", () => {
    const line = new V2OlderMembers(dir, members, 99);
    const seen = [];
    for (let next = line.oldest(); next; next = line.oldest()) {
      seen.push(next);
      assert.equal(line.removeOldest(next.createdIndex + 1), false, "removed a member that is not the oldest");
      assert.equal(line.removeOldest(next.createdIndex), true);
    }
    assert.deepEqual(seen, members.map((m) => ({ ...m, seenAt: 99 })));
    assert.equal(line.size, 0);
    assert.equal(line.removeOldest(10), false);
  });

  it("drops the heir (the member behind the oldest), keeping the oldest and the order behind it", () => {
    const line = new V2OlderMembers(dir, members, 99);
    assert.equal(line.heir()?.name, NAMES[1]);
    assert.equal(line.removeHeir(10), false, "removed the oldest as if it were the heir");
    assert.equal(line.removeHeir(11), true);
    assert.equal(line.oldest()?.name, NAMES[0]);
    assert.deepEqual(line.heir(), { ...members[2], seenAt: 99 });
    assert.equal(line.removeOldest(10), true);
    assert.equal(line.oldest()?.name, NAMES[2]);
    const rest = [];
    while (line.heir()) {
      rest.push(line.heir()!.name);
      line.removeHeir(line.heir()!.createdIndex);
    }
    assert.deepEqual(rest, NAMES.slice(3));
    assert.equal(line.size, 1);
    assert.equal(line.oldest()?.name, NAMES[2]);
    assert.equal(line.removeHeir(12), false, "no heir behind the last one");
  });

  it("keeps a key that only looks like an in-order key as the key it is", () => {
    const odd = { key: `${dir}/${"7".repeat(20)}`, name: "odd", createdIndex: 3 };
    const line = new V2OlderMembers(dir, [odd, members[0]!], 5);
    assert.equal(line.oldest()?.key, odd.key);
    line.removeOldest(3);
    assert.equal(line.oldest()?.key, key(10));
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
});
