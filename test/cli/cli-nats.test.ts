// `--backend nats` against a real nats-server: what only NATS has. A bucket
// that does not exist or that NATS would not name, a server that cannot be
// reached, a --ttl that is not the bucket's, etcd's flags given to NATS: each
// ends with a message that says what to fix, a non-zero code, and no stack
// trace. And the `nats` tool's TLS and password flags reach a server that
// requires a client certificate and a password. (run, who and watch on a
// bucket are in cli-run.test.ts and cli-who-watch.test.ts.)
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { connect } from "@nats-io/transport-node";
import { Kvm } from "@nats-io/kv";
import { CliProcess, runCli } from "../kit/cli-process";
import { freePort } from "../kit/free-port";
import { startNats, type NatsServer } from "../kit/nats-server";
import { makeTestPki, type TestPki } from "../kit/tls";
import { exitOrFail } from "../kit/waiting";

const BUCKET = "cli_nats";
const BUCKET_TTL_SECONDS = 3;

let server: NatsServer;
let deadServer: string;

/** Makes `bucket` on the server at `url`; `options` for a server with TLS and a password. */
async function makeBucket(url: string, bucket: string, ttlSeconds: number, options: object = {}): Promise<void> {
  const nc = await connect({ servers: url, ...options });
  await new Kvm(nc).create(bucket, { ttl: ttlSeconds * 1000, history: 1 });
  await nc.close();
}

before(async () => {
  server = await startNats();
  await makeBucket(server.url, BUCKET, BUCKET_TTL_SECONDS);
  await makeBucket(server.url, "no_ttl", 0);
  // A port nothing listens on: connections are refused.
  deadServer = `nats://127.0.0.1:${await freePort()}`;
});

after(async () => {
  await server?.close();
  exitOrFail();
});

function assertNoStack(stderr: string): void {
  assert.doesNotMatch(stderr, /^\s+at /m, `no stack trace in:\n${stderr}`);
}

describe("etcd-leader --backend nats: mistakes and failures", { timeout: 180_000 }, () => {
  const nats = (bucket = BUCKET) => ["--backend", "nats", "--server", server.url, "--bucket", bucket];
  const cases: { why: string; args: () => string[]; code: number; message: RegExp }[] = [
    {
      why: "a bucket that does not exist",
      args: () => ["who", ...nats("no_such_bucket"), "svc"],
      code: 69,
      message: /there is no KV bucket no_such_bucket at nats:\/\/127\.0\.0\.1:\d+ .*make it with a TTL, e.g\. nats kv add --ttl 10s no_such_bucket, or check --bucket/,
    },
    { why: "a bucket name NATS refuses", args: () => ["watch", ...nats("bad.name"), "svc"], code: 64, message: /--bucket "bad\.name": invalid bucket name/ },
    { why: "no --bucket", args: () => ["who", "--backend", "nats", "--server", server.url, "svc"], code: 64, message: /--backend nats needs --bucket NAME/ },
    {
      why: "a --ttl that is not the bucket's",
      args: () => ["run", ...nats(), "--ttl", "10", "svc", "--", "true"],
      code: 64,
      message: new RegExp(`--ttl 10 differs from the TTL of bucket ${BUCKET} \\(max_age ${BUCKET_TTL_SECONDS} s\\)`),
    },
    { why: "a bucket without a TTL", args: () => ["run", ...nats("no_ttl"), "svc", "--", "true"], code: 64, message: /bucket no_ttl: the bucket has no TTL/ },
    { why: "a key NATS refuses", args: () => ["who", ...nats(), "a b"], code: 64, message: /NATS refuses the key "a b"/ },
    { why: "etcd's --endpoints", args: () => ["who", ...nats(), "--endpoints", "http://127.0.0.1:2379", "svc"], code: 64, message: /--endpoints is for etcd.*use --server/ },
    { why: "etcd's --cacert", args: () => ["who", ...nats(), "--cacert", "ca.pem", "svc"], code: 64, message: /--cacert is for etcd.*use --tlsca/ },
    { why: "--bucket without --backend nats", args: () => ["who", "--bucket", BUCKET, "svc"], code: 64, message: /--bucket is for --backend nats/ },
    { why: "--go-members without --backend nats", args: () => ["run", "--go-members", "svc", "--", "true"], code: 64, message: /--go-members is for --backend nats/ },
    { why: "--tlscert without --tlskey", args: () => ["who", ...nats(), "--tlscert", "client.pem", "svc"], code: 64, message: /--tlscert and --tlskey go together/ },
  ];
  for (const { why, args, code, message } of cases) {
    it(`${why}: exit ${code} with a helpful message`, async () => {
      const result = await runCli(args());
      assert.equal(result.code, code, `${result.stdout}\n${result.stderr}`);
      assert.match(result.stderr, message);
      assertNoStack(result.stderr);
    });
  }

  for (const command of ["who", "watch", "run"]) {
    it(`${command} against a NATS server that cannot be reached: exit 69, naming the server and what to check`, async () => {
      const tail = command === "run" ? ["--", "true"] : [];
      const { code, stderr } = await runCli([command, "--backend", "nats", "--server", deadServer, "--bucket", BUCKET, "svc", ...tail]);
      assert.equal(code, 69, stderr);
      assert.ok(stderr.includes(`cannot connect to NATS at ${deadServer}`), stderr);
      assert.match(stderr, /check --server \(or NATS_URL\), --bucket, the TLS files/);
      assertNoStack(stderr);
    });
  }

  it("NATS_URL is used when --server is not given", async () => {
    const { code, stderr } = await runCli(["who", "--backend", "nats", "--bucket", BUCKET, "svc"], 30_000, { NATS_URL: deadServer });
    assert.equal(code, 69);
    assert.ok(stderr.includes(deadServer), stderr);
  });
});

