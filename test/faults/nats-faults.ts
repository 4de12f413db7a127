// Things done from outside to the NATS KV bucket an election lives in: the
// leader's key purged (a purge marker instead of a delete marker), and the
// whole bucket deleted and made again, which restarts its revisions.
import { EXTERNAL_DELETE_OVERLAP_MS } from "./store-faults";
import type { Scenario } from "./types";

const NATS_ONLY = "NATS KV only";
const NOT_NATS = { v2: NATS_ONLY, v3: NATS_ONLY, postgres: NATS_ONLY, redis: NATS_ONLY };

export const natsKeyPurge: Scenario = {
  id: "nats-key-purge",
  notFor: NOT_NATS,
  allowedOverlapMs: EXTERNAL_DELETE_OVERLAP_MS,
  title:
    "the leader's key is purged from outside (`nats kv purge`): every member sees the purge marker, the leader " +
    `steps down, a member is elected with a larger token, the two overlap by at most ${EXTERNAL_DELETE_OVERLAP_MS} ms`,
  async run(c) {
    const leader = c.leader;
    const faultAt = c.mark(`purge ${leader.name}'s key from outside`);
    await c.natsAdmin.purgeKey(c.key);
    const next = await c.waitForElection(c.members, faultAt);
    const stepDown = await c.waitForEvent(leader, (e) => e.event === "unelected", faultAt, c.recoveryBoundMs, "step down");
    c.figure("stepDownAfterPurgeMs", stepDown.at - faultAt);
    c.figure("electedAfterPurgeMs", next.event.at - faultAt);
    return { faultAt, healedAt: faultAt, reelection: "required" };
  },
};

/** How long the bucket stays deleted before it is made again. */
const BUCKET_GONE_MS = 500;

export const natsBucketRecreate: Scenario = {
  id: "nats-bucket-recreate",
  notFor: NOT_NATS,
  title:
    `the bucket is deleted (\`nats kv rm\`) and made again ${BUCKET_GONE_MS} ms later, empty, with the same TTL: the ` +
    "leader steps down at its next renewal (the key is gone), the members take the new bucket's key within TTL + 2 s " +
    "of its making, and nobody leads twice at once. Its revisions start again at 1, so the tokens do too (the one " +
    "place they go backwards; the README says so)",
  async run(c) {
    const leader = c.leader;
    const lastRevision = await c.natsAdmin.lastRevision();
    const faultAt = c.mark(`delete the bucket (last revision ${lastRevision})`);
    await c.natsAdmin.deleteBucket();
    await c.sleep(BUCKET_GONE_MS);
    const madeAt = c.mark("make the bucket again");
    await c.natsAdmin.createBucket();
    const stepDown = await c.waitForEvent(leader, (e) => e.event === "unelected", faultAt, c.recoveryBoundMs, "step down");
    c.figure("stepDownAfterDeleteMs", stepDown.at - faultAt);
    const next = await c.waitForElection(c.members, madeAt);
    c.figure("electedAfterRemakeMs", next.event.at - madeAt);
    if (next.event.event === "elected") {
      c.check(next.event.value <= lastRevision, `the token after the remake (${next.event.value}) did not restart`);
      c.figure("tokenAfterRemake", next.event.value);
    }
    return { faultAt, healedAt: madeAt, reelection: "required", tokensRestartAt: madeAt };
  },
};
