// The drain before release: a leader running a whileLeading routine is told
// to leave (election.leave()) while a member in another process waits with a
// routine of its own. Per trial, times from the leave() call: the routine's
// signal aborted, the routine settled (it takes a random 50 to 500 ms to
// finish, as a flush or a lock release would), leave() resolved (the
// membership is gone), the successor elected, the successor's routine
// started; and whether the two routines ever ran at once. Each member is a
// process of its own (bench/drain-member.ts) on the built package.
import { spawn, type ChildProcess } from "node:child_process";
import { createInterface } from "node:readline";
import { join } from "node:path";
import { storeHosts, type BenchContext } from "../context";
import { parseEvent, type EventLine } from "../member-protocol";
import type { SubjectInfo } from "../subjects/types";
import { errorMessage, tag, uniform, withDeadline } from "../util";

export interface DrainTrial {
  cleanupMs: number;
  /** From leave() on: the routine's signal aborted, the routine settled, leave() resolved, the successor elected, its routine started. */
  abortedMs: number;
  settledMs: number;
  goneMs: number;
  electedMs: number;
  successorRoutineMs: number;
  /** How long the two routines ran at once: 0 unless the successor's started before ours settled. */
  overlapMs: number;
}

export interface DrainRun {
  subject: string;
  ttl: number;
  trials: DrainTrial[];
  failures: string[];
}

const STEP_MS = 15_000;
const MEMBER = join(__dirname, "..", "drain-member.ts");

/** A member process, its events as they come. */
class DrainMember {
  readonly events: EventLine[] = [];
  private readonly child: ChildProcess;
  private readonly waiters = new Set<() => void>();

  constructor(config: object) {
    this.child = spawn(process.execPath, ["--import", "tsx", MEMBER, JSON.stringify(config)], {
      cwd: join(__dirname, "..", ".."),
      stdio: ["pipe", "pipe", "inherit"],
    });
    createInterface({ input: this.child.stdout! }).on("line", (line) => {
      const event = parseEvent(line);
      if (!event) return;
      this.events.push(event);
      for (const wake of [...this.waiters]) wake();
    });
    this.child.on("exit", () => {
      for (const wake of [...this.waiters]) wake();
    });
  }

  /** The first event of `type`, waiting up to STEP_MS for it. */
  next(type: string): Promise<EventLine> {
    return withDeadline(
      new Promise<EventLine>((resolve, reject) => {
        const check = () => {
          const found = this.events.find((e) => e.type === type);
          if (found) {
            this.waiters.delete(check);
            return resolve(found);
          }
          if (this.child.exitCode !== null) {
            this.waiters.delete(check);
            reject(new Error(`the member exited before its "${type}"`));
          }
        };
        this.waiters.add(check);
        check();
      }),
      STEP_MS,
      `a member's "${type}"`,
    );
  }

  send(op: string): void {
    this.child.stdin!.write(`${op}\n`);
  }

  async close(): Promise<void> {
    if (this.child.exitCode !== null) return;
    const exited = new Promise((resolve) => this.child.once("exit", resolve));
    this.send("exit");
    await Promise.race([exited, new Promise((resolve) => setTimeout(resolve, 5_000))]);
    if (this.child.exitCode === null) this.child.kill("SIGKILL");
  }
}

export async function runDrain(ctx: BenchContext, subject: SubjectInfo): Promise<DrainRun> {
  const { ttl } = ctx.params;
  const run: DrainRun = { subject: subject.id, ttl, trials: [], failures: [] };
  const store = subject.api;
  for (let i = 0; i < ctx.params.drain.trials; i++) {
    const key = subject.electionKey(`drain/${i}-${tag()}`);
    const cleanupMs = Math.round(uniform(50, 500));
    const hosts = storeHosts(ctx, subject);
    const leader = new DrainMember({ store, hosts, key, name: "a", ttl, cleanupMs });
    let successor: DrainMember | undefined;
    try {
      await leader.next("routine-start");
      successor = new DrainMember({ store, hosts, key, name: "b", ttl, cleanupMs: 50 });
      await successor.next("leader");
      const stop = leader.next("stop");
      leader.send("stop");
      const t0 = (await stop).at;
      const [aborted, settled, gone, elected, started] = await Promise.all([
        leader.next("routine-aborted"),
        leader.next("routine-settled"),
        leader.next("left"),
        successor.next("elected"),
        successor.next("routine-start"),
      ]);
      run.trials.push({
        cleanupMs,
        abortedMs: aborted.at - t0,
        settledMs: settled.at - t0,
        goneMs: gone.at - t0,
        electedMs: elected.at - t0,
        successorRoutineMs: started.at - t0,
        overlapMs: Math.max(0, settled.at - started.at),
      });
    } catch (err) {
      run.failures.push(`trial ${i + 1}: ${errorMessage(err)}`);
    } finally {
      await Promise.all([leader.close(), successor?.close()]);
    }
  }
  return run;
}