describe("etcd-leader run --backend nats --go-members", { timeout: 60_000 }, () => {
  it("is elected only once 0.75 x TTL + 5.2 s have passed since it began watching the key", async () => {
    const cli = new CliProcess(["run", "--json", "--go-members", "--backend", "nats", "--server", server.url, "--bucket", BUCKET, "go-members", "--", "sleep", "60"]);
    try {
      const joining = await cli.next("joining", 15_000);
      const elected = await cli.next("elected", 30_000);
      const waitMs = 0.75 * BUCKET_TTL_SECONDS * 1000 + 5_200;
      // Date.now() in the CLI's own lines; the member began watching after it said it joins.
      assert.ok(elected.at - joining.at >= waitMs, `elected ${elected.at - joining.at} ms after joining, before the ${waitMs} ms a Go leader may believe`);
      cli.kill("SIGTERM");
      assert.equal((await cli.exited).code, 0);
    } finally {
      cli.kill("SIGKILL");
    }
  });
});

describe("etcd-leader --backend nats: TLS with a client certificate and a password", { timeout: 60_000 }, () => {
  let pki: TestPki;
  let secure: NatsServer;
  const auth = { user: "elector", password: "s3cret" };

  before(async () => {
    pki = makeTestPki();
    secure = await startNats({
      tls: { certFile: pki.server.certFile, keyFile: pki.server.keyFile, caFile: pki.caFile, clientCertAuth: true },
      auth,
    });
    const tls = { caFile: pki.caFile, certFile: pki.client.certFile, keyFile: pki.client.keyFile };
    await makeBucket(secure.url, BUCKET, BUCKET_TTL_SECONDS, { tls, user: auth.user, pass: auth.password });
  });

  after(async () => {
    await secure?.close();
    pki?.cleanup();
  });

  const flags = () => ["--backend", "nats", "--server", secure.url, "--bucket", BUCKET, "--tlsca", pki.caFile];

  it("who reads the bucket with --tlsca, --tlscert, --tlskey, --user and --password", async () => {
    const { code, stdout, stderr } = await runCli([
      "who", ...flags(), "--tlscert", pki.client.certFile, "--tlskey", pki.client.keyFile, "--user", auth.user, "--password", auth.password, "svc",
    ]);
    assert.equal(code, 3, stderr);
    assert.equal(stdout, "nobody leads svc");
  });

  it("a wrong password is refused: exit 69 with what to check", async () => {
    const { code, stderr } = await runCli([
      "who", ...flags(), "--tlscert", pki.client.certFile, "--tlskey", pki.client.keyFile, "--user", auth.user, "--password", "wrong", "svc",
    ]);
    assert.equal(code, 69, stderr);
    assert.match(stderr, /cannot connect to NATS at tls:\/\/127\.0\.0\.1:\d+: .*[Aa]uthorization/);
    assertNoStack(stderr);
  });
});
