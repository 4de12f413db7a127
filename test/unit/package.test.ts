// The published entry points: require() and import both give the factory, and
// both reach one implementation, so instanceof checks agree across them.
import assert from "node:assert/strict";
import { describe, it } from "node:test";

describe("package entry points", () => {
  it("require('etcd-leader') returns the factory itself, as 0.0.1 did", () => {
    const etcdLeader = require("etcd-leader");
    assert.equal(typeof etcdLeader, "function");
    assert.equal(etcdLeader.length, 5);
    assert.equal(typeof etcdLeader.observe, "function");
  });

  it("import gives the factory as default export and the classes as named exports", async () => {
    const esm = await import("etcd-leader");
    const cjs = require("etcd-leader");
    assert.equal(esm.default, cjs);
    assert.equal(esm.Election, cjs.Election);
    assert.equal(esm.ElectionError, cjs.ElectionError);
    assert.equal(esm.observe, cjs.observe);
    assert.equal(esm.whoLeads, cjs.whoLeads);
    assert.equal(esm.etcd3Options, cjs.etcd3Options);
    assert.equal(esm.channels, cjs.channels);
    assert.equal(esm.LeadershipLostError, cjs.LeadershipLostError);
  });

  it("ships only the build, the documentation, the README and the license", () => {
    const manifest = require("../../package.json");
    assert.deepEqual(manifest.files, ["dist", "docs", "README.md", "LICENSE"]);
    assert.deepEqual(Object.keys(manifest.dependencies).sort(), ["debug", "eventemitter3"]);
    assert.ok(manifest.peerDependenciesMeta["node-etcd"].optional);
    assert.ok(manifest.peerDependenciesMeta.etcd3.optional);
  });

  it("loads without either etcd client installed", () => {
    const { execFileSync } = require("node:child_process");
    // A resolver hook that hides both clients: the package must not load them itself.
    const script = `
      const Module = require("node:module");
      const resolve = Module._resolveFilename;
      Module._resolveFilename = function (request, ...rest) {
        if (request === "node-etcd" || request === "etcd3") throw new Error("not installed: " + request);
        return resolve.call(this, request, ...rest);
      };
      const etcdLeader = require("etcd-leader");
      const fake = { create() {}, get() {}, set() {}, del() {} };
      etcdLeader(fake, "/k", "n", 5);
      try {
        etcdLeader.etcd3Options();
        console.log("etcd3Options() did not notice etcd3 is missing");
      } catch (err) {
        console.log(/needs the etcd3 package/.test(err.message) ? "ok" : err.message);
      }
    `;
    assert.equal(execFileSync(process.execPath, ["-e", script], { encoding: "utf8" }).trim(), "ok");
  });

  it("etcd-leader/nats gives natsLeader to require and import alike, and loads no NATS module itself", async () => {
    const cjs = require("etcd-leader/nats");
    const esm = await import("etcd-leader/nats");
    assert.equal(typeof cjs.natsLeader, "function");
    assert.equal(esm.natsLeader, cjs.natsLeader);
    assert.equal(typeof cjs.natsLeader.observe, "function");
    assert.equal(typeof cjs.natsLeader.whoLeads, "function");
    const manifest = require("../../package.json");
    assert.ok(manifest.peerDependenciesMeta["@nats-io/kv"].optional);
    const { execFileSync } = require("node:child_process");
    // A resolver hook that fails any NATS module, and the main entry must not load the NATS one.
    const script = `
      const Module = require("node:module");
      const resolve = Module._resolveFilename;
      Module._resolveFilename = function (request, ...rest) {
        if (request.startsWith("@nats-io/")) throw new Error("not installed: " + request);
        return resolve.call(this, request, ...rest);
      };
      require("etcd-leader");
      const main = Object.keys(require.cache).some((file) => file.endsWith("nats.js"));
      const { natsLeader } = require("etcd-leader/nats");
      console.log(main ? "main loaded nats" : typeof natsLeader);
    `;
    assert.equal(execFileSync(process.execPath, ["-e", script], { encoding: "utf8" }).trim(), "function");
  });
});
