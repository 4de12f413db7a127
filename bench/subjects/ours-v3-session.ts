// This library on etcd's v3 API with one session per process: every member
// the process hosts is an election of its own (its own key) on the
// process's one lease. Not one of the side-by-side subjects (no peer offers
// sessions in Node); the sessions scenario runs it.
import { Etcd3 } from "etcd3";
import etcdLeader = require("../../src/index");
import { SESSION_SUBJECT } from "./info";
import { OursMember } from "./ours-v2";
import type { Member, MemberListener, MemberSpec, Subject, SubjectRuntime } from "./types";

export const oursV3Session: Subject = {
  ...SESSION_SUBJECT,
  runtime(hosts: string[]): SubjectRuntime {
    const client = new Etcd3(etcdLeader.etcd3Options({ hosts }));
    let session: etcdLeader.Session | undefined;
    let ttl: number | undefined;
    return {
      clientNote: "one etcd3 client and one session (one lease) per process, every election on it",
      member(spec: MemberSpec, listener: MemberListener): Member {
        if (ttl !== undefined && spec.ttl !== ttl) throw new Error(`one session per process: TTL ${spec.ttl} s, the session's is ${ttl} s`);
        ttl = spec.ttl;
        session ??= etcdLeader.session(client, { ttl });
        return new OursMember(session.election(spec.key, spec.name), spec.name, listener);
      },
      async close() {
        await session?.close();
        client.close();
      },
    };
  },
};

