// This library on etcd's v3 API, through the etcd3 client.
import { Etcd3 } from "etcd3";
import etcdLeader = require("../../src/index");
import { SUBJECTS, V3_CLIENT_NOTE } from "./info";
import { OursMember } from "./ours-v2";
import type { Member, MemberListener, MemberSpec, Subject, SubjectRuntime } from "./types";

export const oursV3: Subject = {
  ...SUBJECTS.find((s) => s.id === "ours-v3")!,
  runtime(hosts: string[]): SubjectRuntime {
    return {
      clientNote: V3_CLIENT_NOTE.ours,
      member(spec: MemberSpec, listener: MemberListener): Member {
        // The client configuration the README recommends: keepalive and a short breaker.
        const own = new Etcd3(etcdLeader.etcd3Options({ hosts: spec.hosts ?? hosts }));
        return OursMember.on(own, spec, listener, async () => own.close());
      },
      async close() {},
    };
  },
};
