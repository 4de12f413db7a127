// The public record of two-leader and stuck-election bugs in other
// libraries, as named schedules: the fault each report describes, played at
// fixed times on every simulated store, which the checker must pass. (Times
// are from the end of the members' settling, TTL 2 s.)
import type { ScriptedSchedule, ScriptedWorld } from "./run-seed";
import type { SimMember } from "./member";

/** The member that leads now; the schedule's premise is that one does. */
function leader(world: ScriptedWorld): SimMember {
  const found = world.cast.alive().find((m) => m.election.isLeader());
  if (!found) throw new Error("the schedule needs a leader here, and nobody leads");
  return found;
}

/** A member that follows now (holds a place, or waits for the key), not the leader. */
function follower(world: ScriptedWorld): SimMember {
  const found = world.cast.alive().find((m) => m.election.isRunning() && !m.election.isLeader());
  if (!found) throw new Error("the schedule needs a follower here, and there is none");
  return found;
}

export const REGRESSIONS: readonly ScriptedSchedule[] = [
  {
    name: "etcd-19597",
    description:
      "etcd's Campaign waits for ever when its own key is deleted while it waits: a follower's membership is deleted from outside; it must not wait on it for ever (a leader after the heal, nobody stuck)",
    faults: [
      {
        at: 500,
        apply: (world) => {
          const member = follower(world);
          world.note(`an operator deletes ${member.name}'s membership`);
          world.store.deleteMembershipOf(member.name);
        },
      },
    ],
  },
  {
    name: "etcd3-158-176",
    description:
      "etcd3's Election saw two leaders after an etcd restart: the store goes down for longer than the TTL and comes back; never two leaders, and a leader again after",
    faults: [
      {
        at: 500,
        apply: (world) => {
          world.note("the store goes down for 3 s");
          world.store.restart(3_000);
        },
      },
    ],
  },
  {
    name: "consul-1843",
    description:
      "consul lock killed its child minutes after another host took the lock: the leader is cut off both ways for three TTLs; its routine's signal must abort before a successor leads (one routine, and none outlives its term)",
    faults: [
      {
        at: 500,
        apply: (world) => {
          const member = leader(world);
          world.note(`${member.name} is cut off both ways for 6 s`);
          const link = world.cast.linkOf(member);
          link.cut("both");
          world.scheduler.at(world.scheduler.now + 6_000, () => link.heal());
        },
      },
    ],
  },
  {
    name: "kubernetes-23731",
    description:
      "a Kubernetes leader lost its lease and was never told: the leader's requests stop reaching the store while it still hears from it, for three TTLs; it must step down by its deadline (one leader)",
    faults: [
      {
        at: 500,
        apply: (world) => {
          const member = leader(world);
          world.note(`${member.name}'s requests stop reaching the store for 6 s`);
          const link = world.cast.linkOf(member);
          link.cut("to-store");
          world.scheduler.at(world.scheduler.now + 6_000, () => link.heal());
        },
      },
    ],
  },
];
