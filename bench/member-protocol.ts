// The JSON-line dialect of the benchmark's member host (bench/member-process.ts,
// many members per process, of any benchmarked library) and its driver
// (bench/host.ts). Its events mean what the library's events mean; the
// tests' members, `etcd-leader run --json` processes, report the same
// changes in the command's own format (read by test/kit/member-process.ts).
//
// Events, one JSON object per line on the program's stdout:
//   {"type":"elected","at":1700000000000.25,"name":"m3","token":12}
//   type  what happened
//   at    when, in milliseconds since the epoch (fractional where the clock has them)
//   name  which member, where a process hosts several; left out where it hosts one
//   ...   the event's own fields: a "leader" event names the leader it follows in
//         "leader", so that "name" always means the member that reports
// Commands, one JSON object per line on the program's stdin:
//   {"op":"stop","id":7,"name":"m3"}
//   op    what to do
//   id    present when the driver wants an answer: the program replies with
//         {"type":"reply","at":…,"id":7,"ok":true,...} or {..."ok":false,"error":"…"}
//   ...   the command's own arguments
//
// This file is also compiled into the benchmark's member processes
// (bench/compile.ts): it imports nothing.

/** A line a member program writes: one event, or a reply to a command. */
export interface EventLine {
  type: string;
  at: number;
  name?: string;
  [field: string]: unknown;
}

/** A line a member program reads: one command. */
export interface CommandLine {
  op: string;
  id?: number;
  [argument: string]: unknown;
}

/** The line (newline included) that carries `event`. */
export function encodeEvent(event: EventLine): string {
  return JSON.stringify(event) + "\n";
}

/** The line (newline included) that carries `command`. */
export function encodeCommand(command: CommandLine): string {
  return JSON.stringify(command) + "\n";
}

/** The event on `line`, or undefined for a line that is not one (a stray console.log, say). */
export function parseEvent(line: string): EventLine | undefined {
  const value = parseObject(line);
  return typeof value?.type === "string" && typeof value.at === "number" ? (value as EventLine) : undefined;
}

/** The command on `line`, or undefined for a blank line or one that is not a command. */
export function parseCommand(line: string): CommandLine | undefined {
  const value = parseObject(line);
  if (typeof value?.op !== "string") return undefined;
  if (value.id !== undefined && typeof value.id !== "number") return undefined;
  return value as CommandLine;
}

function parseObject(line: string): Record<string, unknown> | undefined {
  const text = line.trim();
  if (!text.startsWith("{")) return undefined;
  try {
    const value: unknown = JSON.parse(text);
    return typeof value === "object" && value !== null && !Array.isArray(value) ? (value as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}
