// A backend may be built on a copy of this package other than the one the
// election runs on (a backend published as a package of its own, with its own
// etcd-leader): its MembershipLostError must still count as a lost
// membership, or the state machine would retry a membership that is gone as
// if the store had only been slow. The published build (dist) stands in for
// the other copy here; the tests run the sources.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import published = require("etcd-leader");
import { MembershipLostError, isMembershipLost } from "../../src/contract/errors";

describe("MembershipLostError across copies of the package", () => {
  it("one thrown by a backend built on another copy is a MembershipLostError to the election", () => {
    const foreign = new published.MembershipLostError("the key is gone");
    assert.ok(isMembershipLost(foreign));
    assert.ok(foreign instanceof MembershipLostError);
  });

  it("an error of another class is not one, whatever its message", () => {
    assert.equal(isMembershipLost(new Error("MembershipLostError")), false);
    assert.equal(new published.RequestTimeoutError("renew") instanceof MembershipLostError, false);
  });
});
