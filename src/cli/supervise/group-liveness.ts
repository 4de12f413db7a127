// Whether a process group still has a process that runs. The CLI and the
// orphan guard ask this while they stop a group, and while a group lives on
// after its first process exited: a group is gone when no process of it is
// left, not when its leader exits (a shell's children outlive it).
//
// `kill(-pgid, 0)` alone cannot tell: a zombie is still a member of its group,
// and a process whose parent died is reparented to PID 1, which in many
// containers is not an init that reaps orphans, so its zombie stays for good
// and the group would look alive for ever. On Linux, /proc tells a zombie
// from a process that runs; elsewhere the signal probe is all there is.
import { readdirSync, readFileSync } from "node:fs";

/** True while a process of group `pgid` other than a zombie is left. */
export function groupIsAlive(pgid: number): boolean {
  try {
    process.kill(-pgid, 0);
  } catch (err) {
    // EPERM: a process of the group runs as another user; it is alive all the same.
    if ((err as NodeJS.ErrnoException).code !== "EPERM") return false;
  }
  if (process.platform !== "linux") return true;
  let entries: string[];
  try {
    entries = readdirSync("/proc");
  } catch {
    return true;
  }
  for (const entry of entries) {
    const first = entry.charCodeAt(0);
    if (first < 48 || first > 57) continue;
    const member = readStat(entry);
    if (member && member.pgrp === pgid && member.state !== "Z" && member.state !== "X") return true;
  }
  return false;
}

/** The state and process group of process `pid`, from /proc/<pid>/stat; undefined once it is gone. */
function readStat(pid: string): { state: string; pgrp: number } | undefined {
  let stat: string;
  try {
    stat = readFileSync(`/proc/${pid}/stat`, "latin1");
  } catch {
    return undefined;
  }
  // "pid (comm) state ppid pgrp ...": comm may hold spaces and parentheses, so
  // the fields start after the last ')'.
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return { state: fields[0] ?? "", pgrp: Number(fields[2]) };
}
