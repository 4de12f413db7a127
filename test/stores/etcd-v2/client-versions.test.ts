// etcd-leader 0.0.1 was written for node-etcd ^4; users may have any of 4.x to
// 7.x. Each major version's client runs the same election against a real etcd.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import etcdLeader from "../../../src/index";
import { useEtcd } from "../../kit/hooks";

const clients: Array<[string, new (hosts: string[]) => unknown]> = [
  ["node-etcd 4.2", require("node-etcd-v4")],
  ["node-etcd 5.1", require("node-etcd-v5")],
  ["node-etcd 6.0", require("node-etcd-v6")],
  ["node-etcd 7.0", require("node-etcd")],
];

type Election = etcdLeader.Election;
type Events = etcdLeader.ElectionEvents;

function once<E extends keyof Events>(election: Election, event: E, ms = 10_000): Promise<Parameters<Events[E]>> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no ${event} within ${ms} ms`)), ms);
    const listener = (...args: Parameters<Events[E]>) => {
      clearTimeout(timer);
      resolve(args);
    };
    election.once(event, listener as never);
  });
}

describe("node-etcd client versions", () => {
  const etcd = useEtcd();

  for (const [label, Etcd] of clients) {
    it(`elects, reports the leader and fails over with ${label}`, async () => {
      const key = `/versions/${label.replace(/\W/g, "")}`;
      const first = etcdLeader(new Etcd(etcd.hostPorts), key, "first", 2);
      const second = etcdLeader(new Etcd(etcd.hostPorts), key, "second", 2);
      try {
        const [token] = await once(first.start(), "elected");
        assert.equal(typeof token, "number");
        const leaderSeen = once(second, "leader");
        second.start();
        assert.deepEqual(await leaderSeen, ["first"]);
        const takeover = once(second, "elected");
        await first.leave();
        const [nextToken] = await takeover;
        assert.ok(nextToken > token, `token ${nextToken} after ${token}`);
      } finally {
        await Promise.all([first.leave(), second.leave()]);
      }
    });
  }
});
