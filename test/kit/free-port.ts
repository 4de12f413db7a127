import { createServer } from "node:net";

/**
 * Ports handed out lately by this process. The kernel may give the same
 * ephemeral port to two listen(0) calls made one after the other once the
 * first is closed: two members of one etcd cluster then got the same port
 * ("initial cluster ... has duplicate url"). Not handing one out twice in a
 * row closes that.
 */
const recent: number[] = [];
const RECENT_KEPT = 512;

/** A TCP port on 127.0.0.1 that was free a moment ago, and not one this process handed out lately. */
export async function freePort(): Promise<number> {
  for (let tries = 0; ; tries++) {
    const port = await ephemeralPort();
    if (recent.includes(port) && tries < 50) continue;
    recent.push(port);
    if (recent.length > RECENT_KEPT) recent.shift();
    return port;
  }
}

function ephemeralPort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.unref();
    server.on("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const address = server.address();
      server.close(() => {
        if (address && typeof address === "object") resolve(address.port);
        else reject(new Error("no port"));
      });
    });
  });
}
