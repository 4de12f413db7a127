// When etcd removes a crashed leader's membership: a watch of the election's
// keys, kept by the benchmark itself (straight to etcd, beside the subjects'
// own traffic), that notes the arrival of the first removal after it starts.
// It splits a crash failover into what the store's physics take (the key's
// remaining life at the crash, plus etcd's expiry sweep, plus the delivery of
// its removal) and what the library adds after that (its reaction: reads,
// decisions, its own bookkeeping until `elected`).
import type { BenchContext } from "./context";
import type { SubjectInfo } from "./subjects/types";
import { now } from "./util";

export interface RemovalWatch {
  /** When (now()) the first removal under the election arrived here; undefined until it has. */
  readonly seenAt: number | undefined;
  close(): void;
}

/** Starts watching the keys of the election at `key` (a v2 directory, or a v3 election prefix); undefined for NATS. */
export async function watchRemoval(ctx: BenchContext, subject: SubjectInfo, key: string): Promise<RemovalWatch | undefined> {
  // etcd3's Election keeps its members under election/<name>/, as etcd's Go recipe does under the name it is given.
  if (subject.id === "etcd3-election") return watchV3(ctx, `election/${key}/`);
  if (subject.api === "v3") return watchV3(ctx, `${key}/`);
  if (subject.api === "v2") return watchV2(ctx, key);
  return undefined;
}

async function watchV3(ctx: BenchContext, prefix: string): Promise<RemovalWatch> {
  const state: { seenAt: number | undefined } = { seenAt: undefined };
  const watcher = await ctx.probe.watch().prefix(prefix).only("delete").create();
  watcher.on("delete", () => {
    state.seenAt ??= now();
  });
  return {
    get seenAt() {
      return state.seenAt;
    },
    close: () => void watcher.cancel().catch(() => undefined),
  };
}

async function watchV2(ctx: BenchContext, dir: string): Promise<RemovalWatch> {
  const state: { seenAt: number | undefined } = { seenAt: undefined };
  const controller = new AbortController();
  const read = await fetch(`${ctx.etcdUrl}/v2/keys${dir}`, { signal: AbortSignal.timeout(3_000) });
  let from = Number(read.headers.get("x-etcd-index")) + 1;
  await read.arrayBuffer();
  void (async () => {
    while (!controller.signal.aborted && state.seenAt === undefined) {
      const response = await fetch(`${ctx.etcdUrl}/v2/keys${dir}?wait=true&recursive=true&waitIndex=${from}`, { signal: controller.signal });
      const body = (await response.json()) as { action?: string; node?: { modifiedIndex?: number } };
      if (body.action === "delete" || body.action === "expire" || body.action === "compareAndDelete") state.seenAt ??= now();
      from = (body.node?.modifiedIndex ?? from) + 1;
    }
  })().catch(() => undefined);
  return {
    get seenAt() {
      return state.seenAt;
    },
    close: () => controller.abort(),
  };
}
