// Direct access to the etcd a fault scenario runs against, bypassing the
// members' proxies: read the line of memberships, delete a member's key as an
// operator would, flood etcd with unrelated writes, compact its history.
//
// v2 goes over etcd's HTTP API, v3 over its JSON gateway (/v3/kv/*) and
// etcdctl, so the test process holds no long-lived client connection that
// could outlive a scenario. Every request is to 127.0.0.1 and has a timeout.
import { execFile } from "node:child_process";
import type { Backend } from "./types";

/** One membership in the election, as etcd holds it. */
export interface LineEntry {
  key: string;
  name: string;
  /** v2 createdIndex or v3 create revision: the member's place in line and its fencing token. */
  token: number;
}

const REQUEST_TIMEOUT_MS = 3_000;

export class EtcdAdmin {
  /** `endpoints` are `host:port` of etcd itself (not of a proxy). */
  constructor(
    readonly backend: Backend,
    private readonly endpoints: readonly string[],
  ) {}

  /** The election's memberships, oldest first. */
  async line(electionKey: string): Promise<LineEntry[]> {
    return this.backend === "v2" ? this.lineV2(electionKey) : this.lineV3(electionKey);
  }

  /** Deletes one key the way an operator would (v2: HTTP DELETE; v3: `etcdctl del`). */
  async deleteKey(key: string): Promise<void> {
    if (this.backend === "v2") {
      const res = await this.request(`/v2/keys${encodeKeyPath(key)}`, { method: "DELETE" });
      if (res.status !== 200) throw new Error(`DELETE ${key}: HTTP ${res.status} ${await res.text()}`);
      await res.body?.cancel();
      return;
    }
    const out = await this.etcdctl(["del", key]);
    if (out.trim() !== "1") throw new Error(`etcdctl del ${key} deleted ${JSON.stringify(out.trim())} keys, not 1`);
  }

  /**
   * Revokes the lease a v3 key is attached to, as `etcdctl lease revoke`
   * would: etcd deletes the key with it, as if the lease had run out.
   */
  async revokeLeaseOf(key: string): Promise<void> {
    if (this.backend === "v2") throw new Error("etcd v2 keys have no lease to revoke");
    const body = (await this.gateway("/v3/kv/range", { key: b64(key) })) as { kvs?: Array<{ lease?: string }> };
    const lease = body.kvs?.[0]?.lease;
    if (!lease || lease === "0") throw new Error(`${key} is not attached to a lease`);
    await this.etcdctl(["lease", "revoke", BigInt(lease).toString(16)]);
  }

  /**
   * Deletes every membership of an election at once, the way an operator
   * would (v2: a recursive HTTP DELETE of its directory; v3: `etcdctl del
   * --prefix <key>/`). Resolves with how many keys went (v3) or 0 (v2, which
   * does not say).
   */
  async deleteElection(electionKey: string): Promise<number> {
    if (this.backend === "v2") {
      const res = await this.request(`/v2/keys${encodeKeyPath(electionKey)}?recursive=true`, { method: "DELETE" });
      if (res.status !== 200) throw new Error(`DELETE ${electionKey}?recursive=true: HTTP ${res.status} ${await res.text()}`);
      await res.body?.cancel();
      return 0;
    }
    const out = await this.etcdctl(["del", "--prefix", `${electionKey}/`]);
    return Number(out.trim());
  }

  /**
   * `count` writes to keys under `prefix`, `concurrency` at a time. Returns the
   * store index (v2) or revision (v3) of etcd before the first write and after
   * the last one.
   */
  async flood(prefix: string, count: number, concurrency = 8): Promise<{ before: number; after: number }> {
    const before = await this.currentIndex();
    let next = 0;
    let highest = before;
    const worker = async (): Promise<void> => {
      while (next < count) {
        const i = next++;
        highest = Math.max(highest, await this.put(`${prefix}/${i}`, `unrelated write ${i}`));
      }
    };
    await Promise.all(Array.from({ length: Math.min(concurrency, count) }, worker));
    return { before, after: highest };
  }

  /** etcd's current store index (v2, X-Etcd-Index) or revision (v3). */
  async currentIndex(): Promise<number> {
    if (this.backend === "v2") {
      const res = await this.request("/v2/keys/");
      await res.body?.cancel();
      const index = Number(res.headers.get("x-etcd-index"));
      if (!Number.isFinite(index) || index <= 0) throw new Error("etcd gave no X-Etcd-Index");
      return index;
    }
    const body = await this.gateway("/v3/kv/range", { key: b64("\0"), limit: 1 });
    return Number((body as { header: { revision: string } }).header.revision);
  }

