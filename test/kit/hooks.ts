// Set-up and tear-down through node:test's own hooks, so that a test file (or
// a describe block) says what it needs in one line and cannot forget to stop
// it: an etcd for the file, clients on it, per-test cleanup steps, and the
// check that the process exits by itself once the last test is done.
//
//   const etcd = useEtcd();             // started before the first test, closed after the last
//   const nats = useNats();             // a nats-server and a connection to it, likewise
//   const clients = useStoreClients(etcd);
//   const cleanup = useCleanup();       // cleanup.push(() => election.leave()) runs after the test
//   exitWhenDone();
//
// Called at the top level they apply to the file; inside a describe, to that block.
import { after, afterEach, before } from "node:test";
import { startEtcd, type EtcdCluster, type EtcdServerOptions } from "./etcd-server";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { startNats, type NatsServer } from "./nats-server";
import { StoreClients } from "./store-clients";
import { exitOrFail, withDeadline } from "./waiting";

/** How long one cleanup step may take before it counts as failed (and the next one runs). */
const CLEANUP_STEP_MS = 8_000;

/**
 * An etcd started in a `before` hook and closed in an `after` hook. The value
 * returned stands for that cluster (it reads through to it), so it can be held
 * in a constant now and used once the tests run; using it before then throws.
 * `options` may be a function, for options (certificates) an earlier hook makes.
 */
export function useEtcd(options: EtcdServerOptions | (() => EtcdServerOptions) = {}): EtcdCluster {
  let cluster: EtcdCluster | undefined;
  before(async () => {
    cluster = await startEtcd(typeof options === "function" ? options() : options);
  });
  after(async () => {
    await cluster?.close();
    cluster = undefined;
  });
  return new Proxy({} as EtcdCluster, {
    get(_, property) {
      if (!cluster) throw new Error(`etcd is not running here (read .${String(property)} outside the tests of the block that used useEtcd())`);
      return Reflect.get(cluster, property, cluster);
    },
  });
}

/** A nats-server (with JetStream) and one connection to it, started in a `before` hook and closed in an `after` hook. */
export function useNats(): { readonly server: NatsServer; readonly connection: NatsConnection } {
  let server: NatsServer | undefined;
  let connection: NatsConnection | undefined;
  before(async () => {
    server = await startNats();
    connection = await connect({ servers: server.url });
  });
  after(async () => {
    await connection?.close();
    await server?.close();
    connection = undefined;
    server = undefined;
  });
  const running = <T>(value: T | undefined, what: string): T => {
    if (value === undefined) throw new Error(`the ${what} is not running here (read outside the tests of the block that used useNats())`);
    return value;
  };
  return {
    get server() {
      return running(server, "nats-server");
    },
    get connection() {
      return running(connection, "NATS connection");
    },
  };
}

/** Store clients on `etcd`, the etcd3 ones closed in an `after` hook. */
export function useStoreClients(etcd: EtcdCluster): StoreClients {
  const clients = new StoreClients(() => etcd.hostPorts);
  after(() => clients.closeAll());
  return clients;
}

export interface Cleanup {
  /** Runs `step` after the current test, newest step first. */
  push(step: () => unknown): void;
}

/**
 * Steps run in an `afterEach` hook, newest first, each bounded so that a stuck
 * one cannot hang the file; every step runs even if one before it failed, and
 * the first failure fails the test.
 */
export function useCleanup(): Cleanup {
  const steps: Array<() => unknown> = [];
  afterEach(async () => {
    const failures: unknown[] = [];
    while (steps.length > 0) {
      const step = steps.pop()!;
      try {
        await withDeadline(Promise.resolve().then(step), CLEANUP_STEP_MS, "cleanup step");
      } catch (err) {
        failures.push(err);
      }
    }
    if (failures.length > 0) throw failures[0];
  });
  return { push: (step) => void steps.push(step) };
}

/** Once every test of the file is done, the process must exit by itself (see exitOrFail). */
export function exitWhenDone(): void {
  after(() => exitOrFail());
}
