// etcd clients for in-process tests that run on both APIs: node-etcd for v2,
// etcd3 for v3, and a count of the watches etcd holds open, as etcd itself
// reports it, to check that nothing was left watching.
import { Etcd3 } from "etcd3";
import type { Backend } from "../faults/types";

// eslint-disable-next-line @typescript-eslint/no-require-imports
const Etcd = require("node-etcd") as new (hosts: string[]) => unknown;

/** Clients made for one test file; `closeAll()` in an `after` hook closes the etcd3 ones (node-etcd holds no connection). */
export class StoreClients {
  private readonly etcd3Clients = new Set<Etcd3>();

  /** `hosts` may be a function, for an etcd that starts after the clients are set up (see src/cli/supervise/hooks.ts). */
  constructor(private readonly hosts: string[] | (() => string[])) {}

  /** A new client for `api` on the given hosts (default: the file's etcd). */
  create(api: Backend, hosts: string[] = typeof this.hosts === "function" ? this.hosts() : this.hosts): unknown {
    if (api === "v2") return new Etcd(hosts);
    const client = new Etcd3({ hosts });
    this.etcd3Clients.add(client);
    return client;
  }

  closeAll(): void {
    for (const client of this.etcd3Clients) client.close();
    this.etcd3Clients.clear();
  }
}

/** Reads etcd's /metrics once, and returns a sum over it: the values of the lines that match `pattern`, added up. */
export async function etcdMetrics(clientUrl: string): Promise<(pattern: RegExp) => number> {
  const lines = (await (await fetch(`${clientUrl}/metrics`, { signal: AbortSignal.timeout(3_000) })).text()).split("\n");
  return (pattern) => lines.filter((l) => pattern.test(l)).reduce((total, l) => total + Number(l.slice(l.lastIndexOf(" ") + 1)), 0);
}

/** Watches etcd holds open right now: the v2 store's watchers, or v3 watchers (etcd_debugging_mvcc_watcher_total). */
export async function openWatches(clientUrl: string, api: Backend): Promise<number> {
  if (api === "v2") {
    const stats = (await (await fetch(`${clientUrl}/v2/stats/store`, { signal: AbortSignal.timeout(3_000) })).json()) as { watchers: number };
    return stats.watchers;
  }
  const text = await (await fetch(`${clientUrl}/metrics`, { signal: AbortSignal.timeout(3_000) })).text();
  const line = text.split("\n").find((l) => l.startsWith("etcd_debugging_mvcc_watcher_total "));
  if (!line) throw new Error("etcd's /metrics has no etcd_debugging_mvcc_watcher_total");
  return Number(line.split(" ")[1]);
}
