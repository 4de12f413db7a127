// How etcd's v2 API names a key. etcd path-cleans every key (v2store joins it
// to "/" and applies Go's path.Clean), and its HTTP router answers a URL that
// is not clean with a redirect, which node-etcd follows as a GET: a create
// sent to "a//b" would read "/a/b" instead and fail with "Key not found". So
// the backend sends the key as etcd names it, which is also the form etcd
// answers with: one leading slash, no trailing one, no "." or ".." segments.
// "service/master", "/service/master" and "service/master/" stay the one
// directory "/service/master" that they always were to etcd.
import { posix } from "node:path";

/** The election directory as etcd names `key`; throws if that is the root of the keyspace. */
export function electionDirectory(key: string): string {
  const cleaned = posix.normalize(`/${key}`).replace(/\/+$/, "");
  if (cleaned === "") {
    // In-order keys would be created at the root, beside every other key, and
    // the members listing would never find them.
    throw new RangeError(
      `election key ${JSON.stringify(key)} is the root of etcd's v2 keyspace once cleaned as etcd cleans keys: ` +
        `use a directory of its own, such as "/services/my-service/leader"`,
    );
  }
  return cleaned;
}
