import { test, describe, before, after } from "node:test";
import assert from "node:assert/strict";
import { createServer, connect, type Server, type Socket } from "node:net";
import { request } from "node:http";
import { randomBytes } from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";
import { FaultProxy } from "./fault-proxy";
import { freePort } from "./free-port";
import { startEtcd, type EtcdCluster } from "./etcd-server";
import { waitFor } from "./waiting";

/** An echo server; with a tag it prefixes every reply so tests can tell servers apart. */
async function startEcho(tag = ""): Promise<{ server: Server; hostPort: string; sockets: Set<Socket>; close(): Promise<void> }> {
  const sockets = new Set<Socket>();
  const server = createServer((socket) => {
    sockets.add(socket);
    socket.on("close", () => sockets.delete(socket));
    socket.on("error", () => {});
    socket.on("data", (chunk) => socket.write(tag ? Buffer.concat([Buffer.from(tag), chunk]) : chunk));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as { port: number };
  return {
    server,
    sockets,
    hostPort: `127.0.0.1:${port}`,
    close: async () => {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** A client socket that records what it receives, how it ended, and any error. */
class Client {
  readonly socket: Socket;
  private received = Buffer.alloc(0);
  error: NodeJS.ErrnoException | undefined;
  closed = false;
  readonly connected: Promise<void>;

  constructor(hostPort: string) {
    const [host, port] = hostPort.split(":");
    this.socket = connect({ host: host!, port: Number(port) });
    this.connected = new Promise((resolve, reject) => {
      this.socket.once("connect", resolve);
      this.socket.once("error", reject);
    });
    this.connected.catch(() => {});
    this.socket.on("data", (chunk: Buffer) => {
      this.received = Buffer.concat([this.received, chunk]);
    });
    this.socket.on("error", (err) => {
      this.error = err;
    });
    this.socket.on("close", () => {
      this.closed = true;
    });
  }

  get data(): Buffer {
    return this.received;
  }

  send(data: string | Buffer): void {
    this.socket.write(data);
  }

  /** Resolves once `condition` holds; rejects after timeoutMs, saying what arrived. */
  async until(condition: () => boolean, timeoutMs: number, what: string): Promise<void> {
    await waitFor(what, timeoutMs, condition, { detail: () => `received ${JSON.stringify(this.received.toString())}` });
  }

  async receive(length: number, timeoutMs = 2_000): Promise<Buffer> {
    await this.until(() => this.received.length >= length || this.closed, timeoutMs, `${length} bytes`);
    return this.received;
  }

  /** Nothing arrives and nothing fails for `ms`. */
  async staysSilent(ms: number): Promise<void> {
    const before = this.received.length;
    await sleep(ms);
    assert.equal(this.received.length, before, "bytes got through");
    assert.equal(this.error, undefined, "connection failed");
    assert.equal(this.closed, false, "connection closed");
  }

  async resetByPeer(timeoutMs = 2_000): Promise<void> {
    await this.until(() => this.closed, timeoutMs, "the connection to close");
    assert.equal(this.error?.code, "ECONNRESET", `expected ECONNRESET, got ${this.error?.code ?? "a clean close"}`);
  }

  destroy(): void {
    this.socket.destroy();
  }
}


describe("FaultProxy against an echo server", () => {
  let echo: Awaited<ReturnType<typeof startEcho>>;
  let proxy: FaultProxy;
  const clients: Client[] = [];
  const client = (): Client => {
    const c = new Client(proxy.hostPort);
    clients.push(c);
    return c;
  };

  before(async () => {
    echo = await startEcho();
  });
  after(async () => {
    await echo.close();
  });

  // Each test gets a fresh proxy so that one test's mode cannot leak into the next.
  const withProxy = (name: string, body: () => Promise<void>): void => {
    test(name, async () => {
      proxy = await FaultProxy.start({ upstream: echo.hostPort });
      try {
        await body();
      } finally {
        for (const c of clients.splice(0)) c.destroy();
        await proxy.close();
      }
    });
  };

  withProxy("pass forwards both ways and counts bytes and connections", async () => {
    assert.match(proxy.hostPort, /^127\.0\.0\.1:\d+$/);
    const c = client();
    c.send("hello");
    assert.equal((await c.receive(5)).toString(), "hello");
    assert.equal(proxy.connectionCount, 1);
    assert.equal(proxy.bytesForwarded, 10);
    c.socket.end();
    await waitFor("the connection to be forgotten", 2_000, () => proxy.connectionCount === 0);
  });

  withProxy("a FIN from the client travels through", async () => {
    const c = client();
    await c.connected;
    c.socket.end();
    // The echo server closes its side on our FIN; that FIN must come back through the proxy.
    await c.until(() => c.closed, 2_000, "the close");
    assert.equal(c.error, undefined);
  });

  withProxy("delay adds latency each way and keeps the byte order", async () => {
    const c = client();
    await c.connected;
    proxy.setMode({ delayMs: 150 });
    const started = Date.now();
    c.send("ping");
    await c.receive(4);
    const elapsed = Date.now() - started;
    assert.ok(elapsed >= 290, `round trip took ${elapsed} ms, expected >= 300`);
    assert.ok(elapsed < 1_000, `round trip took ${elapsed} ms`);

    // Half the payload goes in during the delay, half after switching back to
    // pass: the delayed half must still arrive first.
    const payload = randomBytes(2 * 1024 * 1024);
    c.send(payload.subarray(0, payload.length / 2));
    await sleep(20);
    proxy.setMode("pass");
    c.send(payload.subarray(payload.length / 2));
    const received = await c.receive(4 + payload.length, 5_000);
    assert.ok(received.subarray(4).equals(payload), "bytes arrived reordered or altered");
  });

  withProxy("silence-existing stops open connections without closing them; new ones pass; heal resets the hurt ones", async () => {
    const old = client();
    old.send("a");
    await old.receive(1);
    const idle = client();
    await idle.connected;
    await waitFor("both connections accepted", 2_000, () => proxy.connectionCount === 2);
    proxy.setMode("silence-existing");
    old.send("b");
    await old.staysSilent(300);
    const fresh = client();
    fresh.send("c");
    assert.equal((await fresh.receive(1)).toString(), "c");
    proxy.heal();
    await old.resetByPeer();
    idle.send("d");
    assert.equal((await idle.receive(1)).toString(), "d", "a connection that carried nothing while silent resumes");
  });

  withProxy("blackhole keeps connections open and silent; heal resets the ones that lost bytes", async () => {
    const talker = client();
    talker.send("a");
    await talker.receive(1);
    const idle = client();
    await idle.connected;
    idle.send("b");
    await idle.receive(1);

    proxy.setMode("blackhole");
    talker.send("lost");
    const newcomer = client();
    await newcomer.connected; // the connect itself succeeds: the proxy accepted it
    const newTalker = client();
    newTalker.send("lost too");
    await Promise.all([talker.staysSilent(300), newcomer.staysSilent(0), idle.staysSilent(0), newTalker.staysSilent(0)]);
    assert.equal(proxy.connectionCount, 4);
    assert.ok(proxy.bytesDropped >= "lost".length + "lost too".length);

    proxy.heal();
    assert.equal(proxy.mode, "pass");
    await talker.resetByPeer();
    await newTalker.resetByPeer();
    // Connections that carried nothing during the partition come through it whole.
    idle.send("c");
    assert.equal((await idle.receive(2)).toString(), "bc");
    newcomer.send("d");
    assert.equal((await newcomer.receive(1)).toString(), "d");
    const fresh = client();
    fresh.send("e");
    assert.equal((await fresh.receive(1)).toString(), "e");
  });

  withProxy("blackhole swallows bytes that were still waiting out a delay", async () => {
    const c = client();
    await c.connected;
    proxy.setMode({ delayMs: 300 });
    c.send("in flight");
    await sleep(50);
    proxy.setMode("blackhole");
    await c.staysSilent(400);
    proxy.heal();
    await c.resetByPeer();
  });

  withProxy("blackhole hides a hang-up on either side until the heal", async () => {
    const c = client();
    c.send("x");
    await c.receive(1);
    proxy.setMode("blackhole");
    for (const upstreamSide of echo.sockets) upstreamSide.end();
    await c.staysSilent(200);
    proxy.heal();
    await c.resetByPeer();

    const leaving = client();
    leaving.send("y");
    await leaving.receive(1);
    const upstreamSockets = echo.sockets.size;
    proxy.setMode("blackhole");
    leaving.socket.end();
    await sleep(200);
    assert.equal(echo.sockets.size, upstreamSockets, "etcd's side heard the FIN through the partition");
    proxy.heal();
    await waitFor("the dangling upstream connection to be reset", 2_000, () => proxy.connectionCount === 0);
  });

  withProxy("reset kills existing and new connections with an RST until healed", async () => {
    const c = client();
    c.send("x");
    await c.receive(1);
    proxy.setMode("reset");
    await c.resetByPeer();
    const refused = client();
    await refused.resetByPeer();
    proxy.heal();
    const after = client();
    after.send("ok");
    assert.equal((await after.receive(2)).toString(), "ok");
  });

  test("setUpstream sends new connections elsewhere and leaves old ones be", async () => {
    const a = await startEcho("A:");
    const b = await startEcho("B:");
    const p = await FaultProxy.start({ upstream: a.hostPort });
    const old = new Client(p.hostPort);
    let fresh: Client | undefined;
    try {
      old.send("1");
      assert.equal((await old.receive(3)).toString(), "A:1");
      p.setUpstream(b.hostPort);
      assert.deepEqual(p.upstreams, [b.hostPort]);
      fresh = new Client(p.hostPort);
      fresh.send("2");
      assert.equal((await fresh.receive(3)).toString(), "B:2");
      old.send("3");
      assert.equal((await old.receive(6)).toString(), "A:1A:3");
      p.resetConnections();
      await old.resetByPeer();
    } finally {
      old.destroy();
      fresh?.destroy();
      await p.close();
      await a.close();
      await b.close();
    }
  });

  test("falls back to the next upstream when one refuses, and resets when all do", async () => {
    const live = await startEcho("live:");
    const dead = `127.0.0.1:${await freePort()}`;
    const p = await FaultProxy.start({ upstream: [dead, live.hostPort] });
    const clientsHere: Client[] = [];
    try {
      for (let i = 0; i < 2; i++) {
        const c = new Client(p.hostPort);
        clientsHere.push(c);
        c.send("x");
        assert.equal((await c.receive(6)).toString(), "live:x");
      }
      p.setUpstream(dead);
      const c = new Client(p.hostPort);
      clientsHere.push(c);
      await c.resetByPeer();
    } finally {
      for (const c of clientsHere) c.destroy();
      await p.close();
      await live.close();
    }
  });

  test("refuses upstreams off loopback and nonsense modes", async () => {
    await assert.rejects(FaultProxy.start({ upstream: "10.0.0.1:2379" }), /loopback/);
    await assert.rejects(FaultProxy.start({ upstream: [] }), /at least one/);
    const p = await FaultProxy.start({ upstream: echo.hostPort });
    try {
      assert.throws(() => p.setMode({ delayMs: -1 }), /bad delay/);
      assert.throws(() => p.setMode("drop" as never), /unknown mode/);
    } finally {
      await p.close();
    }
  });

  test("close leaves no socket or timer behind, whatever state connections are in", async () => {
    await sleep(50); // let handles closed by earlier tests finish closing
    const baseline = countResources();
    const p = await FaultProxy.start({ upstream: echo.hostPort });
    const delayed = new Client(p.hostPort);
    delayed.send("x");
    await delayed.receive(1);
    p.setMode({ delayMs: 10_000 });
    delayed.send("still queued at close");
    await sleep(50);
    p.setMode("blackhole");
    const silent = new Client(p.hostPort);
    await silent.connected;
    silent.send("dropped");
    await sleep(50);
    assert.ok(countResources().TCPSocketWrap! > (baseline.TCPSocketWrap ?? 0));

    await p.close();
    await Promise.all([delayed, silent].map((c) => c.until(() => c.closed, 2_000, "close")));
    await sleep(50); // the echo server's side of the connection closes on its own schedule
    assert.deepEqual(countResources(), baseline);
    assert.throws(() => p.setMode("pass"), /closed/);
  });
});

describe("FaultProxy in front of a real etcd", () => {
  let etcd: EtcdCluster;
  let proxy: FaultProxy;

  before(async () => {
    etcd = await startEtcd();
    proxy = await FaultProxy.start({ upstream: etcd.members[0]!.hostPort });
  });
  after(async () => {
    await proxy?.close();
    await etcd?.close();
  });

  const version = async (timeoutMs = 2_000): Promise<{ etcdserver: string }> => {
    const res = await fetch(`${proxy.url}/version`, { signal: AbortSignal.timeout(timeoutMs) });
    return (await res.json()) as { etcdserver: string };
  };

  test("pass: /version comes through", async () => {
    assert.match((await version()).etcdserver, /^3\.4\./);
  });

  test("blackhole: a request times out instead of failing, and works again after heal", async () => {
    await version(); // leave a kept-alive connection in the pool, as a real client would
    proxy.setMode("blackhole");
    const started = Date.now();
    await assert.rejects(version(500), (err: Error) => err.name === "TimeoutError");
    assert.ok(Date.now() - started >= 450, "the request failed before its deadline, so the blackhole was not silent");
    proxy.heal();
    assert.match((await version()).etcdserver, /^3\.4\./);
  });

  test("reset: a request fails with ECONNRESET; heal brings it back", async () => {
    proxy.setMode("reset");
    const code = await new Promise<string | undefined>((resolve) => {
      const req = request(`${proxy.url}/version`, { agent: false }, (res) => {
        res.resume();
        resolve("answered");
      });
      req.on("error", (err: NodeJS.ErrnoException) => resolve(err.code));
      req.end();
    });
    assert.equal(code, "ECONNRESET");
    proxy.heal();
    assert.match((await version()).etcdserver, /^3\.4\./);
  });

  test("delay: a request takes at least the round-trip latency", async () => {
    proxy.setMode({ delayMs: 200 });
    try {
      const started = Date.now();
      // A fresh connection pays for the delay on request and response.
      const res = await fetch(`${proxy.url}/version`, { signal: AbortSignal.timeout(3_000), headers: { connection: "close" } });
      await res.json();
      assert.ok(Date.now() - started >= 390, `took only ${Date.now() - started} ms`);
    } finally {
      proxy.heal();
    }
  });
});

function countResources(): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const kind of process.getActiveResourcesInfo()) {
    counts[kind] = (counts[kind] ?? 0) + 1;
  }
  return counts;
}
