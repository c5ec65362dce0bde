/**
 * The README's curl examples are true on the bundled config: each `curl` of the README's `sh`
 * blocks is sent as written (only the gateway's address is this test's) to a gateway started with
 * the bundled publication and a simulator. A curl piped to `grep -i '^<header>'` must produce
 * exactly the `# <header>: <value>` lines shown under it, none when none are shown; any other curl
 * must succeed.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { ROOT } from "../../local-stack/build.ts";
import { startStack, type Stack } from "./support/stack.ts";

/** The address the README's examples name; replaced by the test gateway's. */
const README_ORIGIN = "http://127.0.0.1:8787";

interface CurlExample {
  /** Where it is, for the test's name: the README's line. */
  readonly line: number;
  readonly url: string;
  readonly headers: readonly [string, string][];
  readonly body: string | undefined;
  /** The header the example greps for, lower case, if it does. */
  readonly grep: string | undefined;
  /** The `name: value` lines the README shows as that grep's output. */
  readonly shown: readonly string[];
}

/** Splits a shell command line into words: single quotes, blanks and `|` (a word of its own). */
function words(command: string): string[] {
  const out: string[] = [];
  for (const m of command.matchAll(/'([^']*)'|(\|)|([^\s'|]+)/g)) out.push(m[1] ?? m[2] ?? m[3]!);
  return out;
}

/** Every curl of the README's `sh` blocks, with what the README says it prints. */
function readmeCurls(): CurlExample[] {
  const text = readFileSync(join(ROOT, "README.md"), "utf8");
  const out: CurlExample[] = [];
  for (const block of text.matchAll(/^```sh\n([\s\S]*?)^```/gm)) {
    const first = text.slice(0, block.index).split("\n").length + 1;
    const lines = block[1]!.split("\n");
    let current: { line: number; command: string; shown: string[] } | undefined;
    const commands: { line: number; command: string; shown: string[] }[] = [];
    let continued = false;
    lines.forEach((raw, i) => {
      if (continued && current) {
        current.command += ` ${raw.replace(/\\$/, "")}`;
      } else if (raw.startsWith("curl ")) {
        current = { line: first + i, command: raw.replace(/\\$/, ""), shown: [] };
        commands.push(current);
      } else if (raw.startsWith("# ") && current) {
        current.shown.push(raw.slice(2));
      } else if (raw.trim() !== "") {
        current = undefined; // another command: what follows is not this curl's output
      }
      continued = raw.endsWith("\\");
    });
    for (const c of commands) {
      const w = words(c.command);
      const pipe = w.indexOf("|");
      const curl = pipe < 0 ? w : w.slice(0, pipe);
      const after = pipe < 0 ? [] : w.slice(pipe + 1);
      const headers: [string, string][] = [];
      let body: string | undefined;
      let url: string | undefined;
      for (let i = 1; i < curl.length; i++) {
        const word = curl[i]!;
        if (word === "-H") {
          const h = curl[++i]!;
          const colon = h.indexOf(":");
          headers.push([h.slice(0, colon).trim(), h.slice(colon + 1).trim()]);
        } else if (word === "-d") body = curl[++i];
        else if (word.startsWith("http")) url = word;
        else if (!/^-[si]+$/.test(word)) throw new Error(`README.md:${c.line}: curl option ${word} is not understood by this test`);
      }
      let grep: string | undefined;
      if (after.length > 0) {
        if (after[0] !== "grep" || after[1] !== "-i" || !after[2]?.startsWith("^")) throw new Error(`README.md:${c.line}: only | grep -i '^<header>' is understood by this test`);
        grep = after[2].slice(1).toLowerCase();
      }
      if (url === undefined) throw new Error(`README.md:${c.line}: a curl without a URL`);
      out.push({ line: c.line, url, headers, body, grep, shown: c.shown });
    }
  }
  return out;
}

const examples = readmeCurls();
let stack: Stack;

beforeAll(async () => {
  // The bundled publication as it is; the backends point at this test's simulator.
  stack = await startStack();
});

afterAll(async () => {
  await stack?.stop();
});

/** Sends an example as curl would; `extra` adds headers. */
async function send(e: CurlExample, extra: Record<string, string> = {}): Promise<Response> {
  const url = e.url.replace(README_ORIGIN, stack.gateway.publicUrl);
  const headers = new Headers([...e.headers]);
  for (const [k, v] of Object.entries(extra)) headers.set(k, v);
  return fetch(url, e.body === undefined ? { headers } : { method: "POST", headers, body: e.body });
}

/** What `curl -si … | grep -i '^<name>'` prints: the response's header lines of that name. */
function grepped(res: Response, name: string): string[] {
  return [...res.headers].filter(([k]) => k.toLowerCase().startsWith(name)).map(([k, v]) => `${k}: ${v}`);
}

describe("the README's curl examples, on the bundled config", () => {
  it("are found, among them a cascade and a cache's miss and hit", () => {
    const body = (e: CurlExample) => (e.body === undefined ? {} : (JSON.parse(e.body) as { model?: string }));
    expect(examples.some((e) => body(e).model === "sluice-cascade" && e.grep === "x-sluice-looper")).toBe(true);
    const cache = examples.filter((e) => body(e).model === "sluice-faq" && e.grep === "x-sluice-cache");
    expect(cache.map((e) => e.shown)).toEqual([[], ["x-sluice-cache: hit"]]);
  });

  // In the README's order: the cache's hit follows the miss that stored it.
  it.each(examples.map((e) => ({ name: `README.md:${e.line}`, e })))("$name prints what the README shows", async ({ e }) => {
    if (e.shown.includes("x-sluice-cache: hit")) {
      // The answer is stored just after it is sent; a reader's second command comes later than
      // this test's. Wait for the entry with the same question marked no-store, so the wait
      // stores nothing, then send the README's own.
      await vi.waitFor(async () => expect((await send(e, { "cache-control": "no-store" })).headers.get("x-sluice-cache")).toBe("hit"), { timeout: 10_000, interval: 50 });
    }
    const res = await send(e);
    const text = await res.text();
    expect(res.status, text).toBe(200);
    if (e.grep !== undefined) expect(grepped(res, e.grep)).toEqual(e.shown);
  });

  it("keeps the small model's answer when it is sure, as the README says", async () => {
    const cascade = examples.find((e) => e.grep === "x-sluice-looper")!;
    const body = JSON.parse(cascade.body!) as { messages: { content: string }[] };
    body.messages[0]!.content = body.messages[0]!.content.replace(/\s*\[\[sim [^\]]*\]\]/, "");
    const res = await send({ ...cascade, body: JSON.stringify(body) });
    expect(res.status).toBe(200);
    expect(res.headers.get("x-sluice-looper")).toBe("cascade; steps=1; accepted=scored-small");
  });
});
