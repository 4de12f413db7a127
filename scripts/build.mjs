// Builds dist/cjs with tsc, then a thin ES module wrapper around it in dist/esm.
// One implementation serves both `require` and `import`, so a process that
// loads the package both ways still has one Election class (instanceof works).
import { execFileSync } from "node:child_process";
import { mkdirSync, rmSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";

const require = createRequire(import.meta.url);
rmSync("dist", { recursive: true, force: true });
execFileSync(process.execPath, [require.resolve("typescript/bin/tsc"), "-p", "tsconfig.build.json"], { stdio: "inherit" });

const factory = require("../dist/cjs/index.js");
const named = Object.keys(factory).filter((name) => name !== "default").sort();
mkdirSync("dist/esm", { recursive: true });

writeFileSync(
  "dist/esm/index.mjs",
  `import etcdLeader from "../cjs/index.js";\n` +
    `export default etcdLeader;\n` +
    `export const { ${named.join(", ")} } = etcdLeader;\n`,
);

const classes = named.filter((name) => /^[A-Z]/.test(name));
const functions = named.filter((name) => !/^[A-Z]/.test(name));
const types = ["ElectionOptions", "ElectionEvents", "ObserverEvents", "ElectionPhase"];
writeFileSync(
  "dist/esm/index.d.mts",
  `import etcdLeader from "../cjs/index.js";\n` +
    `export default etcdLeader;\n` +
    functions.map((name) => `export declare const ${name}: typeof etcdLeader.${name};\n`).join("") +
    classes.map((name) => `export declare const ${name}: typeof etcdLeader.${name};\nexport type ${name} = etcdLeader.${name};\n`).join("") +
    types.map((name) => `export type ${name} = etcdLeader.${name};\n`).join(""),
);
console.log(`built dist/cjs and dist/esm (${named.length} named exports)`);
