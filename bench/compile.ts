// The member processes run as plain JavaScript: at the start of a run the
// TypeScript of src/ and bench/ (the member dialect, bench/member-protocol.ts,
// included) is transpiled, file by file, into a scratch
// directory under .tmp/ (ignored by git). A member process then starts in a
// fraction of the time `--import tsx` takes, which matters when a crash trial
// starts a dozen of them at once on two cores. Same sources, same semantics:
// the project compiles with isolatedModules.
import { mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { dirname, join, relative } from "node:path";
import ts from "typescript";

const repoRoot = join(__dirname, "..");

function sources(dir: string): string[] {
  const out: string[] = [];
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) {
      if (entry.name !== "results" && entry.name !== "node_modules") out.push(...sources(path));
    } else if (entry.name.endsWith(".ts") && !entry.name.endsWith(".d.ts")) out.push(path);
  }
  return out;
}

/** Transpiles src/ and bench/ into a fresh scratch directory; returns it. */
export function compileMembers(): string {
  const outRoot = join(repoRoot, ".tmp", `bench-js-${process.pid}`);
  rmSync(outRoot, { recursive: true, force: true });
  for (const file of [...sources(join(repoRoot, "src")), ...sources(join(repoRoot, "bench"))]) {
    const output = ts.transpileModule(readFileSync(file, "utf8"), {
      fileName: file,
      compilerOptions: {
        module: ts.ModuleKind.CommonJS,
        target: ts.ScriptTarget.ES2022,
        esModuleInterop: true,
        isolatedModules: true,
      },
    });
    const target = join(outRoot, relative(repoRoot, file)).replace(/\.ts$/, ".js");
    mkdirSync(dirname(target), { recursive: true });
    writeFileSync(target, output.outputText);
  }
  return outRoot;
}

export function removeCompiled(outRoot: string | undefined): void {
  if (outRoot) rmSync(outRoot, { recursive: true, force: true });
}
