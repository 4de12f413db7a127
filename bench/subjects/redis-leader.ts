// redis-leader 0.1.0: `new Leader(redis, { ttl, wait, key })`, `elect()`,
// events `elected` and `revoked`. It takes the key with SET NX PX and, while
// elected, every TTL/2 GETs it and PEXPIREs it if it still holds its id; a
// member that did not get the key tries again every `wait` ms (its default,
// 1000, as its README leaves it). Its calls are callback-style, which
// ioredis takes. The key holds a random id, not a name: no `leader` events.
// On an `error` event it stops trying ("best is to exit your process", its
// README says); here the member reports the error and calls elect() again
// after `wait`, as a process restarted by its supervisor would.
import { SUBJECTS } from "./info";
import { REDIS_CLIENT_NOTE, redisClientFor } from "./ours-redis";
import type { Member, MemberListener, MemberSpec, Subject, SubjectRuntime } from "./types";
import type { Redis } from "ioredis";

/** redis-leader's default `wait`. */
const WAIT_MS = 1000;

interface RedisLeader {
  elect(): void;
  stop(): void;
  on(event: "elected" | "revoked", listener: () => void): void;
  on(event: "error", listener: (err: Error) => void): void;
}

type LeaderConstructor = new (redis: unknown, options: { ttl: number; wait: number; key: string }) => RedisLeader;

export const redisLeaderSubject: Subject = {
  ...SUBJECTS.find((s) => s.id === "redis-leader")!,
  runtime(hosts: string[]): SubjectRuntime {
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    const Leader = require("redis-leader") as LeaderConstructor;
    return {
      clientNote: REDIS_CLIENT_NOTE,
      member: (spec, listener) => new RedisLeaderMember(Leader, (spec.hosts ?? hosts)[0]!, spec, listener),
      async close() {},
    };
  },
};

class RedisLeaderMember implements Member {
  readonly name: string;
  private readonly redis: Redis;
  private readonly leader: RedisLeader;
  private started = false;
  private stopped = false;
  private leading = false;
  private retry: NodeJS.Timeout | undefined;

  constructor(Leader: LeaderConstructor, url: string, spec: MemberSpec, private readonly listener: MemberListener) {
    this.name = spec.name;
    this.redis = redisClientFor(url, spec, listener);
    this.leader = new Leader(this.redis, { ttl: Math.round(spec.ttl * 1000), wait: WAIT_MS, key: spec.key });
    this.leader.on("elected", () => {
      if (this.stopped) {
        this.listener.note("elected after stop");
        return;
      }
      this.leading = true;
      listener.elected();
    });
    this.leader.on("revoked", () => this.stepDown("revoked"));
    this.leader.on("error", (err) => {
      listener.error(err?.message ?? String(err));
      if (this.stopped || this.leading) return;
      clearTimeout(this.retry);
      this.retry = setTimeout(() => this.leader.elect(), WAIT_MS);
    });
  }

  start(): void {
    if (this.started) return;
    this.started = true;
    this.leader.elect();
  }

  stop(): void {
    if (this.stopped) return;
    this.stopped = true;
    clearTimeout(this.retry);
    // stop() GETs the key and DELs it if it is ours, then says `revoked`: the member steps down when it calls stop().
    this.stepDown("stopped");
    this.leader.stop();
  }

  async close(): Promise<void> {
    this.stop();
    // stop() takes no callback: it sends a GET, and the DEL from that GET's
    // callback; a PING sent after the GET's reply follows the DEL.
    await this.redis.ping().catch(() => undefined);
    await this.redis.ping().catch(() => undefined);
    this.redis.disconnect();
  }

  isLeader(): boolean {
    return this.leading;
  }

  isRunning(): boolean {
    return this.started && !this.stopped;
  }

  private stepDown(reason: string): void {
    if (!this.leading) return;
    this.leading = false;
    this.listener.unelected(reason);
  }
}
