// The etcd v2 store's own option, beside the election's timing:
// `etcdLeader(client, key, name, { v2: { watchRearmInterval } })`. Its old
// place, `watchRearmInterval` among the timing options, is still accepted.
import { duration, type ElectionOptions, type EtcdV2Options } from "../../election/options";

/** Below the idle timeouts of common NAT gateways and load balancers (AWS NLB 350 s, many firewalls 60 s and up). */
export const DEFAULT_WATCH_REARM_INTERVAL_MS = 30_000;

export interface ResolvedV2Options {
  readonly watchRearmInterval: number;
}

const V2_OPTION_NAMES: ReadonlySet<string> = new Set(Object.keys({ watchRearmInterval: true } satisfies Record<keyof EtcdV2Options, true>));

/** The v2 store's options, with their defaults, from an election's options; throws for a bad one, naming it. */
export function resolveV2Options(options: ElectionOptions = {}): ResolvedV2Options {
  const { v2, watchRearmInterval: oldPlace } = options;
  if (v2 !== undefined && (typeof v2 !== "object" || v2 === null)) {
    throw new TypeError(`the v2 option must be an object, e.g. { watchRearmInterval: 30000 }, got ${v2 === null ? "null" : typeof v2}`);
  }
  for (const name of Object.keys(v2 ?? {})) {
    if (!V2_OPTION_NAMES.has(name)) {
      throw new TypeError(`unknown v2 option ${JSON.stringify(name)}; the v2 options are ${[...V2_OPTION_NAMES].join(", ")}`);
    }
  }
  const given = v2?.watchRearmInterval;
  if (given !== undefined && oldPlace !== undefined && given !== oldPlace) {
    throw new TypeError(
      `watchRearmInterval given twice, as ${String(oldPlace)} and as v2.watchRearmInterval ${String(given)}: give it in one place (v2)`,
    );
  }
  const name = given !== undefined ? "v2.watchRearmInterval" : "watchRearmInterval";
  return { watchRearmInterval: duration(name, given ?? oldPlace, DEFAULT_WATCH_REARM_INTERVAL_MS) };
}
