// One gRPC channel for the services of an etcd3 client made with
// etcdLeader.etcd3Options(): the sharing and closing rules on a stand-in
// channel class, then a real client's KV, Lease and Watch calls against a
// real etcd, counted by the grpc-js channel they went through.
import assert from "node:assert/strict";
import { createRequire } from "node:module";
import { after, before, describe, it } from "node:test";
import { Etcd3 } from "etcd3";
import { sharedChannelFactory, type GrpcChannel } from "../../../src/stores/etcd-v3/etcd3/shared-channel";
import etcdLeader from "../../../src/index";
import { startEtcd, type EtcdCluster } from "../../kit/etcd-server";
import { waitFor } from "../../kit/waiting";

class StandInChannel implements GrpcChannel {
  static made: StandInChannel[] = [];
  closes = 0;
  constructor(readonly target: string) {
    StandInChannel.made.push(this);
  }
  close(): void {
    this.closes++;
  }
  getTarget(): string {
    return this.target;
  }
  getConnectivityState(): unknown {
    return "IDLE";
  }
  watchConnectivityState(): void {}
  getChannelzRef(): unknown {
    return undefined;
  }
  createCall(...args: unknown[]): unknown {
    return { channel: this, args };
  }
}

describe("sharedChannelFactory", () => {
  const credentials = {};
  const fresh = () => {
    StandInChannel.made = [];
    return sharedChannelFactory(StandInChannel);
  };

  it("gives the clients of one target and one credentials object one channel, and other targets or credentials their own", () => {
    const factory = fresh();
    const [kv, lease, watch] = [1, 2, 3].map(() => factory("etcd:2379", credentials, {}));
    assert.equal(StandInChannel.made.length, 1);
    for (const handle of [kv!, lease!, watch!]) {
      assert.deepEqual(handle.createCall("/m"), { channel: StandInChannel.made[0], args: ["/m"] });
      assert.equal(handle.getTarget(), "etcd:2379");
    }
    factory("other:2379", credentials, {});
    factory("etcd:2379", {}, {});
    assert.equal(StandInChannel.made.length, 3);
  });

  it("closes the channel when its last user closes it, once however often each one does", () => {
    const factory = fresh();
    const [a, b] = [factory("t", credentials, {}), factory("t", credentials, {})];
    a.close();
    a.close();
    assert.equal(StandInChannel.made[0]!.closes, 0, "b still uses it");
    b.close();
    assert.equal(StandInChannel.made[0]!.closes, 1);
  });

  it("once a user has closed the channel (etcd3 starting its services afresh), later clients get a new one", () => {
    const factory = fresh();
    const old = [factory("t", credentials, {}), factory("t", credentials, {})];
    old[0]!.close();
    const renewed = factory("t", credentials, {});
    assert.equal(StandInChannel.made.length, 2);
    assert.equal((renewed.createCall() as { channel: StandInChannel }).channel, StandInChannel.made[1]);
    // The old one's last user still reaches it, and lets it go.
    assert.equal((old[1]!.createCall() as { channel: StandInChannel }).channel, StandInChannel.made[0]);
    old[1]!.close();
    assert.equal(StandInChannel.made[0]!.closes, 1);
    assert.equal(StandInChannel.made[1]!.closes, 0);
  });
});

describe("an etcd3 client made with etcdLeader.etcd3Options()", () => {
  let cluster: EtcdCluster;
  before(async () => {
    cluster = await startEtcd({ enableV2: false });
  });
  after(async () => {
    await cluster?.close();
  });

  let elections = 0;

  /** The grpc-js channels that carried the calls of an election of two members on `client`, and the services called. */
  async function channelsUsedBy(client: Etcd3): Promise<{ channels: number; services: string[] }> {
    // The grpc-js etcd3 itself loads, whose channels carry its calls.
    const grpc = createRequire(require.resolve("etcd3"))("@grpc/grpc-js") as {
      Channel: { prototype: { createCall(method: string, ...rest: unknown[]): unknown } };
    };
    const channels = new Set<unknown>();
    const services = new Set<string>();
    const createCall = grpc.Channel.prototype.createCall;
    grpc.Channel.prototype.createCall = function (this: unknown, method: string, ...rest: unknown[]) {
      channels.add(this);
      services.add(method.split("/")[1]!);
      return createCall.call(this, method, ...rest);
    };
    try {
      const key = `/shared-channel/${++elections}`;
      const [a, b] = ["a", "b"].map((name) => etcdLeader(client, key, name, 2));
      a!.start();
      await waitFor("a to lead", 10_000, () => a!.isLeader());
      b!.start();
      await waitFor("b to follow a", 10_000, () => b!.currentLeader() === "a");
      await a!.leave();
      await waitFor("b to lead", 10_000, () => b!.isLeader());
      await b!.leave();
    } finally {
      grpc.Channel.prototype.createCall = createCall;
      client.close();
    }
    return { channels: channels.size, services: [...services].sort() };
  }

  it("calls KV, Lease and Watch through one grpc-js channel, where etcd3's defaults use one for each", { timeout: 30_000 }, async () => {
    const all = ["etcdserverpb.KV", "etcdserverpb.Lease", "etcdserverpb.Watch"];
    assert.deepEqual(await channelsUsedBy(new Etcd3({ hosts: cluster.hostPorts })), { channels: 3, services: all });
    assert.deepEqual(await channelsUsedBy(new Etcd3(etcdLeader.etcd3Options({ hosts: cluster.hostPorts }))), { channels: 1, services: all });
  });
});
