/**
 * CLI of the provider simulator.
 *
 *   node simulator/main.ts [--port 9901] [--host 127.0.0.1] [--api-key KEY]
 *                          [--aws-key ID:SECRET] [--entra-client ID:SECRET]
 *                          [--google-service-account KEY_FILE …] [--models a,b] [--history 200] [--<knob> VALUE …]
 *
 * Every knob (see knobs.ts) is also a flag setting its instance default. Once listening
 * it prints one JSON line to stdout, `{"event":"listening","url":"http://HOST:PORT"}`,
 * and nothing else; SIGTERM/SIGINT close the server and the process exits 0.
 */

import { createPublicKey } from "node:crypto";
import { readFileSync } from "node:fs";
import { parseArgs } from "node:util";
import type { ParseArgsConfig } from "node:util";
import { KNOB_NAMES } from "./knobs.ts";
import { DEFAULT_PORT, startSimulator } from "./server.ts";

const USAGE = `Usage: node simulator/main.ts [options]
  --port N            TCP port (default ${DEFAULT_PORT}; 0 picks a free one)
  --host H            interface to bind (default 127.0.0.1)
  --api-key K         require "Authorization: Bearer K" or "x-api-key: K"
  --aws-key ID:SECRET require Bedrock requests to be SigV4-signed with this access key
  --entra-client I:S  the fake Entra ID token endpoint issues tokens only to client id I with secret S
  --google-service-account F
                      the fake Google token endpoint grants tokens to the service account of key
                      file F (its JSON; repeatable); Vertex routes then need a token it issued
  --models a,b        ids listed by GET /v1/models
  --history N         requests kept for GET /__sim/requests (default 200)
  --<knob> V          instance default of a knob: ${KNOB_NAMES.join(", ")}
  --help              show this text
See docs/simulator.md.`;

function fail(message: string): never {
  process.stderr.write(`${JSON.stringify({ event: "error", message })}\n`);
  process.exit(2);
}

function integer(flag: string, text: string | undefined, fallback: number): number {
  if (text === undefined) return fallback;
  if (!/^\d+$/.test(text)) fail(`--${flag} must be a non-negative integer`);
  return Number(text);
}

const options: NonNullable<ParseArgsConfig["options"]> = {
  port: { type: "string" },
  host: { type: "string" },
  "api-key": { type: "string" },
  "aws-key": { type: "string" },
  "entra-client": { type: "string" },
  "google-service-account": { type: "string", multiple: true },
  models: { type: "string" },
  history: { type: "string" },
  help: { type: "boolean" },
};
for (const knob of KNOB_NAMES) options[knob] = { type: "string" };

let values: Record<string, string | boolean | (string | boolean)[] | undefined>;
try {
  values = parseArgs({ options, strict: true, allowPositionals: false }).values;
} catch (error) {
  fail(`${(error as Error).message}\n${USAGE}`);
}
if (values["help"] === true) {
  process.stdout.write(`${USAGE}\n`);
  process.exit(0);
}

const str = (name: string): string | undefined => {
  const value = values[name];
  return typeof value === "string" ? value : undefined;
};

const knobs: Record<string, string> = {};
for (const knob of KNOB_NAMES) {
  const value = str(knob);
  if (value !== undefined) knobs[knob] = value;
}
const models = str("models")
  ?.split(",")
  .map((m) => m.trim())
  .filter((m) => m !== "");

const awsKey = str("aws-key");
const colon = awsKey?.indexOf(":") ?? -1;
if (awsKey !== undefined && colon <= 0) fail("--aws-key must be ACCESS_KEY_ID:SECRET_ACCESS_KEY");
const aws = awsKey === undefined ? undefined : { accessKeyId: awsKey.slice(0, colon), secretAccessKey: awsKey.slice(colon + 1) };
const entra = str("entra-client");
const entraColon = entra?.indexOf(":") ?? -1;
if (entra !== undefined && entraColon <= 0) fail("--entra-client must be CLIENT_ID:CLIENT_SECRET");
const entraClient = entra === undefined ? undefined : { clientId: entra.slice(0, entraColon), clientSecret: entra.slice(entraColon + 1) };

/** Each key file's account: its email and the public half of its key (the endpoint verifies with it). */
const googleServiceAccounts: Record<string, string> = {};
const keyFiles = values["google-service-account"];
for (const file of Array.isArray(keyFiles) ? keyFiles : []) {
  if (typeof file !== "string") continue;
  let account: { client_email?: unknown; private_key?: unknown };
  try {
    account = JSON.parse(readFileSync(file, "utf8")) as typeof account;
  } catch (error) {
    fail(`--google-service-account ${file}: not a readable JSON key file (${(error as Error).message})`);
  }
  if (typeof account.client_email !== "string" || typeof account.private_key !== "string") fail(`--google-service-account ${file}: a key file has client_email and private_key`);
  try {
    googleServiceAccounts[account.client_email] = createPublicKey(account.private_key).export({ type: "spki", format: "pem" }).toString();
  } catch {
    fail(`--google-service-account ${file}: private_key is not a PEM private key`);
  }
}

let simulator: Awaited<ReturnType<typeof startSimulator>>;
try {
  simulator = await startSimulator({
    port: integer("port", str("port"), DEFAULT_PORT),
    host: str("host") ?? "127.0.0.1",
    apiKey: str("api-key"),
    aws,
    ...(entraClient !== undefined ? { entraClient } : {}),
    googleServiceAccounts,
    models: models && models.length > 0 ? models : undefined,
    history: integer("history", str("history"), 200),
    knobs,
  });
} catch (error) {
  fail((error as Error).message);
}

process.stdout.write(`${JSON.stringify({ event: "listening", url: simulator.url })}\n`);

let stopping = false;
const stop = (): void => {
  if (stopping) return;
  stopping = true;
  simulator.close().then(
    () => process.exit(0),
    (error: unknown) => fail(`close failed: ${(error as Error).message}`),
  );
};
process.once("SIGTERM", stop);
process.once("SIGINT", stop);
