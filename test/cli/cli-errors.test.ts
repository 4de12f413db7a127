// The CLI's mistakes and failures: bad flags, a missing command or key, an
// etcd that cannot be reached. Each ends with a message that says what was
// wrong and how to fix it, a non-zero exit code (as documented), and never a
// stack trace. --help works for the tool and for each command.
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { runCli } from "../kit/cli-process";
import { freePort } from "../kit/free-port";
import { exitOrFail } from "../kit/waiting";

let deadEndpoint: string;

before(async () => {
  // A port nothing listens on: connections are refused.
  deadEndpoint = `http://127.0.0.1:${await freePort()}`;
});

after(() => exitOrFail());

function assertNoStack(stderr: string): void {
  assert.doesNotMatch(stderr, /^\s+at /m, `no stack trace in:\n${stderr}`);
}

describe("etcd-leader: usage errors and unreachable etcd", { timeout: 120_000 }, () => {
  const usageCases: { why: string; args: string[]; message: RegExp }[] = [
    { why: "no command", args: [], message: /Usage:/ },
    { why: "an unknown command", args: ["elect", "/k"], message: /unknown command "elect": the commands are run, who and watch/ },
    { why: "an unknown flag", args: ["run", "--ttll", "5", "/k", "--", "true"], message: /Unknown option '--ttll'[\s\S]*see: etcd-leader run --help/ },
    { why: "run without a command", args: ["run", "/k"], message: /run needs a command to run while leading/ },
    { why: "run without a key", args: ["run"], message: /run needs the election key/ },
    { why: "who without a key", args: ["who"], message: /who needs the election key/ },
    { why: "who with two keys", args: ["who", "/a", "/b"], message: /who takes one key/ },
    { why: "a ttl that is not a whole number", args: ["run", "--ttl", "2.5", "/k", "--", "true"], message: /--ttl must be a whole number of at least 1, got "2.5"/ },
    { why: "a grace period that is not a number", args: ["run", "--grace", "soon", "/k", "--", "true"], message: /--grace must be a number/ },
    { why: "an unknown signal", args: ["run", "--signal", "SIGFOO", "/k", "--", "true"], message: /--signal SIGFOO is not a signal/ },
    { why: "an unknown API", args: ["who", "--api", "v4", "/k"], message: /--api must be v3 or v2, got "v4"/ },
    { why: "a certificate without its key", args: ["who", "--cert", "/etc/hostname", "/k"], message: /--cert and --key go together/ },
    { why: "a CA file that does not exist", args: ["who", "--cacert", "/no/such/ca.pem", "/k"], message: /--cacert \/no\/such\/ca.pem: cannot read it \(ENOENT\)/ },
    { why: "a password without a user", args: ["who", "--password", "pw", "/k"], message: /--password needs --user/ },
    { why: "an unknown backend", args: ["who", "--backend", "zookeeper", "/k"], message: /--backend must be etcd, nats, postgres, redis, got "zookeeper"/ },
    { why: "an etcd flag on Redis", args: ["who", "--backend", "redis", "--endpoints", "x", "/k"], message: /--endpoints is for etcd, and this is --backend redis: use --url/ },
    { why: "a PostgreSQL flag on etcd", args: ["who", "--table", "t", "/k"], message: /--table is for --backend postgres, and this is etcd/ },
    { why: "a NATS flag on PostgreSQL", args: ["who", "--backend", "postgres", "--bucket", "b", "/k"], message: /--bucket is for --backend nats, and this is --backend postgres/ },
    { why: "PostgreSQL without a URL", args: ["who", "--backend", "postgres", "/k"], message: /--backend postgres needs --url/ },
    { why: "a URL that is not Redis's", args: ["who", "--backend", "redis", "--url", "http://x", "/k"], message: /is no Redis URL/ },
  ];
  for (const { why, args, message } of usageCases) {
    it(`${why}: exit 64 with a helpful message`, async () => {
      // Whatever the machine's environment says, the URL is missing where a case says so.
      const { code, stdout, stderr } = await runCli(args, undefined, { DATABASE_URL: "" });
      assert.equal(code, 64, `${stdout}\n${stderr}`);
      assert.match(args.length === 0 ? stdout : stderr, message);
      assertNoStack(stderr);
    });
  }

  for (const command of ["who", "watch", "run"] as const) {
    for (const api of ["v3", "v2"]) {
      it(`${command} against an unreachable etcd (${api}): exit 69, naming the endpoint and what to check`, async () => {
        const tail = command === "run" ? ["--", "true"] : [];
        const { code, stderr } = await runCli([command, "--api", api, "--endpoints", deadEndpoint, "/k", ...tail]);
        assert.equal(code, 69, stderr);
        assert.ok(stderr.includes(`cannot read the election at /k from etcd ${api} at ${deadEndpoint}`), stderr);
        assert.match(stderr, /check --endpoints \(or ETCDCTL_ENDPOINTS\)/);
        assertNoStack(stderr);
      });
    }
  }

  it("ETCDCTL_ENDPOINTS is used when --endpoints is not given", async () => {
    const { code, stderr } = await runCli(["who", "/k"], 30_000, { ETCDCTL_ENDPOINTS: deadEndpoint });
    assert.equal(code, 69);
    assert.ok(stderr.includes(deadEndpoint), stderr);
  });

  for (const command of ["run", "who", "watch"]) {
    it(`${command} --help describes the command, with examples, and exits 0`, async () => {
      const { code, stdout } = await runCli([command, "--help"]);
      assert.equal(code, 0);
      assert.match(stdout, new RegExp(`^Usage: etcd-leader ${command} KEY`));
      assert.match(stdout, /Examples:/);
      assert.match(stdout, /--endpoints URLS/);
    });
  }

  it("run --help says what each signal does, and what the command's process group gets", async () => {
    const { code, stdout } = await runCli(["run", "--help"]);
    assert.equal(code, 0);
    const signals = stdout.slice(stdout.indexOf("Signals:"), stdout.indexOf("Examples:"));
    for (const text of ["SIGINT", "SIGTERM", "SIGHUP", "a second one", "SIGKILL", "SIGSTOP", "process group", "--grace", "setsid"]) {
      assert.ok(signals.includes(text), `${text} in:\n${signals}`);
    }
  });

  it("--help lists the commands and the exit codes", async () => {
    const { code, stdout } = await runCli(["--help"]);
    assert.equal(code, 0);
    for (const text of ["etcd-leader run KEY", "etcd-leader who KEY", "etcd-leader watch KEY", "Exit codes:"]) assert.ok(stdout.includes(text), text);
  });
});
