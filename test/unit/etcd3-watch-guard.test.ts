// etcd3 1.1.x throws from its gRPC stream's data handler (an unhandled
// rejection, fatal by default) when etcd answers for a watch it no longer
// holds, as when etcd and this side cancel one watch at once. The guard makes
// such an answer a no-op. Checked on etcd3's own watch manager, no etcd needed:
// nothing is sent before a watch is created.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { Etcd3 } from "etcd3";
import { guardWatchManager } from "../../src/stores/etcd-v3/etcd3/watch-guard";

const strayAnswer = { watch_id: "4242", canceled: true, created: false, events: [] };

type WithManager = { watchManager: { handleResponse(res: object): void } };

describe("etcd3 watch guard", () => {
  it("etcd3 on its own throws on an answer for a watch it no longer holds", () => {
    const client = new Etcd3({ hosts: "127.0.0.1:9" });
    try {
      assert.throws(() => (client as unknown as WithManager).watchManager.handleResponse(strayAnswer), /Failed to find watcher/);
    } finally {
      client.close();
    }
  });

  it("with the guard, the answer is dropped, for a namespace too, and installing it twice changes nothing", () => {
    const client = new Etcd3({ hosts: "127.0.0.1:9" });
    try {
      const namespace = client.namespace("app/");
      for (const target of [client, namespace]) {
        guardWatchManager(target);
        guardWatchManager(target);
        (target as unknown as WithManager).watchManager.handleResponse(strayAnswer);
      }
    } finally {
      client.close();
    }
  });
});
