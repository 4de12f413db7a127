// etcd's own Prometheus metrics (GET /metrics), for the v3 subjects: gRPC
// messages received and calls started per method, and raft proposals
// committed (every write goes through raft; a lease keep-alive in etcd 3.4
// does not).

export interface MetricsSnapshot {
  /** grpc_server_msg_received_total by grpc_method. */
  received: Record<string, number>;
  /** grpc_server_started_total by grpc_method. */
  started: Record<string, number>;
  proposalsCommitted: number;
  /** etcd v2 store reads and writes (etcd_debugging_store_*), a cross-check for the v2 proxy's counts. */
  v2StoreReads: number;
  v2StoreWrites: number;
  at: number;
}

export interface MetricsDelta {
  seconds: number;
  received: Record<string, number>;
  started: Record<string, number>;
  receivedTotal: number;
  /** Streams and unary calls started. */
  startedTotal: number;
  proposalsCommitted: number;
  v2StoreReads: number;
  v2StoreWrites: number;
}

export async function readMetrics(clientUrl: string): Promise<MetricsSnapshot> {
  const response = await fetch(`${clientUrl}/metrics`, { signal: AbortSignal.timeout(5_000) });
  if (!response.ok) throw new Error(`GET /metrics answered ${response.status}`);
  return parseMetrics(await response.text());
}

export function parseMetrics(text: string): MetricsSnapshot {
  const snapshot: MetricsSnapshot = {
    received: {}, started: {}, proposalsCommitted: 0, v2StoreReads: 0, v2StoreWrites: 0, at: Date.now(),
  };
  for (const line of text.split("\n")) {
    if (!line || line.startsWith("#")) continue;
    const match = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{([^}]*)\})?\s+(\S+)/.exec(line);
    if (!match) continue;
    const [, name, , labelText, rawValue] = match;
    const value = Number(rawValue);
    if (!Number.isFinite(value)) continue;
    const labels = parseLabels(labelText ?? "");
    switch (name) {
      case "grpc_server_msg_received_total":
        add(snapshot.received, labels.grpc_method ?? "?", value);
        break;
      case "grpc_server_started_total":
        add(snapshot.started, labels.grpc_method ?? "?", value);
        break;
      case "etcd_server_proposals_committed_total":
        snapshot.proposalsCommitted += value;
        break;
      case "etcd_debugging_store_reads_total":
        snapshot.v2StoreReads += value;
        break;
      case "etcd_debugging_store_writes_total":
        snapshot.v2StoreWrites += value;
        break;
    }
  }
  return snapshot;
}

export function diffMetrics(after: MetricsSnapshot, before: MetricsSnapshot): MetricsDelta {
  const received = diffRecord(after.received, before.received);
  const started = diffRecord(after.started, before.started);
  return {
    seconds: (after.at - before.at) / 1000,
    received,
    started,
    receivedTotal: sum(received),
    startedTotal: sum(started),
    proposalsCommitted: after.proposalsCommitted - before.proposalsCommitted,
    v2StoreReads: after.v2StoreReads - before.v2StoreReads,
    v2StoreWrites: after.v2StoreWrites - before.v2StoreWrites,
  };
}

function parseLabels(text: string): Record<string, string> {
  const labels: Record<string, string> = {};
  for (const m of text.matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)) labels[m[1]!] = m[2]!;
  return labels;
}

function add(record: Record<string, number>, key: string, value: number): void {
  record[key] = (record[key] ?? 0) + value;
}

function diffRecord(after: Record<string, number>, before: Record<string, number>): Record<string, number> {
  const out: Record<string, number> = {};
  for (const key of new Set([...Object.keys(after), ...Object.keys(before)])) {
    const d = (after[key] ?? 0) - (before[key] ?? 0);
    if (d !== 0) out[key] = d;
  }
  return out;
}

function sum(record: Record<string, number>): number {
  return Object.values(record).reduce((a, b) => a + b, 0);
}
