import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

/** A PEM certificate and its key, as text and as files. */
export interface IssuedPair {
  readonly cert: string;
  readonly key: string;
  readonly certFile: string;
  readonly keyFile: string;
}

/** A private CA made for one test run with the openssl CLI (P-256 keys, two days' validity). */
export interface TestCa {
  readonly cert: string;
  readonly certFile: string;
  /** A leaf certificate signed by this CA, for a server (`serverAuth`) or a client (`clientAuth`). */
  issue(name: string, use: "server" | "client", subjectAltName: string): IssuedPair;
  /** Deletes the files. */
  remove(): void;
}

/** Creates a private CA in a fresh temporary directory. */
export function createTestCa(): TestCa {
  const dir = mkdtempSync(join(tmpdir(), "sluice-ca-"));
  const openssl = (...args: string[]) => execFileSync("openssl", args, { cwd: dir, stdio: ["ignore", "pipe", "pipe"] });
  const ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"];
  openssl("req", "-x509", ...ec, "-keyout", "ca.key", "-out", "ca.pem", "-days", "2", "-subj", "/CN=Sluice Test CA", "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign");
  const certFile = join(dir, "ca.pem");
  return {
    cert: readFileSync(certFile, "utf8"),
    certFile,
    issue(name, use, subjectAltName) {
      openssl("req", ...ec, "-keyout", `${name}.key`, "-out", `${name}.csr`, "-subj", `/CN=${name}`);
      writeFileSync(join(dir, `${name}.ext`), `subjectAltName=${subjectAltName}\nextendedKeyUsage=${use === "server" ? "serverAuth" : "clientAuth"}\n`);
      openssl("x509", "-req", "-in", `${name}.csr`, "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial", "-out", `${name}.pem`, "-days", "2", "-extfile", `${name}.ext`);
      const pair = { certFile: join(dir, `${name}.pem`), keyFile: join(dir, `${name}.key`) };
      return { ...pair, cert: readFileSync(pair.certFile, "utf8"), key: readFileSync(pair.keyFile, "utf8") };
    },
    remove: () => rmSync(dir, { recursive: true, force: true }),
  };
}
