// node-etcd clients for the v2 subjects. node-etcd 7 gives every client in a
// process one shared request pool of 100 sockets unless told otherwise; a
// waiting member of either v2 subject holds one or two long-poll watches, so
// with 100 or more members per process that pool would starve. Both v2
// subjects get one client per member, and the clients of a process share one
// bigger pool (as they would share node-etcd's default one).
export const V2_POOL_MAX_SOCKETS = 5000;

type NodeEtcdConstructor = new (hosts: string[], options?: object) => object;

/** A factory of node-etcd clients that share one request pool. */
export function nodeEtcdClients(): (hosts: string[]) => object {
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const Etcd = require("node-etcd") as NodeEtcdConstructor;
  // `request` keeps its agents in the pool object: one object, one agent.
  const options = { pool: { maxSockets: V2_POOL_MAX_SOCKETS } };
  return (hosts) => new Etcd(hostPorts(hosts), options);
}

export const V2_CLIENT_NOTE = `one node-etcd client per member; the clients of a process share one request pool of ${V2_POOL_MAX_SOCKETS} sockets`;

/** node-etcd takes host:port; the benchmark passes URLs around. */
export function hostPorts(hosts: string[]): string[] {
  return hosts.map((h) => h.replace(/^https?:\/\//, ""));
}
