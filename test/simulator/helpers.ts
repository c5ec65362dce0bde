/**
 * Shared test helpers: an in-process simulator on an ephemeral loopback port, the official
 * OpenAI client pointed at it, and small raw-HTTP utilities for what the client hides.
 */

import { request as httpRequest } from "node:http";
import { fileURLToPath } from "node:url";
import OpenAI from "openai";
import { startSimulator } from "../../simulator/server.ts";
import type { Simulator, SimulatorOptions } from "../../simulator/server.ts";
import type { StatsSnapshot, RecordedRequest } from "../../simulator/stats.ts";

/** Starts a simulator on 127.0.0.1:0. */
export function start(options: SimulatorOptions = {}): Promise<Simulator> {
  return startSimulator({ host: "127.0.0.1", port: 0, ...options });
}

/** The official client, no retries, so every call is exactly one request. */
export function client(sim: Simulator, apiKey = "test-key"): OpenAI {
  return new OpenAI({ apiKey, baseURL: `${sim.url}/v1`, maxRetries: 0, timeout: 10_000 });
}

/** `GET /__sim/stats`. */
export async function stats(sim: Simulator): Promise<StatsSnapshot> {
  return (await fetch(`${sim.url}/__sim/stats`)).json() as Promise<StatsSnapshot>;
}

/** `GET /__sim/requests?limit=N`. */
export async function requests(sim: Simulator, limit?: number): Promise<RecordedRequest[]> {
  const query = limit === undefined ? "" : `?limit=${limit}`;
  const body = (await (await fetch(`${sim.url}/__sim/requests${query}`)).json()) as { requests: RecordedRequest[] };
  return body.requests;
}

/** `POST /__sim/reset`. */
export async function reset(sim: Simulator): Promise<void> {
  await fetch(`${sim.url}/__sim/reset`, { method: "POST" });
}

/** Polls `check` until it returns true (for outcomes recorded when the server notices a close). */
export async function eventually(check: () => Promise<boolean>, attempts = 200): Promise<void> {
  for (let i = 0; i < attempts; i++) {
    if (await check()) return;
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  throw new Error("condition never became true");
}

/** Posts a chat request with plain fetch; returns the response. */
export function postChat(sim: Simulator, body: unknown, headers: Record<string, string> = {}): Promise<Response> {
  return fetch(`${sim.url}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body: typeof body === "string" ? body : JSON.stringify(body),
  });
}

/** The `data:` payloads of an SSE body, in order. */
export function sseData(text: string): string[] {
  return text
    .split("\n\n")
    .filter((frame) => frame.startsWith("data: "))
    .map((frame) => frame.slice(6));
}

/** A one-message user conversation. */
export function user(text: string): OpenAI.Chat.Completions.ChatCompletionMessageParam[] {
  return [{ role: "user", content: text }];
}

/** What {@link rawPost} saw: status, every body byte received, and whether the body completed. */
export interface RawResult {
  readonly status: number;
  readonly text: string;
  /** True when the response ended properly; false when the connection dropped mid-body. */
  readonly complete: boolean;
}

/** Posts with node:http and collects the body even when the server drops the connection. */
export function rawPost(url: string, body: unknown, headers: Record<string, string> = {}): Promise<RawResult> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(url, { method: "POST", headers: { "content-type": "application/json", ...headers } }, (res) => {
      let text = "";
      res.setEncoding("utf8");
      res.on("data", (chunk: string) => (text += chunk));
      res.on("error", () => {}); // a dropped body surfaces as complete=false
      res.once("close", () => resolve({ status: res.statusCode ?? 0, text, complete: res.complete }));
    });
    req.on("error", reject);
    req.end(JSON.stringify(body));
  });
}

/**
 * A Node able to run the simulator's TypeScript directly (22+): the one running the tests
 * when it qualifies, else the project's pinned Node in node_modules.
 */
export function nodeBinary(): string {
  const major = Number(process.versions.node.split(".")[0]);
  if (major >= 22) return process.execPath;
  return fileURLToPath(new URL("../../node_modules/.bin/node", import.meta.url));
}
