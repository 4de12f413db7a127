// A process hosting election members of one subject, driven by the benchmark
// (bench/host.ts). Crash trials run one member per process and SIGKILL it;
// the other scenarios run three to a thousand members in one process.
// The tests' members in processes of their own are `etcd-leader run`
// commands; this one is a host of its own because it holds up to a thousand
// members per process, of any of the four benchmarked libraries
// (bench/subjects/), peers included, each driven through its library's API in
// the same way, so that what is measured is the library and not a wrapper
// only one of them has. It speaks a JSON-line dialect (bench/member-protocol.ts)
// and names the member in every event.
//
// Usage: node --expose-gc --import tsx bench/member-process.ts '<json>'
//   json: { "subject": "ours-v2", "hosts": ["http://127.0.0.1:2379"], "sampleMs": 5 }
//
// Commands, one JSON object per line on stdin, each with an `id` that the reply carries:
//   {"op":"init"}                                  create the shared client(s)
//   {"op":"add","members":[{"key","name","ttl","hosts"?}]}
//   {"op":"start","names":[...]?,"spreadMs":0}     start members, spread evenly over spreadMs
//   {"op":"stop","name":"m1"}                      graceful stop; the reply's `at` is when stop() was called
//   {"op":"close","names":[...]?}                  leave and forget members (bounded)
//   {"op":"stats","gc":true}                       memory and socket figures
//   {"op":"calls"}                                 etcd3 KV range calls made so far, by kind
//   {"op":"cpu"}                                   CPU time this process has used (ms)
//   {"op":"running"}                               each member's isRunning() and isLeader()
//   {"op":"release"}                               closes what the members share (a session: one revoke for all); `at` is when
//   {"op":"exit"}
// Output, one JSON object per line on stdout:
//   {"type":"ready","at"}                            once, when commands are taken
//   {"type":"reply","at","id","ok",…}                for start and stop, `at` is when they acted
//   {"type":"elected"|"unelected"|"leader"|"error"|"note","at","name",…}
//   {"type":"belief","at","name","on":true|false}    changes of isLeader(), from events and sampling
//   {"type":"fatal","at","message"}                  an uncaught error, just before exiting 70
// When stdin closes the process exits at once: it never outlives the benchmark.
import { loadSubject } from "./subjects/index";
import type { Member, MemberListener, MemberSpec, SubjectId, SubjectRuntime } from "./subjects/types";
import { errorMessage, now, socketCount, withDeadline } from "./util";
import { encodeEvent, parseCommand, type CommandLine, type EventLine } from "./member-protocol";

interface Config {
  subject: SubjectId;
  hosts: string[];
  sampleMs: number;
}

interface Hosted {
  member: Member;
  believed: boolean;
}

const config = JSON.parse(process.argv[2] ?? "null") as Config | null;
if (!config?.subject || !Array.isArray(config.hosts)) {
  process.stderr.write("usage: member-process.ts '<json config>' (started by bench/host.ts)\n");
  process.exit(64);
}

const sampleMs = config.sampleMs;
const subject = loadSubject(config.subject);
const members = new Map<string, Hosted>();
let runtime: SubjectRuntime | undefined;
const rangeCalls = { prefix: 0, point: 0 };

// Output goes out in batches: a thousand members can report in one tick.
let outBuffer: string[] = [];
let flushScheduled = false;
function send(event: EventLine): void {
  outBuffer.push(encodeEvent(event));
  if (!flushScheduled) {
    flushScheduled = true;
    setImmediate(() => {
      flushScheduled = false;
      const chunk = outBuffer.join("");
      outBuffer = [];
      process.stdout.write(chunk);
    });
  }
}

function believe(name: string, hosted: Hosted, on: boolean, t: number): void {
  if (hosted.believed === on) return;
  hosted.believed = on;
  send({ type: "belief", at: t, name, on });
}

function listenerFor(name: string): MemberListener {
  const hosted = () => members.get(name);
  return {
    elected(token) {
      const t = now();
      send({ type: "elected", at: t, name, token });
      const h = hosted();
      if (h) believe(name, h, h.member.isLeader(), t);
    },
    unelected(reason) {
      const t = now();
      send({ type: "unelected", at: t, name, reason });
      const h = hosted();
      if (h) believe(name, h, false, t);
    },
    leader(leader) {
      send({ type: "leader", at: now(), name, leader: leader ?? null });
    },
    error(message) {
      send({ type: "error", at: now(), name, message });
    },
    note(message) {
      send({ type: "note", at: now(), name, message });
    },
  };
}

function ensureRuntime(): SubjectRuntime {
  runtime ??= subject.runtime(config!.hosts);
  if (subject.api === "v3") countRangeCalls();
  return runtime;
}

let counting = false;
/** Counts etcd3 KV range calls by kind: over a prefix (a listing, for etcd) or of one key. */
function countRangeCalls(): void {
  if (counting) return;
  counting = true;
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const rpc = require("etcd3/lib/rpc") as { KVClient: { prototype: { range: (req: { range_end?: unknown }, ...rest: unknown[]) => unknown } } };
  const original = rpc.KVClient.prototype.range;
  rpc.KVClient.prototype.range = function (this: unknown, req, ...rest) {
    const end = req?.range_end;
    if (end !== undefined && end !== null && (end as { length?: number }).length !== 0) rangeCalls.prefix++;
    else rangeCalls.point++;
    return original.call(this, req, ...rest);
  };
}

