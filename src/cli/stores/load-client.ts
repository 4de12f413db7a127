// A store's client library, loaded only when the command needs it: each is an
// optional peer dependency, and one that is missing is a message that says
// what to install, not a stack trace.
import { CliError, EXIT } from "../exit";

/** `install`: the packages to name in the message, when more than `name` is needed. */
export function loadClient(name: "etcd3" | "node-etcd" | "@nats-io/transport-node" | "@nats-io/kv" | "pg" | "ioredis", forWhat: string, install: string = name): unknown {
  try {
    return require(name);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== "MODULE_NOT_FOUND") throw err;
    throw new CliError(
      EXIT.unavailable,
      `the ${name} client is not installed, and ${forWhat} needs it: install it beside etcd-leader (npm install ${install})`,
    );
  }
}
