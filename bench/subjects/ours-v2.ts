// This library on etcd's v2 API, through node-etcd.
import etcdLeader = require("../../src/index");
import { SUBJECTS } from "./info";
import { nodeEtcdClients, V2_CLIENT_NOTE } from "./node-etcd";
import type { Member, MemberListener, MemberSpec, Subject, SubjectRuntime } from "./types";

export const oursV2: Subject = {
  ...SUBJECTS.find((s) => s.id === "ours-v2")!,
  runtime(hosts: string[]): SubjectRuntime {
    const client = nodeEtcdClients();
    return {
      clientNote: V2_CLIENT_NOTE,
      member(spec: MemberSpec, listener: MemberListener): Member {
        return OursMember.on(client(spec.hosts ?? hosts), spec, listener);
      },
      async close() {},
    };
  },
};

/** A member of this library's election: on whichever client it is given (v2 or v3), or on a session. */
export class OursMember implements Member {
  private started = false;

  /** A member on `client`, with an election of its own. */
  static on(client: unknown, spec: MemberSpec, listener: MemberListener, onClose?: () => Promise<void>): OursMember {
    return new OursMember(etcdLeader(client, spec.key, spec.name, spec.ttl), spec.name, listener, onClose);
  }

  constructor(
    private readonly election: etcdLeader.Election,
    readonly name: string,
    listener: MemberListener,
    private readonly onClose?: () => Promise<void>,
  ) {
    this.election.on("elected", (token) => listener.elected(token));
    this.election.on("unelected", () => listener.unelected("unelected"));
    this.election.on("leader", (name) => listener.leader(name));
    this.election.on("error", (err) => listener.error(err.message));
  }

  start(): void {
    this.started = true;
    this.election.start();
  }

  stop(): void {
    this.election.stop();
  }

  async close(): Promise<void> {
    await this.election.leave();
    await this.onClose?.();
  }

  isLeader(): boolean {
    return this.election.isLeader();
  }

  isRunning(): boolean {
    return this.started && this.election.isRunning();
  }
}