  /**
   * True if etcd has forgotten the history from `index` on: a v2 watch from
   * that index gets error 401, a v3 read at that revision is refused as
   * compacted. The fault scenarios use it to check their own premise.
   */
  async historyGoneSince(index: number): Promise<boolean> {
    if (this.backend === "v2") {
      // A watch on a key that does not exist: with the history present it would wait, so bound it.
      const res = await this.request(`/v2/keys/faults-history-probe?wait=true&waitIndex=${index}`, {
        signal: AbortSignal.timeout(1_000),
      }).catch(() => undefined);
      if (!res) return false;
      const body = (await res.json().catch(() => ({}))) as { errorCode?: number };
      return body.errorCode === 401;
    }
    const res = await this.request("/v3/kv/range", {
      method: "POST",
      body: JSON.stringify({ key: b64("faults-history-probe"), revision: String(index) }),
    });
    const text = await res.text();
    return /compacted/.test(text);
  }

  /** `etcdctl compact <revision>` (v3). */
  async compact(revision: number): Promise<void> {
    await this.etcdctl(["compact", String(revision)]);
  }

  private async put(key: string, value: string): Promise<number> {
    if (this.backend === "v2") {
      const res = await this.request(`/v2/keys${encodeKeyPath(key)}`, {
        method: "PUT",
        headers: { "content-type": "application/x-www-form-urlencoded" },
        body: `value=${encodeURIComponent(value)}`,
      });
      const body = (await res.json()) as { node?: { modifiedIndex?: number } };
      if (res.status >= 300 || typeof body.node?.modifiedIndex !== "number") {
        throw new Error(`PUT ${key}: HTTP ${res.status} ${JSON.stringify(body)}`);
      }
      return body.node.modifiedIndex;
    }
    const body = await this.gateway("/v3/kv/put", { key: b64(key), value: b64(value) });
    return Number((body as { header: { revision: string } }).header.revision);
  }

  private async lineV2(electionKey: string): Promise<LineEntry[]> {
    const res = await this.request(`/v2/keys${encodeKeyPath(electionKey)}?sorted=true`);
    if (res.status === 404) {
      await res.body?.cancel();
      return [];
    }
    const body = (await res.json()) as { node?: { nodes?: Array<{ key: string; value?: string; dir?: boolean; createdIndex: number }> } };
    return (body.node?.nodes ?? [])
      .filter((n) => !n.dir && typeof n.value === "string")
      .map((n) => ({ key: n.key, name: n.value!, token: n.createdIndex }))
      .sort((a, b) => a.token - b.token);
  }

  private async lineV3(electionKey: string): Promise<LineEntry[]> {
    const prefix = `${electionKey}/`;
    const body = (await this.gateway("/v3/kv/range", {
      key: b64(prefix),
      range_end: b64(prefixEnd(prefix)),
      sort_order: "ASCEND",
      sort_target: "CREATE",
    })) as { kvs?: Array<{ key: string; value?: string; create_revision: string }> };
    return (body.kvs ?? []).map((kv) => ({
      key: unb64(kv.key),
      name: unb64(kv.value ?? ""),
      token: Number(kv.create_revision),
    }));
  }

  private async gateway(path: string, payload: object): Promise<unknown> {
    const res = await this.request(path, { method: "POST", body: JSON.stringify(payload) });
    const text = await res.text();
    if (res.status !== 200) throw new Error(`${path}: HTTP ${res.status} ${text}`);
    return JSON.parse(text);
  }

  /** Tries each endpoint in turn (a cluster member may be down). */
  private async request(path: string, init: RequestInit = {}): Promise<Response> {
    let lastError: unknown;
    for (const endpoint of this.endpoints) {
      try {
        return await fetch(`http://${endpoint}${path}`, { signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS), ...init });
      } catch (err) {
        lastError = err;
      }
    }
    throw new Error(`no etcd endpoint answered ${path}: ${(lastError as Error)?.message}`);
  }

  private etcdctl(args: string[]): Promise<string> {
    return new Promise((resolve, reject) => {
      execFile(
        process.env.ETCDCTL_BIN ?? "etcdctl",
        ["--endpoints", this.endpoints.map((e) => `http://${e}`).join(","), "--command-timeout=3s", ...args],
        { env: { ...process.env, ETCDCTL_API: "3" }, timeout: 10_000 },
        (err, stdout, stderr) => {
          if (err) reject(new Error(`etcdctl ${args.join(" ")}: ${err.message}\n${stderr}`));
          else resolve(stdout);
        },
      );
    });
  }
}

function encodeKeyPath(key: string): string {
  return `/${key.replace(/^\/+/, "").split("/").map(encodeURIComponent).join("/")}`;
}

function b64(data: string | Buffer): string {
  return (typeof data === "string" ? Buffer.from(data, "utf8") : data).toString("base64");
}

function unb64(text: string): string {
  return Buffer.from(text, "base64").toString("utf8");
}

/** The end of the range of keys that start with `prefix` (etcd's clientv3.GetPrefixRangeEnd). */
function prefixEnd(prefix: string): Buffer {
  const bytes = Buffer.from(prefix, "utf8");
  for (let i = bytes.length - 1; i >= 0; i--) {
    if (bytes[i]! < 0xff) {
      bytes[i]! += 1;
      return bytes.subarray(0, i + 1);
    }
  }
  return Buffer.from([0]);
}