// Beliefs are also sampled, so that a member whose isLeader() turns false
// without an event (a lease deadline passing) is seen within sampleMs. Only
// while there are members: a process waiting for its trial stays idle.
let sampler: NodeJS.Timeout | undefined;
function sampling(): void {
  if (members.size > 0 && !sampler) {
    sampler = setInterval(() => {
      const t = now();
      for (const [name, hosted] of members) believe(name, hosted, hosted.member.isLeader(), t);
    }, sampleMs);
  } else if (members.size === 0 && sampler) {
    clearInterval(sampler);
    sampler = undefined;
  }
}

async function handle(command: CommandLine): Promise<object> {
  switch (command.op) {
    case "init":
      return { note: ensureRuntime().clientNote };
    case "add": {
      const rt = ensureRuntime();
      for (const spec of command.members as MemberSpec[]) {
        if (members.has(spec.name)) throw new Error(`member ${spec.name} exists`);
        const member = rt.member(spec, listenerFor(spec.name));
        members.set(spec.name, { member, believed: false });
      }
      sampling();
      return {};
    }
    case "start": {
      const names = (command.names as string[] | undefined) ?? [...members.keys()];
      const spread = Number(command.spreadMs ?? 0);
      const t = now();
      if (spread <= 0) {
        for (const name of names) members.get(name)?.member.start();
      } else {
        names.forEach((name, i) => {
          setTimeout(() => members.get(name)?.member.start(), (spread * i) / names.length);
        });
      }
      return { at: t };
    }
    case "stop": {
      const hosted = members.get(command.name as string);
      if (!hosted) throw new Error(`no member ${String(command.name)}`);
      const t = now();
      hosted.member.stop();
      believe(command.name as string, hosted, hosted.member.isLeader(), now());
      return { at: t };
    }
    case "close": {
      const names = (command.names as string[] | undefined) ?? [...members.keys()];
      const closing = names.map(async (name) => {
        const hosted = members.get(name);
        if (!hosted) return;
        try {
          await withDeadline(hosted.member.close(), 5000, `closing ${name}`);
        } catch (err) {
          send({ type: "note", at: now(), name, message: `close: ${errorMessage(err)}` });
        }
        believe(name, hosted, false, now());
        members.delete(name);
      });
      await Promise.all(closing);
      sampling();
      return {};
    }
    case "stats": {
      if (command.gc && typeof global.gc === "function") {
        global.gc();
        global.gc();
      }
      const memory = process.memoryUsage();
      return {
        rss: memory.rss,
        heapUsed: memory.heapUsed,
        heapTotal: memory.heapTotal,
        external: memory.external,
        sockets: socketCount(),
        members: members.size,
      };
    }
    case "cpu": {
      const usage = process.cpuUsage();
      return { cpuMs: (usage.user + usage.system) / 1000 };
    }
    case "calls":
      return { ...rangeCalls };
    case "running": {
      const state: Record<string, { running: boolean; leader: boolean }> = {};
      for (const [name, hosted] of members) {
        state[name] = { running: hosted.member.isRunning(), leader: hosted.member.isLeader() };
      }
      return { state };
    }
    case "release": {
      const t = now();
      await withDeadline(ensureRuntime().close(), 15_000, "closing the shared client");
      return { at: t };
    }
    case "exit":
      shutdown(0);
      return {};
    default:
      throw new Error(`unknown op ${command.op}`);
  }
}

function shutdown(code: number): void {
  if (sampler) clearInterval(sampler);
  const flush = outBuffer.join("");
  outBuffer = [];
  if (flush) process.stdout.write(flush, () => process.exit(code));
  else process.exit(code);
}

let input = "";
process.stdin.setEncoding("utf8");
process.stdin.on("data", (chunk: string) => {
  input += chunk;
  let newline: number;
  while ((newline = input.indexOf("\n")) >= 0) {
    const line = input.slice(0, newline);
    input = input.slice(newline + 1);
    if (!line.trim()) continue;
    const command = parseCommand(line);
    // The benchmark only ever sends commands: anything else is a bug in it, and fatal.
    if (!command) throw new Error(`not a command: ${line}`);
    // A result's own `at` (when start or stop acted) stands in for the time of the reply.
    handle(command).then(
      (result) => send({ type: "reply", at: now(), id: command.id, ok: true, ...result }),
      (err: unknown) => send({ type: "reply", at: now(), id: command.id, ok: false, error: errorMessage(err) }),
    );
  }
});
// The benchmark went away: leave nothing behind.
process.stdin.on("end", () => process.exit(0));
// A subject that throws out of the event loop takes its process down, as it
// would an application's; the benchmark reports the exit and this message.
function fatal(kind: string, err: unknown): void {
  const message = err instanceof Error ? err.stack ?? err.message : String(err);
  process.stderr.write(`${kind}: ${message}\n`);
  send({ type: "fatal", at: now(), message: `${kind}: ${errorMessage(err)}` });
  shutdown(70);
}
process.on("uncaughtException", (err) => fatal("uncaught exception", err));
process.on("unhandledRejection", (err) => fatal("unhandled rejection", err));
send({ type: "ready", at: now() });
