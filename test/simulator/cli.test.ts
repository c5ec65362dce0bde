/**
 * The CLI as the gateway's `npm start` and the e2e suites use it: a child process that
 * announces its URL on stdout and exits 0 on SIGTERM.
 */

import { spawn } from "node:child_process";
import type { ChildProcessWithoutNullStreams } from "node:child_process";
import { once } from "node:events";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { exportPKCS8, generateKeyPair } from "jose";
import { googleServiceAccountTokenSource } from "../../src/invoker/auth/google-service-account.ts";
import { afterEach, describe, expect, it } from "vitest";
import OpenAI from "openai";
import { nodeBinary, user } from "./helpers.ts";

const MAIN = fileURLToPath(new URL("../../simulator/main.ts", import.meta.url));

const children: ChildProcessWithoutNullStreams[] = [];
afterEach(() => {
  for (const child of children.splice(0)) if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
});

/** Spawns the CLI and resolves with the parsed listening line. */
async function spawnSimulator(args: string[]): Promise<{ child: ChildProcessWithoutNullStreams; url: string; line: string }> {
  const child = spawn(nodeBinary(), [MAIN, "--port", "0", ...args], { stdio: "pipe" });
  children.push(child);
  let stdout = "";
  let stderr = "";
  child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
  const line = await new Promise<string>((resolve, reject) => {
    child.stdout.on("data", (chunk: Buffer) => {
      stdout += chunk.toString();
      const end = stdout.indexOf("\n");
      if (end !== -1) resolve(stdout.slice(0, end));
    });
    child.once("exit", (code) => reject(new Error(`simulator exited with ${code}: ${stderr}`)));
  });
  const parsed = JSON.parse(line) as { event: string; url: string };
  return { child, url: parsed.url, line };
}

// Each test starts a Node process; allow for a loaded machine.
describe("simulator CLI", { timeout: 30_000 }, () => {
  it("prints one listening line, serves requests with its flags, and exits 0 on SIGTERM", async () => {
    const { child, url, line } = await spawnSimulator(["--api-key", "cli-key", "--models", "x1,x2", "--tokens", "4"]);
    expect(JSON.parse(line)).toEqual({ event: "listening", url });
    expect(url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);

    const openai = new OpenAI({ apiKey: "cli-key", baseURL: `${url}/v1`, maxRetries: 0 });
    const res = await openai.chat.completions.create({ model: "any", messages: user("hello") });
    expect(res.choices[0]?.message.content?.split(" ")).toHaveLength(4);
    expect((await openai.models.list()).data.map((m) => m.id)).toEqual(["x1", "x2"]);
    const denied = await new OpenAI({ apiKey: "other", baseURL: `${url}/v1`, maxRetries: 0 })
      .chat.completions.create({ model: "any", messages: user("hello") })
      .catch((e: unknown) => e);
    expect(denied).toBeInstanceOf(OpenAI.AuthenticationError);

    const exited = once(child, "exit");
    child.kill("SIGTERM");
    const [code, signal] = (await exited) as [number | null, NodeJS.Signals | null];
    expect({ code, signal }).toEqual({ code: 0, signal: null });
  });

  it("exits 0 on SIGTERM while a stream is open", async () => {
    const { child, url } = await spawnSimulator([]);
    const res = await fetch(`${url}/v1/chat/completions`, {
      method: "POST",
      body: JSON.stringify({ model: "m", stream: true, messages: user("x [[sim token-interval-ms=60000]]") }),
    });
    const reader = res.body?.getReader();
    await reader?.read(); // the role chunk: the stream is now parked on a long timer
    const exited = once(child, "exit");
    child.kill("SIGTERM");
    const [code] = (await exited) as [number | null];
    expect(code).toBe(0);
    await reader?.cancel().catch(() => {});
  });

  it("grants Google tokens to the service account of a key file given with --google-service-account", async () => {
    const dir = mkdtempSync(join(tmpdir(), "sim-sa-"));
    try {
      const keys = await generateKeyPair("RS256", { extractable: true });
      const account = { type: "service_account", client_email: "cli@sim.iam.gserviceaccount.com", private_key: await exportPKCS8(keys.privateKey) };
      const file = join(dir, "key.json");
      writeFileSync(file, JSON.stringify(account));
      const { url } = await spawnSimulator(["--google-service-account", file]);
      const mint = (over: Record<string, unknown>) =>
        googleServiceAccountTokenSource({ credentials: JSON.stringify({ ...account, token_uri: `${url}/token`, ...over }), fetch, clock: { now: () => Date.now() } }).mint(new AbortController().signal);
      const { token } = await mint({});
      const vertex = (bearer: string) =>
        fetch(`${url}/v1/projects/p/locations/l/publishers/google/models/m:generateContent`, { method: "POST", headers: { authorization: `Bearer ${bearer}` }, body: JSON.stringify({ contents: [{ parts: [{ text: "x" }] }] }) });
      expect((await vertex(token)).status).toBe(200);
      // With an account configured, Vertex needs a token the endpoint issued; another account gets
      // none: the token endpoint refuses the gateway's own credential.
      expect((await vertex("ya29.forged")).status).toBe(401);
      await expect(mint({ client_email: "other@sim.iam.gserviceaccount.com" })).rejects.toMatchObject({ code: "upstream_auth_failed" });
      // A file that is not a key file stops the CLI with exit code 2.
      writeFileSync(file, "{}");
      const child = spawn(nodeBinary(), [MAIN, "--port", "0", "--google-service-account", file], { stdio: "pipe" });
      children.push(child);
      const [code] = (await once(child, "exit")) as [number | null];
      expect(code).toBe(2);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("rejects an unknown flag and an invalid knob with exit code 2", async () => {
    for (const args of [["--bogus"], ["--fault", "explode"]]) {
      const child = spawn(nodeBinary(), [MAIN, "--port", "0", ...args], { stdio: "pipe" });
      children.push(child);
      let stderr = "";
      child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
      const [code] = (await once(child, "exit")) as [number | null];
      expect(code).toBe(2);
      expect(JSON.parse(stderr.split("\n")[0] ?? "")).toMatchObject({ event: "error" });
    }
  });
});
