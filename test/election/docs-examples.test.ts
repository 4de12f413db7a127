// The documentation's examples of the promise, signal and iteration API run
// as they stand, against a real etcd, so that they cannot rot: every ```js and
// ```ts block of docs/api.md from "## Promises, signals and iteration" on, and
// of docs/diagnostics.md up to "### Metrics with prom-client" (prom-client is
// no dependency of this package), is written to a file and run with node (tsx
// for TypeScript), with the examples' etcd address replaced by the test
// etcd's. Each must exit 0 by itself, print what it says it prints, and
// nothing on stderr. They load the package by its name, so they run against
// the build (npm test builds first).
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { startEtcd, type EtcdCluster } from "../kit/etcd-server";
import { REPO_ROOT } from "../kit/paths";

/** Where the examples are: a file, and the headings they run from and up to (undefined: its end). */
const SECTIONS: Array<{ file: string; from: string; to: string | undefined }> = [
  { file: "docs/api.md", from: "## Promises, signals and iteration", to: undefined },
  { file: "docs/diagnostics.md", from: "## State and diagnostics", to: "### Metrics with prom-client" },
];
const DOCS_ETCD = "127.0.0.1:2379";
const RUN_TIMEOUT_MS = 60_000;

/** What each example prints, in the order of SECTIONS: a new example needs a line here. */
const PRINTS: RegExp[] = [
  /invoice inv-3 sent under fencing token \d+\n3 invoices sent/,
  /the job ran/,
  /written under this term/,
  /leading with fencing token \d+/,
  /nobody leads/,
  /nobody in line/,
  /consumer-1 leads \(token \d+\)/,
  /fencing token \d+/,
  /reporter-1: stopped -> joining\nreporter-1: joining -> following\nreporter-1: following -> leading\nreporter-1: leading -> stopped/,
];

interface Example {
  language: "js" | "ts";
  code: string;
  heading: string;
}

function examples(): Example[] {
  const found: Example[] = [];
  for (const { file, from, to } of SECTIONS) {
    const text = readFileSync(join(REPO_ROOT, file), "utf8");
    const start = text.indexOf(`\n${from}\n`);
    const end = to === undefined ? text.length : text.indexOf(`\n${to}\n`);
    assert.ok(start >= 0 && end > start, `${file}: the sections "${from}" .. "${to ?? "the end"}" were not found`);
    const section = text.slice(start, end);
    let heading = from;
    const pattern = /^(#{2,3} .*)$|^```(js|ts)\n([\s\S]*?)^```$/gm;
    for (let match = pattern.exec(section); match; match = pattern.exec(section)) {
      if (match[1]) heading = match[1];
      else found.push({ language: match[2] as "js" | "ts", code: match[3]!, heading });
    }
  }
  return found;
}

function run(file: string, language: "js" | "ts"): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const args = language === "ts" ? ["--import", "tsx", file] : [file];
  return new Promise((resolve) => {
    execFile(process.execPath, args, { cwd: REPO_ROOT, timeout: RUN_TIMEOUT_MS, encoding: "utf8" }, (err, stdout, stderr) => {
      resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stdout, stderr });
    });
  });
}

let etcd: EtcdCluster;
let scratch: string;

before(async () => {
  etcd = await startEtcd();
  // Inside the package, so that require("etcd-leader") finds the package itself.
  mkdirSync(join(REPO_ROOT, ".tmp"), { recursive: true });
  scratch = mkdtempSync(join(REPO_ROOT, ".tmp", "readme-examples-"));
});

after(async () => {
  if (scratch) rmSync(scratch, { recursive: true, force: true });
  await etcd?.close();
});

describe("the documentation's examples", () => {
  const found = examples();

  it("one expectation per example", () => {
    assert.equal(found.length, PRINTS.length, `the documentation has ${found.length} examples in those sections, the test knows ${PRINTS.length}`);
  });

  found.forEach((example, index) => {
    it(`${example.heading.replace(/^#+ /, "")}, example ${index + 1} (${example.language})`, { timeout: RUN_TIMEOUT_MS + 5_000 }, async () => {
      assert.ok(example.code.includes(DOCS_ETCD), "the example connects to the documentation's etcd address");
      const file = join(scratch, `example-${index + 1}.${example.language}`);
      writeFileSync(file, example.code.replaceAll(DOCS_ETCD, etcd.hostPorts[0]!));
      const { code, stdout, stderr } = await run(file, example.language);
      assert.equal(stderr, "", `stderr of example ${index + 1}`);
      assert.equal(code, 0, `example ${index + 1} exited ${code}\n${stdout}`);
      assert.match(stdout, PRINTS[index]!);
    });
  });
});
