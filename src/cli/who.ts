// `etcd-leader who KEY`: one read of who leads, without joining. Exit 0 with
// the leader's name and fencing token, or 3 when nobody leads. The same read
// is the first thing `run` and `watch` do, so that an etcd that cannot be
// reached (a wrong endpoint, TLS or credentials) fails at once with a message
// instead of retrying in silence.
import etcdLeader = require("../index");
import { CliError, EXIT } from "./exit";

export interface Leader {
  name: string;
  token: number;
}

/** The leader of `key`, or undefined; an unreachable or refusing store is a CliError (69). */
export async function readLeader(client: unknown, key: string, storeDescription: string, requestTimeoutMs: number): Promise<Leader | undefined> {
  try {
    return await etcdLeader.whoLeads(client, key, { requestTimeout: requestTimeoutMs });
  } catch (err) {
    const why = err instanceof Error ? err.message : String(err);
    throw new CliError(
      EXIT.unavailable,
      `cannot read the election at ${key} from ${storeDescription}: ${why}\n` +
        "check --endpoints (or ETCDCTL_ENDPOINTS), the TLS files (--cacert, --cert, --key), --user, and --api",
    );
  }
}

export async function who(client: unknown, key: string, storeDescription: string, json: boolean): Promise<number> {
  const leader = await readLeader(client, key, storeDescription, 5_000);
  if (json) process.stdout.write(`${JSON.stringify({ key, leader: leader ?? null })}\n`);
  else process.stdout.write(leader ? `${leader.name} leads ${key} (fencing token ${leader.token})\n` : `nobody leads ${key}\n`);
  return leader ? EXIT.ok : EXIT.noLeader;
}
