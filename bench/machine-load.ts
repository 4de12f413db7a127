// How busy the machine was with work that is not the benchmark's: the CPU
// time all processes used (/proc/stat) minus the CPU time of this process,
// its children (etcd, the member processes) and the children it has reaped.
// Other people's builds and tests on a shared machine slow the members and
// etcd down; the report says by how much the machine was taken.
import { readdirSync, readFileSync } from "node:fs";
import { availableParallelism } from "node:os";

const TICKS_PER_SECOND = 100; // USER_HZ on Linux

interface Sample {
  at: number;
  totalBusy: number;
  ours: number;
}

function machineBusyTicks(): number {
  const line = readFileSync("/proc/stat", "utf8").split("\n")[0]!;
  const [, user, nice, system, , , irq, softirq, steal] = line.trim().split(/\s+/).map(Number);
  return user! + nice! + system! + irq! + softirq! + steal!;
}

/** utime + stime (+ the reaped children's cutime + cstime) of one process, in ticks; 0 if it is gone. */
function processTicks(pid: number, withChildren: boolean): number {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    // fields[0] is the state (field 3); utime is field 14, stime 15, cutime 16, cstime 17.
    const utime = Number(fields[11]);
    const stime = Number(fields[12]);
    const cutime = Number(fields[13]);
    const cstime = Number(fields[14]);
    return utime + stime + (withChildren ? cutime + cstime : 0);
  } catch {
    return 0;
  }
}

function childrenOf(parent: number): number[] {
  const out: number[] = [];
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, "utf8");
      const ppid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
      if (ppid === parent) out.push(Number(entry));
    } catch {
      // gone meanwhile
    }
  }
  return out;
}

function sample(): Sample {
  let ours = processTicks(process.pid, true);
  for (const child of childrenOf(process.pid)) ours += processTicks(child, true);
  return { at: Date.now(), totalBusy: machineBusyTicks(), ours };
}

export class MachineLoad {
  private last: Sample | undefined;

  constructor() {
    try {
      this.last = sample();
    } catch {
      this.last = undefined; // not Linux: nothing to report
    }
  }

  /** Percent of the machine's CPUs that other processes used since the previous call (undefined where /proc is missing). */
  othersSinceLast(): number | undefined {
    if (!this.last) return undefined;
    const now = sample();
    const seconds = (now.at - this.last.at) / 1000;
    const others = Math.max(0, now.totalBusy - this.last.totalBusy - (now.ours - this.last.ours)) / TICKS_PER_SECOND;
    this.last = now;
    return seconds > 0 ? (100 * others) / seconds / availableParallelism() : undefined;
  }
}
