// What every conformance case stands on: a fresh election on the target for
// each case, members made with the public etcdLeader.withBackend() and
// recorded (elected, unelected, leader, error), backends used on their own,
// and the test runner's hooks that stop and clean up all of it.
import { after, afterEach, before } from "node:test";
import type { Claim, ElectionBackend, Membership } from "../../../src/contract/backend";
import etcdLeader = require("../../../src/index");
import { EventRecorder } from "../../kit/event-recorder";
import { exitOrFail, waitFor, withDeadline } from "../../kit/waiting";
import { InterceptedBackend } from "./intercepted-backend";
import type { ConformanceTarget, StoreOperation, TargetElection } from "./target";

/** Short, so that expiry cases stay quick; long enough for renewals on a loaded machine. */
export const TTL_SECONDS = 2;
export const TTL_MS = TTL_SECONDS * 1_000;
/** A bound for what must happen eventually, far above what it takes, because the machine is shared. */
export const LIVENESS_MS = 10_000;

export const noLeader = () => undefined;

/** A member of the case's election, with what it reported (the kit's recorder), in the order it reported it. */
export class Member extends EventRecorder {
  constructor(
    readonly name: string,
    readonly election: etcdLeader.Election,
    readonly intercepted: InterceptedBackend,
  ) {
    super(election, name);
  }
}

export class Harness {
  private current: TargetElection | undefined;
  private readonly members: Member[] = [];
  private readonly intercepted: InterceptedBackend[] = [];
  private readonly claims: Array<{ backend: ElectionBackend; membership: Membership }> = [];
  private readonly endings: Array<() => void> = [];

  constructor(readonly target: ConformanceTarget) {}

  /** Registers the hooks that start the store, clean up after each case, and stop the store. Call inside the suite's describe. */
  hooks(): void {
    before(() => this.target.start());
    afterEach(() => this.cleanup());
    after(async () => {
      await this.target.stop();
      exitOrFail();
    });
  }

  /** `{ skip: reason }` for a case that needs an operation the target does not support. */
  needs(...operations: StoreOperation[]): { skip?: string } {
    const reasons = operations.flatMap((op) => {
      const reason = this.target.unsupported?.[op];
      return reason === undefined ? [] : [`${op} is not supported: ${reason}`];
    });
    return reasons.length > 0 ? { skip: reasons.join("; ") } : {};
  }

  /** The store's side of the case's election. */
  get store(): TargetElection {
    if (!this.current) throw new Error("no election yet: call harness.election() first");
    return this.current;
  }

  /** Starts the case's election: a fresh key on the target. */
  async election(label: string): Promise<TargetElection> {
    this.current = await this.target.election(label, TTL_SECONDS);
    return this.current;
  }

  /** A member on its own backend, not started yet. */
  async member(name: string): Promise<Member> {
    const intercepted = await this.backend(name);
    const member = new Member(name, etcdLeader.withBackend(intercepted.backend, name, { ttl: TTL_SECONDS }), intercepted);
    this.members.push(member);
    return member;
  }

  /** A member started and elected. */
  async leader(name: string): Promise<Member> {
    const member = await this.member(name);
    member.election.start();
    await waitFor(`${name} to lead`, LIVENESS_MS, () => member.election.isLeader());
    return member;
  }

  /** A member started that names `leader` as the leader. */
  async follower(name: string, leader: string): Promise<Member> {
    const member = await this.member(name);
    member.election.start();
    await waitFor(`${name} to follow ${leader}`, LIVENESS_MS, () => member.election.currentLeader() === leader);
    return member;
  }

  /** A backend for `name` with no election on it, wrapped so that the case can time its calls. */
  async backend(name: string): Promise<InterceptedBackend> {
    const intercepted = new InterceptedBackend(await this.store.backend(name));
    this.intercepted.push(intercepted);
    return intercepted;
  }

  /** On a queue-style store, a bare backend's place in line (given up after the case); undefined on a race-style one. */
  async join(backend: ElectionBackend): Promise<Claim | undefined> {
    const joined = await backend.join?.(AbortSignal.timeout(LIVENESS_MS));
    if (joined) this.claims.push({ backend, membership: joined.membership });
    return joined;
  }

  /** Drives a bare backend through the contract until it leads: join (queue-style stores) and await the turn. */
  async claim(backend: ElectionBackend): Promise<Claim> {
    const joined = await this.join(backend);
    const claim = await backend.awaitTurn(joined, noLeader, AbortSignal.timeout(LIVENESS_MS));
    if (!joined) this.claims.push({ backend, membership: claim.membership });
    return claim;
  }

  /** Runs `end` after the case, before the members leave (an observer's stop, an iterator's abort). */
  onCleanup(end: () => void): void {
    this.endings.push(end);
  }

  private async cleanup(): Promise<void> {
    for (const end of this.endings.splice(0)) end();
    for (const intercepted of this.intercepted.splice(0)) intercepted.openAll();
    const members = this.members.splice(0);
    await withDeadline(Promise.all(members.map((m) => m.election.leave())), LIVENESS_MS, "the members to leave");
    const claims = this.claims.splice(0);
    await Promise.all(claims.map(({ backend, membership }) => backend.leave(membership, AbortSignal.timeout(5_000)).catch(() => undefined)));
    await this.current?.cleanup();
    this.current = undefined;
  }
}
