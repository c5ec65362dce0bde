import { generateKeyPairSync } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

/** A Google service account made for one test: its key file, and that file on disk for the simulator. */
export interface TestServiceAccount {
  readonly email: string;
  /** The PEM private key (PKCS#8), as the key file holds it. */
  readonly privateKey: string;
  /** The key file's JSON as the gateway's secret holds it, with its `token_uri`. */
  keyFile(tokenUri: string): string;
  /** A key file on disk without a token URI, for the simulator's `--google-service-account`. */
  readonly path: string;
  /** Removes the file. */
  remove(): void;
}

/** A fresh RSA service account (Google's key files hold a 2048-bit PKCS#8 key). */
export function testServiceAccount(email: string): TestServiceAccount {
  const { privateKey } = generateKeyPairSync("rsa", { modulusLength: 2048, privateKeyEncoding: { type: "pkcs8", format: "pem" }, publicKeyEncoding: { type: "spki", format: "pem" } });
  const dir = mkdtempSync(join(tmpdir(), "sluice-sa-"));
  const base = { type: "service_account", project_id: "sluice-e2e", private_key_id: "e2e-key-1", private_key: privateKey, client_email: email };
  const path = join(dir, "key.json");
  writeFileSync(path, JSON.stringify(base));
  return {
    email,
    privateKey,
    keyFile: (tokenUri) => JSON.stringify({ ...base, token_uri: tokenUri }),
    path,
    remove: () => rmSync(dir, { recursive: true, force: true }),
  };
}

/** A piece of the key's body long enough to stand for it in a scan, and free of PEM framing. */
export function keyFingerprint(privateKey: string): string {
  const body = privateKey.split("\n").filter((l) => l !== "" && !l.startsWith("-----"));
  return body[Math.floor(body.length / 2)]!;
}
