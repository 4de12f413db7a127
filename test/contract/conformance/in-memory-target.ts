// The conformance target for the README's in-memory backend
// (examples/in-memory-backend.ts), a race-style store: one MemoryStore per
// election. The store lives in this process, so a cut connection is
// simulated: the member's backend stops answering (intercepted-backend.ts).
import type { ElectionBackend } from "../../../src/contract/backend";
import { MemoryBackend, MemoryStore } from "../../../examples/in-memory-backend";
import { InterceptedBackend } from "./intercepted-backend";
import type { ConformanceTarget, TargetElection } from "./target";

export function inMemoryTarget(): ConformanceTarget {
  return {
    name: "in-memory example",
    unsupported: { openWatches: "the in-memory store serves no watches that could be counted from outside" },
    async start() {},
    async stop() {},
    async election(_label, ttlSeconds) {
      const store = new MemoryStore();
      const members = new Map<string, InterceptedBackend>();
      const holderNamed = (name: string) => {
        const holder = store.current();
        if (holder?.name !== name) throw new Error(`${name} holds nothing in the store (the holder: ${holder?.name})`);
        return holder;
      };

      const election: TargetElection = {
        async backend(name): Promise<ElectionBackend> {
          const member = new InterceptedBackend(new MemoryBackend(store, name, ttlSeconds * 1_000) as ElectionBackend);
          members.set(name, member);
          return member.backend;
        },
        async members() {
          const holder = store.current();
          return holder ? [holder.name] : [];
        },
        async readLeader() {
          return store.current()?.name;
        },
        async deleteMember(name) {
          holderNamed(name);
          store.set(undefined);
        },
        async expireMember(name) {
          store.set({ ...holderNamed(name), expiresAt: performance.now() });
        },
        async cutConnection(name) {
          const member = members.get(name);
          if (!member) throw new Error(`no member ${name} in this election`);
          member.cutOff();
        },
        async cleanup() {
          for (const member of members.values()) member.openAll();
        },
      };
      return election;
    },
  };
}
