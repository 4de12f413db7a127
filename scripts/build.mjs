// Builds dist/cjs with tsc, then a thin ES module wrapper around it in dist/esm.
// One implementation serves both `require` and `import`, so a process that
// loads the package both ways still has one Election class (instanceof works).
// The build goes to a scratch dir first, so a failed build leaves dist/ as it was.
import { spawnSync } from "node:child_process";
import { chmodSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";

const require = createRequire(import.meta.url);
const scratch = "dist.partial";
rmSync(scratch, { recursive: true, force: true });
const tsc = spawnSync(
  process.execPath,
  [require.resolve("typescript/bin/tsc"), "-p", "tsconfig.build.json", "--outDir", `${scratch}/cjs`],
  { stdio: "inherit" },
);
if (tsc.status !== 0) {
  rmSync(scratch, { recursive: true, force: true });
  console.error("build failed: dist/ left unchanged");
  process.exit(1);
}

// The `etcd-leader` command (package.json "bin"): tsc keeps the shebang of src/cli/main.ts.
const cli = `${scratch}/cjs/cli/main.js`;
if (!readFileSync(cli, "utf8").startsWith("#!/usr/bin/env node\n")) {
  rmSync(scratch, { recursive: true, force: true });
  console.error(`build failed: ${cli} does not start with a shebang; dist/ left unchanged`);
  process.exit(1);
}
chmodSync(cli, 0o755);

const factory = require(`../${scratch}/cjs/index.js`);
const named = Object.keys(factory).filter((name) => name !== "default").sort();
mkdirSync(`${scratch}/esm`, { recursive: true });

writeFileSync(
  `${scratch}/esm/index.mjs`,
  `import etcdLeader from "../cjs/index.js";\n` +
    `export default etcdLeader;\n` +
    `export const { ${named.join(", ")} } = etcdLeader;\n`,
);

const classes = named.filter((name) => /^[A-Z]/.test(name));
const functions = named.filter((name) => !/^[A-Z]/.test(name));
// Type-only names of the namespace; generic ones with their parameters.
const types = [
  "ElectionOptions", "ElectionEvents", "ObserverEvents", "ElectionPhase",
  "ElectionSettings", "ObserverSettings", "ElectionTarget", "WhoLeadsOptions", "WhoLeadsSettings", "Etcd3Options",
  "StartOptions", "ObserverStartOptions", "Leader", "LeaderChanges",
  "LeadershipTerm", "LeadershipRoutine<T>", "WhileLeadingOptions", "OnLoss", "WaitOptions",
  "ElectionState", "StateMessage", "RenewalMessage", "RetryMessage", "ErrorMessage",
  "Membership", "LeaderListener",
];
/** Types generic over the membership a backend holds. */
const membershipGenerics = ["ElectionBackend", "Claim"];
writeFileSync(
  `${scratch}/esm/index.d.mts`,
  `import etcdLeader from "../cjs/index.js";\n` +
    `export default etcdLeader;\n` +
    functions.map((name) => `export declare const ${name}: typeof etcdLeader.${name};\n`).join("") +
    classes.map((name) => `export declare const ${name}: typeof etcdLeader.${name};\nexport type ${name} = etcdLeader.${name};\n`).join("") +
    types.map((name) => `export type ${name} = etcdLeader.${name};\n`).join("") +
    membershipGenerics
      .map((name) => `export type ${name}<M extends etcdLeader.Membership = etcdLeader.Membership> = etcdLeader.${name}<M>;\n`)
      .join(""),
);

// etcd-leader/nats: its own entry, so that the main one never loads it.
const nats = require(`../${scratch}/cjs/nats.js`);
const natsNamed = Object.keys(nats).filter((name) => name !== "default" && name !== "__esModule").sort();
writeFileSync(
  `${scratch}/esm/nats.mjs`,
  `import nats from "../cjs/nats.js";\n` + natsNamed.map((name) => `export const ${name} = nats.${name};\n`).join(""),
);
const natsTypes = ["NatsElectionOptions", "NatsElectionSettings", "NatsKvBucket"];
writeFileSync(
  `${scratch}/esm/nats.d.mts`,
  `import * as nats from "../cjs/nats.js";\n` +
    natsNamed.map((name) => `export declare const ${name}: typeof nats.${name};\n`).join("") +
    natsTypes.map((name) => `export type ${name} = nats.${name};\n`).join(""),
);

// etcd-leader/postgres and etcd-leader/redis: entries of their own too. Their
// ES module wrappers re-export the values by name and every type with `export *`.
for (const entry of ["postgres", "redis"]) {
  const module = require(`../${scratch}/cjs/${entry}.js`);
  const names = Object.keys(module).filter((name) => name !== "default" && name !== "__esModule").sort();
  writeFileSync(
    `${scratch}/esm/${entry}.mjs`,
    `import entry from "../cjs/${entry}.js";\n` + names.map((name) => `export const ${name} = entry.${name};\n`).join(""),
  );
  writeFileSync(`${scratch}/esm/${entry}.d.mts`, `export * from "../cjs/${entry}.js";\n`);
}

rmSync("dist", { recursive: true, force: true });
renameSync(scratch, "dist");
console.log(`built dist/cjs and dist/esm (${named.length} named exports)`);
