/** What one request of each workload looks like, and what counts as a complete, correct answer. */

export type WorkloadName = "buffered" | "streaming";

export interface Workload {
  readonly name: WorkloadName;
  readonly stream: boolean;
  /** Output tokens the simulator generates per response. */
  readonly tokens: number;
}

/** The prompt avoids the demo config's routing keywords, so Sluice takes its default route. */
const PROMPT = "Hello from the benchmark. Please answer briefly.";

/** The JSON body of one request for `model`. */
export function requestBody(workload: Workload, model: string): string {
  return JSON.stringify({
    model,
    messages: [{ role: "user", content: PROMPT }],
    ...(workload.stream ? { stream: true, stream_options: { include_usage: true } } : {}),
  });
}

/**
 * Why a 2xx response body is not a complete answer, or `undefined` when it is. A stream must end
 * with `data: [DONE]` and carry a usage chunk (the request asks for one); a buffered answer must
 * be a chat completion with text.
 */
export function invalidBody(workload: Workload, text: string): string | undefined {
  if (workload.stream) {
    if (!text.trimEnd().endsWith("data: [DONE]")) return "incomplete stream (no [DONE])";
    if (!text.includes('"usage":{')) return "stream without usage chunk";
    if (!text.includes('"content":"')) return "stream without content";
    return undefined;
  }
  let json: { object?: unknown; choices?: { message?: { content?: unknown } }[] };
  try {
    json = JSON.parse(text) as typeof json;
  } catch {
    return "body is not JSON";
  }
  if (json.object !== "chat.completion") return "body is not a chat.completion";
  const content = json.choices?.[0]?.message?.content;
  if (typeof content !== "string" || content === "") return "completion without text";
  return undefined;
}
