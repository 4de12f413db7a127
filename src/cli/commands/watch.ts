// `etcd-leader watch KEY`: one line on stdout for the leader when it starts
// and for every change after, until SIGINT/SIGTERM. Readable lines, or JSON
// lines with --json. Never writes to the store.
import { EXIT } from "../exit";
import type { Reporter } from "../report";
import type { Store } from "../stores/store";
import { readLeader } from "./who";

export async function watch(store: Store, key: string, json: boolean, reporter: Reporter, shutdown: AbortSignal): Promise<number> {
  await readLeader(store, key, 5_000);
  const observer = store.observe(key);
  observer.on("error", (err) => reporter.state("error", `store trouble, retrying: ${err.message}`, { error: err.message }));
  try {
    for await (const leader of observer.changes({ signal: shutdown })) {
      const at = new Date().toISOString();
      const line = json
        ? JSON.stringify({ at, key, leader: leader ?? null })
        : `${at} ${leader ? `${leader.name} leads ${key} (fencing token ${leader.token})` : `nobody leads ${key}`}`;
      process.stdout.write(`${line}\n`);
    }
  } catch (err) {
    if (!(err instanceof Error && err.name === "AbortError")) throw err;
  } finally {
    observer.stop();
  }
  return EXIT.ok;
}
