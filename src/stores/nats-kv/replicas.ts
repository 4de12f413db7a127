// What a member refuses on a bucket replicated across a JetStream cluster
// (its stream has more than one replica), before it campaigns.
//
// Members of ours campaign there with creates of the absent key alone, and
// read the key from the stream's leader (recipe.ts), which the handle must
// be able to send. A Go member of nats-kv-leader-elect
// cannot: its create over a delete or purge marker is an update conditioned
// on the marker's revision, and nats-server 2.9 checks that revision only on
// the stream's leader, before it proposes the write, so that two such
// updates sent together can both win (test/stores/nats-kv/nats-kv-cluster-facts.test.ts).
// A Go member's update can then land over our member's create, or another
// Go member's: two members win, and nothing a member of ours waits for can
// tell. So `goMembers` is refused on such a bucket.

/** The bucket as its status showed it. */
export interface BucketReplicas {
  readonly name: string;
  readonly replicas: number;
}

/** What the member's handle can do and says of its server. */
export interface HandleAbilities {
  /** Whether it can create a key only if absent, purge a key through a revision, and read from the stream's leader. */
  readonly canServeReplicated: boolean;
  /** The server's version, if the handle's connection reports it. */
  readonly serverVersion: string | undefined;
}

/** Why a member with `goMembers` cannot take part in an election on `bucket` through `handle`; undefined if it can. */
export function replicatedBucketProblem(bucket: BucketReplicas, handle: HandleAbilities, goMembers: boolean): Error | undefined {
  if (bucket.replicas <= 1) return undefined;
  const what = `the bucket ${JSON.stringify(bucket.name)} has ${bucket.replicas} replicas` +
    (handle.serverVersion ? ` (nats-server ${handle.serverVersion})` : "");
  if (goMembers) {
    return new RangeError(
      `${what}, and goMembers is true: a Go member of nats-kv-leader-elect takes a deleted or purged key with an update ` +
        "conditioned on the marker's revision, which a replicated stream does not serialize (nats-server 2.9 checks it on " +
        "the stream's leader before it proposes the write), so two members can win the same key. Use a bucket with one " +
        "replica for an election with Go members, or leave goMembers out if none take part",
    );
  }
  if (!handle.canServeReplicated) {
    return new TypeError(
      `${what}: a member campaigns there with a create of the absent key and reads the key from the stream's leader, ` +
        "which this handle cannot send (it lacks put, jsm, stream or subjectForKey): pass the bucket handle of @nats-io/kv " +
        "(`await new Kvm(nc).open(bucket)`)",
    );
  }
  return undefined;
}
