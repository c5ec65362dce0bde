/** Agent cards as the two generations' agents publish them (shapes taken from the SDKs' test agents). */
export function cardV1(overrides: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    name: "echo-v1",
    description: "An echo agent.",
    version: "1.0.0",
    supportedInterfaces: [{ url: "https://agent.test/rpc", protocolBinding: "JSONRPC", tenant: "", protocolVersion: "1.0" }],
    provider: { organization: "Tests", url: "https://example.com" },
    capabilities: { streaming: true, pushNotifications: true, extensions: [], extendedAgentCard: false },
    securitySchemes: { agentBearer: { httpAuthSecurityScheme: { scheme: "Bearer" } } },
    securityRequirements: [{ schemes: { agentBearer: { list: [] } } }],
    defaultInputModes: ["text/plain"],
    defaultOutputModes: ["text/plain"],
    skills: [
      { id: "summarize", name: "Summarize", description: "Summarizes.", tags: ["text"], examples: ["summarize this"], inputModes: ["text/plain"], outputModes: ["text/plain"], securityRequirements: [] },
      { id: "translate", name: "Translate", description: "Translates.", tags: ["text", "language"], examples: [] },
    ],
    signatures: [{ protected: "eyJhbGciOiJFUzI1NiJ9", signature: "c2ln" }],
    ...overrides,
  };
}

export function cardV03(overrides: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    name: "echo-v03",
    description: "An old echo agent.",
    version: "0.3.0",
    url: "https://old-agent.test/rpc",
    preferredTransport: "JSONRPC",
    protocolVersion: "0.3.0",
    capabilities: { streaming: false },
    securitySchemes: { agentBearer: { type: "http", scheme: "bearer" } },
    security: [{ agentBearer: [] }],
    defaultInputModes: ["text/plain"],
    defaultOutputModes: ["text/plain"],
    skills: [{ id: "summarize", name: "Summarize", description: "Summarizes.", tags: ["text"] }],
    signatures: [{ protected: "eyJhbGciOiJFUzI1NiJ9", signature: "c2ln" }],
    ...overrides,
  };
}
