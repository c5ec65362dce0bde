/**
 * Callers of the gateway's A2A endpoints as a caller's own code would be: the official SDK's
 * clients of both generations, presenting an API key, and a 1.0 message builder.
 */
import { Role, type Message, type SendMessageRequest } from "@a2a-js/sdk";
import { ClientFactory, DefaultAgentCardResolver, JsonRpcTransportFactory, type Client } from "@a2a-js/sdk/client";
import { ClientFactory as ClientFactory03, DefaultAgentCardResolver as DefaultAgentCardResolver03, JsonRpcTransportFactory as JsonRpcTransportFactory03, type Client as Client03 } from "a2a-sdk-v0-3/client";

/** A fetch that presents `key` to the gateway, as a caller's own client would. */
export const withKey =
  (key: string): typeof fetch =>
  (input, init) => {
    const headers = new Headers(init?.headers);
    headers.set("authorization", `Bearer ${key}`);
    return fetch(input, { ...init, headers });
  };

/** An A2A 1.0 client of the SDK on the gateway's URL for `agent` (card discovery included). */
export async function a2aClientV1(publicUrl: string, agent: string, key: string): Promise<Client> {
  const f = withKey(key);
  const factory = new ClientFactory({ transports: [new JsonRpcTransportFactory({ fetchImpl: f })], cardResolver: new DefaultAgentCardResolver({ fetchImpl: f }) });
  // The trailing slash matters to the SDK's card resolver.
  return await factory.createFromUrl(`${publicUrl}/a2a/${agent}/`);
}

/** An A2A 0.3 client of the SDK on the gateway's URL for `agent`. */
export async function a2aClientV03(publicUrl: string, agent: string, key: string): Promise<Client03> {
  const f = withKey(key);
  const factory = new ClientFactory03({ transports: [new JsonRpcTransportFactory03({ fetchImpl: f })], cardResolver: new DefaultAgentCardResolver03({ fetchImpl: f }) });
  return await factory.createFromUrl(`${publicUrl}/a2a/${agent}/`);
}

/** A 1.0 `SendMessage` request of one text part, naming `skill` when given. */
export function messageV1(text: string, skill?: string, extra: Partial<Message> = {}): SendMessageRequest {
  return {
    tenant: "",
    message: {
      messageId: crypto.randomUUID(),
      contextId: "",
      taskId: "",
      role: Role.ROLE_USER,
      parts: [{ content: { $case: "text", value: text }, metadata: undefined, filename: "", mediaType: "text/plain" }],
      metadata: skill === undefined ? undefined : { skill },
      extensions: [],
      referenceTaskIds: [],
      ...extra,
    },
    configuration: undefined,
    metadata: undefined,
  };
}
