// `etcd-leader who KEY`: one read of who leads, without joining. Exit 0 with
// the leader's name and fencing token, or 3 when nobody leads. `--all`: every
// member in line, the leader first (on NATS KV, where followers hold nothing,
// the leader alone, and it says so). The same read
// is the first thing `run` and `watch` do, so that a store that cannot be
// reached (a wrong endpoint, TLS or credentials) fails at once with a message
// instead of retrying in silence.
import { CliError, EXIT } from "../exit";
import type { Store } from "../stores/store";

export interface Leader {
  name: string;
  token: number;
}

/** The leader of `key`, or undefined; an unreachable or refusing store is a CliError (69). */
export async function readLeader(store: Store, key: string, requestTimeoutMs: number): Promise<Leader | undefined> {
  try {
    return await store.whoLeads(key, requestTimeoutMs);
  } catch (err) {
    if (err instanceof CliError) throw err;
    const why = err instanceof Error ? err.message : String(err);
    throw new CliError(EXIT.unavailable, `cannot read the election at ${key} from ${store.description}: ${why}\n${store.flagsToCheck}`);
  }
}

export async function who(store: Store, key: string, json: boolean, all = false): Promise<number> {
  if (all) return whoIsInLine(store, key, json);
  const leader = await readLeader(store, key, 5_000);
  if (json) process.stdout.write(`${JSON.stringify({ key, leader: leader ?? null })}\n`);
  else process.stdout.write(leader ? `${leader.name} leads ${key} (fencing token ${leader.token})\n` : `nobody leads ${key}\n`);
  return leader ? EXIT.ok : EXIT.noLeader;
}

async function whoIsInLine(store: Store, key: string, json: boolean): Promise<number> {
  let line: Awaited<ReturnType<Store["candidates"]>>;
  try {
    line = await store.candidates(key, 5_000);
  } catch (err) {
    if (err instanceof CliError) throw err;
    const why = err instanceof Error ? err.message : String(err);
    throw new CliError(EXIT.unavailable, `cannot read the election at ${key} from ${store.description}: ${why}\n${store.flagsToCheck}`);
  }
  const { scope, members } = line;
  if (json) {
    process.stdout.write(`${JSON.stringify({ key, scope, members })}\n`);
  } else if (members.length === 0) {
    process.stdout.write(`nobody leads ${key}\n`);
  } else {
    const lines = members.map(({ name, token }, i) => `${i === 0 ? "leader " : `${String(i + 1).padStart(6)} `} ${name} (token ${token})`);
    if (scope === "leader") lines.push(`(${store.description}: members that do not lead hold nothing in the store, so only the leader is known)`);
    process.stdout.write(`${lines.join("\n")}\n`);
  }
  return members.length > 0 ? EXIT.ok : EXIT.noLeader;
}
