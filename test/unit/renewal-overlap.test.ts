// Two renewals of one membership on their way at once (renewNow's while
// another is out, as a new leader proves its membership alive): the one
// sent later may be answered first. The earlier one's answer is then older
// than the newest confirmed send, and still a good answer: it is judged
// against what was confirmed when it was asked for. An etcd session's
// shared keep-alive made this happen under load.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { ElectionBackend, Membership, Renewed } from "../../src/contract/backend";
import { Renewal } from "../../src/election/renewal";
import { resolveOptions } from "../../src/election/options";
import { FakeClock } from "../kit/fake-clock";

interface Pending {
  sentAt: number;
  answer(): void;
}

function toyBackend(clock: FakeClock, pending: Pending[]): ElectionBackend<Membership> {
  return {
    description: "toy store",
    renew(): Promise<Renewed> {
      const sentAt = clock.now();
      return new Promise((resolve) => pending.push({ sentAt, answer: () => resolve({ sentAt }) }));
    },
  } as unknown as ElectionBackend<Membership>;
}

describe("renewals answered out of order", () => {
  it("the one sent first, answered last, is no broken answer, and the newest send stays the one counted from", async () => {
    const clock = new FakeClock();
    const pending: Pending[] = [];
    const failures: unknown[] = [];
    const renewed: number[] = [];
    const renewal = new Renewal(toyBackend(clock, pending), { id: "m" }, resolveOptions(10), clock, {
      renewed: (at) => renewed.push(at),
      failed: (error) => failures.push(error),
      lost: (error) => failures.push(error),
      recovered: () => undefined,
    });
    renewal.start(clock.now());
    await clock.advance(100);
    const first = renewal.renewNow(new AbortController().signal);
    await clock.advance(100);
    const second = renewal.renewNow(new AbortController().signal);
    await clock.advance(0);
    assert.equal(pending.length, 2, "both renewals are on their way");
    const [sentFirst, sentSecond] = pending.map((p) => p.sentAt);
    pending[1]!.answer();
    assert.equal(await second, sentSecond);
    pending[0]!.answer();
    assert.equal(await first, sentFirst);
    assert.deepEqual(failures, [], "no renewal was reported failed");
    assert.deepEqual(renewed, [sentSecond, sentFirst]);
    assert.equal(renewal.lastConfirmedSentAt, sentSecond, "the newest confirmed send is still the one counted from");
    renewal.stop();
  });
});
