// etcd3 1.1.2's own Election: a Campaign per member for leadership, and an
// ElectionObserver per member for the leader's name (Campaign alone never
// says who leads). Used the way etcd3's documentation shows: on a campaign
// error stop acting as leader and campaign again 5 s later; on an observer
// error observe again 5 s later.
import { Etcd3, type Campaign, type Election, type ElectionObserver } from "etcd3";
import { SUBJECTS, V3_CLIENT_NOTE } from "./info";
import type { Member, MemberListener, MemberSpec, Subject, SubjectRuntime } from "./types";

/** The retry delay in etcd3's documented example. */
const RETRY_MS = 5000;

export const etcd3Election: Subject = {
  ...SUBJECTS.find((s) => s.id === "etcd3-election")!,
  runtime(hosts: string[]): SubjectRuntime {
    return {
      clientNote: V3_CLIENT_NOTE.election,
      member(spec: MemberSpec, listener: MemberListener): Member {
        const own = new Etcd3({ hosts: spec.hosts ?? hosts });
        return new Etcd3ElectionMember(own, spec, listener, () => own.close());
      },
      async close() {},
    };
  },
};

class Etcd3ElectionMember implements Member {
  readonly name: string;
  private readonly election: Election;
  private campaign: Campaign | undefined;
  private observer: ElectionObserver | undefined;
  private leading = false;
  private stopped = false;
  private started = false;
  private readonly timers = new Set<NodeJS.Timeout>();
  private resigned: Promise<void> | undefined;

  constructor(
    client: Etcd3,
    spec: MemberSpec,
    private readonly listener: MemberListener,
    private readonly onClose?: () => void,
  ) {
    this.name = spec.name;
    this.election = client.election(spec.key, spec.ttl);
  }

  start(): void {
    if (this.started) return;
    this.started = true;
    this.runCampaign();
    this.runObserver();
  }

  stop(): void {
    if (this.stopped) return;
    this.stopped = true;
    for (const timer of this.timers) clearTimeout(timer);
    this.timers.clear();
    this.stepDown("resigned");
    this.resigned = this.campaign?.resign().catch((err: Error) => this.listener.error(`resign: ${err.message}`));
    void this.observer?.cancel().catch(() => undefined);
  }

  async close(): Promise<void> {
    this.stop();
    await this.resigned;
    await this.observer?.cancel().catch(() => undefined);
    this.onClose?.();
  }

  isLeader(): boolean {
    return this.leading;
  }

  isRunning(): boolean {
    return this.started && !this.stopped;
  }

  private runCampaign(): void {
    const campaign = this.election.campaign(this.name);
    this.campaign = campaign;
    campaign.on("elected", () => {
      if (this.stopped || campaign !== this.campaign) {
        this.listener.note("elected after resign");
        return;
      }
      if (this.leading) return;
      this.leading = true;
      this.listener.elected();
    });
    campaign.on("error", (err: Error) => {
      if (campaign !== this.campaign) return;
      this.listener.error(`campaign: ${err.message}`);
      this.stepDown("campaign error");
      this.later(() => this.runCampaign());
    });
  }

  private runObserver(): void {
    this.election.observe().then(
      (observer) => {
        if (this.stopped) {
          void observer.cancel().catch(() => undefined);
          return;
        }
        this.observer = observer;
        this.listener.leader(observer.leader());
        observer.on("change", (leader) => this.listener.leader(leader));
        observer.on("error", (err: Error) => {
          this.listener.error(`observer: ${err.message}`);
          void observer.cancel().catch(() => undefined);
          this.later(() => this.runObserver());
        });
      },
      (err: Error) => {
        this.listener.error(`observe: ${err.message}`);
        this.later(() => this.runObserver());
      },
    );
  }

  private stepDown(reason: string): void {
    if (!this.leading) return;
    this.leading = false;
    this.listener.unelected(reason);
  }

  private later(action: () => void): void {
    if (this.stopped) return;
    const timer = setTimeout(() => {
      this.timers.delete(timer);
      if (!this.stopped) action();
    }, RETRY_MS);
    this.timers.add(timer);
  }
}
