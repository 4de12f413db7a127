// advisory-lock 2.0.0 used as an election: a member leads while it holds
// the PostgreSQL session advisory lock named after the election, taken with
// tryLock(); a member that did not get it tries again every TTL/2. The
// library opens a connection of its own for each try (and ends it when the
// try fails); the holder's connection keeps the lock until unlock(), or until
// the server sees that connection end (its process died). The API offers
// nothing to learn that the lock was lost, nor who holds it: no `leader`
// events, and a leader never steps down of its own accord.
import advisoryLock from "advisory-lock";
import { SUBJECTS } from "./info";
import type { Member, MemberListener, MemberSpec, Subject, SubjectRuntime } from "./types";

type Unlock = () => Promise<void>;

export const advisoryLockSubject: Subject = {
  ...SUBJECTS.find((s) => s.id === "advisory-lock")!,
  runtime(hosts: string[]): SubjectRuntime {
    return {
      clientNote: "advisory-lock's own pg.Client per try (connect, pg_try_advisory_lock, end unless taken); the holder keeps its connection",
      member: (spec, listener) => new AdvisoryLockMember((spec.hosts ?? hosts)[0]!, spec, listener),
      async close() {},
    };
  },
};

class AdvisoryLockMember implements Member {
  readonly name: string;
  private readonly mutex: ReturnType<ReturnType<typeof advisoryLock>>;
  private readonly retryMs: number;
  private started = false;
  private stopped = false;
  private unlock: Unlock | undefined;
  private timer: NodeJS.Timeout | undefined;
  /** The try in flight, if any: close() waits for it, so that no lock is taken after the member has left. */
  private trying: Promise<void> | undefined;
  private released: Promise<void> | undefined;

  constructor(url: string, spec: MemberSpec, private readonly listener: MemberListener) {
    this.name = spec.name;
    this.mutex = advisoryLock(url)(spec.key);
    this.retryMs = (spec.ttl * 1000) / 2;
  }

  start(): void {
    if (this.started) return;
    this.started = true;
    this.attempt();
  }

  stop(): void {
    if (this.stopped) return;
    this.stopped = true;
    clearTimeout(this.timer);
    const unlock = this.unlock;
    if (!unlock) return;
    this.unlock = undefined;
    this.listener.unelected("unlocked");
    this.released = unlock().catch((err: Error) => this.listener.error(`unlock: ${err.message}`));
  }

  async close(): Promise<void> {
    this.stop();
    await this.trying;
    await this.released;
  }

  isLeader(): boolean {
    return this.unlock !== undefined;
  }

  isRunning(): boolean {
    return this.started && !this.stopped;
  }

  private attempt(): void {
    this.trying = this.mutex.tryLock().then(
      (unlock) => {
        this.trying = undefined;
        if (!unlock) return this.later();
        if (this.stopped) {
          this.listener.note("locked after stop");
          this.released = unlock().catch(() => undefined);
          return;
        }
        this.unlock = unlock;
        this.listener.elected();
      },
      (err: Error) => {
        this.trying = undefined;
        this.listener.error(`tryLock: ${err.message}`);
        this.later();
      },
    );
  }

  private later(): void {
    if (this.stopped) return;
    this.timer = setTimeout(() => this.attempt(), this.retryMs);
  }
}
