import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DEMO_KEY, LIMITED_KEY, startStack, type Stack } from "./support/stack.ts";

let stack: Stack;
beforeAll(async () => {
  stack = await startStack();
});
afterAll(async () => {
  await stack?.stop();
});

const hello = [{ role: "user" as const, content: "Say hello" }];

describe("OpenAI Chat Completions through Sluice, with the official openai client", () => {
  it("returns a buffered completion with the public model name and provider usage", async () => {
    const res = await stack.client.chat.completions.create({ model: "sluice-chat", messages: hello });
    expect(res.object).toBe("chat.completion");
    expect(res.model).toBe("sluice-chat");
    expect(res.id).toMatch(/^chatcmpl-[0-9a-f]{32}$/);
    expect(res.choices[0]?.message.content?.length).toBeGreaterThan(0);
    expect(res.choices[0]?.finish_reason).toBe("stop");
    expect(res.usage?.completion_tokens).toBeGreaterThan(0);
    expect(res.usage?.total_tokens).toBe(res.usage!.prompt_tokens + res.usage!.completion_tokens);
  });

  it("streams the same text the buffered call returns, with usage only when asked", async () => {
    const buffered = await stack.client.chat.completions.create({ model: "sluice-chat", messages: hello });
    const withUsage = await stack.client.chat.completions.create({
      model: "sluice-chat",
      messages: hello,
      stream: true,
      stream_options: { include_usage: true },
    });
    let text = "";
    let usage: OpenAI.CompletionUsage | undefined | null;
    let finish: string | null | undefined;
    for await (const chunk of withUsage) {
      text += chunk.choices[0]?.delta.content ?? "";
      finish ??= chunk.choices[0]?.finish_reason;
      if (chunk.usage) usage = chunk.usage;
      expect(chunk.model).toBe("sluice-chat");
    }
    expect(text).toBe(buffered.choices[0]?.message.content);
    expect(finish).toBe("stop");
    expect(usage).toEqual(buffered.usage);

    const without = await stack.client.chat.completions.create({ model: "sluice-chat", messages: hello, stream: true });
    let sawUsage = false;
    for await (const chunk of without) if (chunk.usage) sawUsage = true;
    expect(sawUsage).toBe(false);
  });

  it("works with the client's stream() helper and tool calls", async () => {
    const tools: OpenAI.ChatCompletionTool[] = [
      { type: "function", function: { name: "get_weather", parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] } } },
    ];
    const runner = stack.client.chat.completions.stream({
      model: "sluice-large",
      messages: [{ role: "user", content: "Weather in Paris?" }],
      tools,
      tool_choice: "required",
    });
    const final = await runner.finalChatCompletion();
    const call = final.choices[0]?.message.tool_calls?.[0];
    expect(final.choices[0]?.finish_reason).toBe("tool_calls");
    expect(call?.type === "function" && call.function.name).toBe("get_weather");
    const args = call?.type === "function" ? (JSON.parse(call.function.arguments) as Record<string, unknown>) : {};
    expect(Object.keys(args)).toContain("city");

    const buffered = await stack.client.chat.completions.create({ model: "sluice-large", messages: [{ role: "user", content: "Weather in Paris?" }], tools, tool_choice: "required" });
    expect(buffered.choices[0]?.message.tool_calls?.[0]).toMatchObject({ type: "function", function: { name: "get_weather" } });
  });

  it("lists only the models the key may use", async () => {
    const all = await stack.client.models.list();
    expect(all.data.map((m) => m.id).sort()).toEqual(["sluice-auto", "sluice-cascade", "sluice-chat", "sluice-embed", "sluice-faq", "sluice-large", "sluice-moderation"]);
    const limited = new OpenAI({ apiKey: LIMITED_KEY, baseURL: `${stack.gateway.publicUrl}/v1`, maxRetries: 0 });
    expect((await limited.models.list()).data.map((m) => m.id)).toEqual(["sluice-chat"]);
  });

  it("forwards no caller credential or header, asks for identity encoding, and names the provider's model", async () => {
    await fetch(`${stack.sims[0]!.url}/__sim/reset`, { method: "POST" });
    await fetch(`${stack.gateway.publicUrl}/v1/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${DEMO_KEY}`, "content-type": "application/json", cookie: "session=abc", "x-custom": "leak?" },
      body: JSON.stringify({ model: "sluice-chat", messages: hello }),
    });
    const [req] = await stack.simRequests(stack.sims[0]!);
    expect(req.path).toBe("/v1/chat/completions");
    expect(req.headers.authorization).toBe("Bearer sim-local-key");
    expect(JSON.stringify(req.headers)).not.toContain(DEMO_KEY);
    expect(req.headers.cookie).toBeUndefined();
    expect(req.headers["x-custom"]).toBeUndefined();
    expect(req.headers["accept-encoding"]).toBe("identity");
    expect(req.body.model).toBe("sim-small");
  });

  it("tells the request id and hides routing details on the public response", async () => {
    const res = await fetch(`${stack.gateway.publicUrl}/v1/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${DEMO_KEY}`, "content-type": "application/json" },
      body: JSON.stringify({ model: "sluice-chat", messages: hello }),
    });
    expect(res.headers.get("x-request-id")).toMatch(/^req_[0-9a-f]{32}$/);
    const text = await res.text();
    for (const secret of ["sim-small", "sim-local", "127.0.0.1", "be_", "sim-local-key"]) expect(text).not.toContain(secret);
    for (const [name] of res.headers) expect(name).not.toMatch(/backend|upstream|snapshot/);
  });
});
