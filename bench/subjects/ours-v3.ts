// This library on etcd's v3 API, through the etcd3 client.
import { Etcd3 } from "etcd3";
import { SUBJECTS, V3_CLIENT_NOTE } from "./info";
import { OursMember } from "./ours-v2";
import type { Member, MemberListener, MemberSpec, Subject, SubjectRuntime } from "./types";

export const oursV3: Subject = {
  ...SUBJECTS.find((s) => s.id === "ours-v3")!,
  runtime(hosts: string[]): SubjectRuntime {
    return {
      clientNote: V3_CLIENT_NOTE,
      member(spec: MemberSpec, listener: MemberListener): Member {
        const own = new Etcd3({ hosts: spec.hosts ?? hosts });
        return new OursMember(own, spec, listener, async () => own.close());
      },
      async close() {},
    };
  },
};
