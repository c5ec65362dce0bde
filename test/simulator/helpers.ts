/**
 * Shared test helpers: an in-process simulator on an ephemeral loopback port, the official
 * OpenAI and Anthropic clients pointed at it, and small raw-HTTP utilities for what the
 * clients hide.
 */

import { request as httpRequest } from "node:http";
import { fileURLToPath } from "node:url";
import Anthropic from "@anthropic-ai/sdk";
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

/** The official Anthropic client (it sends `anthropic-version` and Bearer auth), no retries. */
export function anthropicClient(sim: Simulator, apiKey = "test-key"): Anthropic {
  return new Anthropic({ apiKey, baseURL: sim.url, maxRetries: 0, timeout: 10_000 });
}

/** Headers an Anthropic client sends, for raw requests. */
export const ANTHROPIC_HEADERS: Readonly<Record<string, string>> = { "anthropic-version": "2023-06-01" };

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

/** Posts JSON to any path with plain fetch. */
export function post(sim: Simulator, path: string, body: unknown, headers: Record<string, string> = {}): Promise<Response> {
  return fetch(`${sim.url}${path}`, {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body: typeof body === "string" ? body : JSON.stringify(body),
  });
}

/** One SSE event: its `event:` name (null when absent) and parsed `data:` JSON. */
export interface SseEvent {
  readonly event: string | null;
  readonly data: Record<string, unknown>;
}

/** The events of an SSE body that carry data, in order; comment-only frames are skipped. */
export function sseEvents(text: string): SseEvent[] {
  const out: SseEvent[] = [];
  for (const frame of text.split("\n\n")) {
    let event: string | null = null;
    let data: string | undefined;
    for (const line of frame.split("\n")) {
      if (line.startsWith("event: ")) event = line.slice(7);
      else if (line.startsWith("data: ")) data = line.slice(6);
    }
    if (data !== undefined) out.push({ event, data: JSON.parse(data) as Record<string, unknown> });
  }
  return out;
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
export function rawPost(url: string, body: unknown, headers: Readonly<Record<string, string>> = {}): Promise<RawResult> {
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
