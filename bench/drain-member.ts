// One member of this library in a process of its own, running a whileLeading
// routine that takes a while to finish once its signal aborts: the drain
// scenario's member (bench/scenarios/drain.ts). It loads the built package
// (dist/), as users run it.
//
//   node bench/drain-member.js '{"store":"v3","hosts":["http://127.0.0.1:2379"],"key":"k","name":"a","ttl":2,"cleanupMs":300}'
//
// Prints one JSON line per event (member-protocol.ts's dialect): elected,
// leader, routine-start, routine-aborted, routine-settled, stop (when "stop"
// arrived on stdin and leave() was called), left (leave() resolved: the
// membership is gone), error. "exit" on stdin ends the process.
import { createInterface } from "node:readline";
import { encodeEvent } from "./member-protocol";

interface Config {
  store: "v2" | "v3" | "nats";
  hosts: string[];
  key: string;
  name: string;
  ttl: number;
  /** How long the routine takes to finish after its signal aborts. */
  cleanupMs: number;
}

type Election = import("../src/index").Election;

const config = JSON.parse(process.argv[2] ?? "null") as Config;
const at = () => performance.timeOrigin + performance.now();
const send = (type: string, fields: Record<string, unknown> = {}) => process.stdout.write(encodeEvent({ type, at: at(), ...fields }));

async function member(): Promise<{ election: Election; close(): Promise<void> }> {
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const etcdLeader = require("../dist/cjs/index.js") as typeof import("../src/index");
  const options = { ttl: config.ttl };
  if (config.store === "v2") {
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    const Etcd = require("node-etcd") as new (hosts: string[]) => unknown;
    return { election: etcdLeader(new Etcd(config.hosts), config.key, config.name, options), close: async () => undefined };
  }
  if (config.store === "v3") {
    const { Etcd3 } = await import("etcd3");
    const client = new Etcd3(etcdLeader.etcd3Options({ hosts: config.hosts }));
    return { election: etcdLeader({ client, key: config.key, name: config.name, ...options }), close: async () => client.close() };
  }
  const { connect } = await import("@nats-io/transport-node");
  const { Kvm } = await import("@nats-io/kv");
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const { natsLeader } = require("../dist/cjs/nats.js") as typeof import("../src/nats");
  const nc = await connect({ servers: config.hosts });
  const kv = await new Kvm(nc).create(`bench_drain_${config.ttl}s`, { ttl: config.ttl * 1000, history: 1 });
  return { election: await natsLeader(kv, config.key, config.name), close: () => nc.close() };
}

async function main(): Promise<void> {
  const { election, close } = await member();
  election.on("elected", (token) => send("elected", { token }));
  election.on("leader", (leader) => send("leader", { leader }));
  election.on("error", (err) => send("error", { message: err.message }));
  void election
    .whileLeading(({ signal }) =>
      new Promise<void>((resolve) => {
        send("routine-start");
        signal.addEventListener("abort", () => {
          send("routine-aborted", { reason: (signal.reason as Error)?.name });
          setTimeout(() => {
            send("routine-settled");
            resolve();
          }, config.cleanupMs);
        });
      }),
    )
    .catch(() => undefined);
  const lines = createInterface({ input: process.stdin });
  lines.on("line", (line) => {
    const op = line.trim();
    if (op === "stop") {
      send("stop");
      void election.leave().then(() => send("left"));
    } else if (op === "exit") {
      void election.leave().then(close).finally(() => process.exit(0));
    }
  });
  lines.on("close", () => void election.leave().then(close).finally(() => process.exit(0)));
}

main().catch((err: unknown) => {
  send("fatal", { message: (err as Error)?.message ?? String(err) });
  process.exit(1);
});
