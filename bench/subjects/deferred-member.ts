// A member of this library whose election is made asynchronously (the
// NATS, PostgreSQL and Redis entries are async: they make a bucket, a table
// or read the server's settings first). Commands that arrive before it is
// made are kept and applied once it is.
import type { Election } from "../../src/election/election";
import type { Member, MemberListener } from "./types";

export class DeferredMember implements Member {
  private election: Election | undefined;
  private wanted: "start" | "stop" | undefined;
  private readonly ready: Promise<void>;

  /**
   * `make` makes the member's election on its own client; `release` closes
   * that client once the member has left.
   */
  constructor(
    readonly name: string,
    listener: MemberListener,
    make: () => Promise<Election>,
    private readonly release: () => Promise<void>,
  ) {
    this.ready = make().then(
      (election) => {
        election.on("elected", (token) => listener.elected(token));
        election.on("unelected", () => listener.unelected("unelected"));
        election.on("leader", (leader) => listener.leader(leader));
        election.on("error", (err) => listener.error(err.message));
        this.election = election;
        if (this.wanted === "start") election.start();
      },
      (err: unknown) => listener.error(`could not join: ${(err as Error).message}`),
    );
  }

  start(): void {
    this.wanted = "start";
    this.election?.start();
  }

  stop(): void {
    this.wanted = "stop";
    this.election?.stop();
  }

  async close(): Promise<void> {
    await this.ready;
    await this.election?.leave();
    await this.release().catch(() => undefined);
  }

  isLeader(): boolean {
    return this.election?.isLeader() ?? false;
  }

  isRunning(): boolean {
    return this.wanted === "start" && (this.election?.isRunning() ?? true);
  }
}
