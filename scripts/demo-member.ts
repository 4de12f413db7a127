// One member of the demo election (scripts/demo.ts), in its own process.
//
// Usage: node --import tsx scripts/demo-member.ts '{"name":"alpha","key":"/demo/leader",
//        "ttl":2,"api":"v3","hosts":["http://127.0.0.1:2379"]}'
//
// Prints one JSON line per election event on stdout, each with the time it
// happened (`t`, Date.now()):
//   {"t":…,"name":"alpha","event":"joining"}
//   {"t":…,"name":"alpha","event":"elected","token":4}
//   {"t":…,"name":"alpha","event":"unelected"}
//   {"t":…,"name":"alpha","event":"leader","leader":"bravo"}
//   {"t":…,"name":"alpha","event":"error","message":"…"}
//   {"t":…,"name":"alpha","event":"left"}
// A line "leave" on stdin (or stdin closing) makes it leave the election and exit 0.
import { createInterface } from "node:readline";
import etcdLeader = require("../src/index");

interface MemberConfig {
  name: string;
  key: string;
  ttl: number;
  api: "v2" | "v3";
  /** host:port pairs for v2 (node-etcd), URLs for v3 (etcd3). */
  hosts: string[];
}

const config = JSON.parse(process.argv[2] ?? "null") as MemberConfig | null;
if (!config || !config.name || !config.key || !Array.isArray(config.hosts)) {
  process.stderr.write("usage: demo-member.ts '<json config>' (started by scripts/demo.ts)\n");
  process.exit(64);
}
const { name } = config;

function report(event: string, fields: Record<string, unknown> = {}): void {
  process.stdout.write(JSON.stringify({ t: Date.now(), name, event, ...fields }) + "\n");
}

function createClient(): unknown {
  if (config!.api === "v3") {
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    const { Etcd3 } = require("etcd3") as typeof import("etcd3");
    return new Etcd3(etcdLeader.etcd3Options({ hosts: config!.hosts }));
  }
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const Etcd = require("node-etcd") as new (hosts: string[]) => unknown;
  return new Etcd(config!.hosts);
}

const election = etcdLeader(createClient(), config.key, name, { ttl: config.ttl });

election.on("elected", (token) => report("elected", { token }));
election.on("unelected", () => report("unelected"));
election.on("leader", (leader) => report("leader", { leader }));
election.on("error", (err) => report("error", { message: err.message }));

let leaving = false;
async function leave(): Promise<void> {
  if (leaving) return;
  leaving = true;
  await election.leave();
  report("left");
  // Clients keep sockets (and, for etcd3, gRPC channels) open: exit explicitly.
  process.exit(0);
}

createInterface({ input: process.stdin }).on("line", (line) => {
  if (line.trim() === "leave") void leave();
});
// The parent went away: do not linger.
process.stdin.on("end", () => void leave());

election.start();
report("joining");
