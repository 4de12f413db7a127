// Throwaway certificates for tests that run etcd over TLS: a CA, a server
// certificate for 127.0.0.1 signed by it, a client certificate signed by it,
// and, to be refused, a second CA with a client certificate of its own.
// Made with the openssl command line in a temporary directory; `cleanup()`
// removes it.
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

/** One certificate: its files and their PEM text. */
export interface CertificateFiles {
  certFile: string;
  keyFile: string;
  cert: string;
  key: string;
}

export interface TestPki {
  dir: string;
  /** The CA that signs the server and the trusted client. */
  caFile: string;
  ca: string;
  /** For 127.0.0.1: subjectAltName IP:127.0.0.1, DNS:localhost; usable as a client certificate too (etcd's gateway dials itself with it). */
  server: CertificateFiles;
  /** A client certificate signed by the CA (CN etcd-leader-test-client). */
  client: CertificateFiles;
  /** A CA the server does not know, and a client certificate it signed. */
  otherCaFile: string;
  otherCa: string;
  otherClient: CertificateFiles;
  /** Removes every file. Safe to call twice. */
  cleanup(): void;
}

/** Whether the openssl command line is there. */
export function hasOpenssl(): boolean {
  try {
    execFileSync("openssl", ["version"], { stdio: "ignore" });
    return true;
  } catch {
    return false;
  }
}

/** Makes a fresh PKI in a temporary directory. Takes a few hundred milliseconds. */
export function makeTestPki(): TestPki {
  const dir = mkdtempSync(join(tmpdir(), "etcd-leader-tls-"));
  try {
    const path = (name: string) => join(dir, name);
    const openssl = (args: string[]) => execFileSync("openssl", args, { cwd: dir, stdio: ["ignore", "ignore", "pipe"] });

    const makeCa = (name: string, subject: string) => {
      openssl([
        "req", "-x509", "-new", "-nodes",
        "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
        "-keyout", path(`${name}.key`), "-out", path(`${name}.crt`),
        "-days", "2", "-subj", subject,
        "-addext", "basicConstraints=critical,CA:TRUE",
        "-addext", "keyUsage=critical,keyCertSign,cRLSign",
      ]);
    };

    const issue = (name: string, ca: string, subject: string, extensions: string[]): CertificateFiles => {
      const extFile = path(`${name}.ext`);
      writeFileSync(extFile, extensions.join("\n") + "\n");
      openssl([
        "req", "-new", "-nodes",
        "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
        "-keyout", path(`${name}.key`), "-out", path(`${name}.csr`),
        "-subj", subject,
      ]);
      openssl([
        "x509", "-req", "-in", path(`${name}.csr`),
        "-CA", path(`${ca}.crt`), "-CAkey", path(`${ca}.key`), "-CAcreateserial",
        "-out", path(`${name}.crt`), "-days", "2", "-extfile", extFile,
      ]);
      return {
        certFile: path(`${name}.crt`),
        keyFile: path(`${name}.key`),
        cert: readFileSync(path(`${name}.crt`), "utf8"),
        key: readFileSync(path(`${name}.key`), "utf8"),
      };
    };

    const leaf = ["basicConstraints=CA:FALSE", "keyUsage=critical,digitalSignature,keyEncipherment"];
    makeCa("ca", "/CN=etcd-leader test CA");
    makeCa("other-ca", "/CN=etcd-leader untrusted CA");
    const server = issue("server", "ca", "/CN=127.0.0.1", [
      ...leaf,
      "extendedKeyUsage=serverAuth,clientAuth",
      "subjectAltName=IP:127.0.0.1,DNS:localhost",
    ]);
    const client = issue("client", "ca", "/CN=etcd-leader-test-client", [...leaf, "extendedKeyUsage=clientAuth"]);
    const otherClient = issue("other-client", "other-ca", "/CN=etcd-leader-test-client", [
      ...leaf,
      "extendedKeyUsage=clientAuth",
    ]);

    return {
      dir,
      caFile: path("ca.crt"),
      ca: readFileSync(path("ca.crt"), "utf8"),
      server,
      client,
      otherCaFile: path("other-ca.crt"),
      otherCa: readFileSync(path("other-ca.crt"), "utf8"),
      otherClient,
      cleanup: () => rmSync(dir, { recursive: true, force: true }),
    };
  } catch (err) {
    rmSync(dir, { recursive: true, force: true });
    const stderr = (err as { stderr?: Buffer }).stderr?.toString().trim();
    throw new Error(`could not make test certificates with openssl: ${stderr || (err as Error).message}`, { cause: err });
  }
}
