/**
 * backends.yaml: `tls` on an HTTP backend (a private CA, a server name, a client certificate by
 * secret names), refused where it means nothing, and at snapshot validation whenever the running
 * gateway was not started with exactly that TLS material.
 */
import { describe, expect, it } from "vitest";
import { loadConfig } from "../../../src/config/load-config.ts";
import { builtinCodecs } from "../../../src/protocol/registry.ts";
import { normalizeSnapshot, type SnapshotContext } from "../../../src/snapshot/normalize.ts";
import { parseTlsBindings, tlsFingerprint } from "../../../src/snapshot/tls-bindings.ts";
import { issuesOf } from "../support/config-issues.ts";
import { bundled, textsWith } from "../support/fixtures.ts";

const CA = "-----BEGIN CERTIFICATE-----\nMIIBszCCAVmgAwIBAgIUTESTTESTTESTTESTTESTTESTTESTTEST=\n-----END CERTIFICATE-----\n";
const caps = ["chat", "streaming"];
const tls = { binding: "VLLM_TLS", ca: CA, serverName: "vllm.internal", clientCertificate: { certificateSecret: "VLLM_CLIENT_CERT", keySecret: "VLLM_CLIENT_KEY" } };
const backend = (over: Record<string, unknown> = {}) => ({ name: "vllm", protocol: "openai-chat", baseUrl: "https://vllm.example.com:8443/v1", capabilities: caps, tls, ...over });

function backendsWith(b: Record<string, unknown>) {
  const out = bundled("backends");
  out.backends.push(b);
  out.pools.push({ name: "private", members: [{ backend: b.name, model: "llama" }] });
  return out;
}
const issues = (b: Record<string, unknown>) => issuesOf(() => loadConfig(textsWith({ backends: backendsWith(b) }))).map((i) => ({ path: i.path, message: i.message }));

describe("tls in backends.yaml", () => {
  it("is accepted on an https backend, key material named by secret", () => {
    const seed = loadConfig(textsWith({ backends: backendsWith(backend()) })).backendsSeed;
    expect(seed.backends.find((b) => b.name === "vllm")!.tls).toEqual(tls);
  });

  it("is refused on a plain http backend and on a binding backend, each with the reason", () => {
    expect(issues(backend({ baseUrl: "http://vllm.example.com:8000/v1" }))).toEqual([{ path: "backends[1].tls", message: "tls is for backends reached over https: the baseUrl starts with http:" }]);
    expect(issues({ name: "edge", protocol: "workers-ai", binding: "AI", capabilities: caps, tls })).toEqual([
      { path: "backends[1].tls", message: "protocol workers-ai is reached through a Worker binding: there is no TLS connection of the gateway's own to configure" },
    ]);
  });

  it("never takes a key inline, nor a CA that is not PEM", () => {
    expect(issues(backend({ tls: { ...tls, clientCertificate: { certificateSecret: "C", keySecret: "K", key: "-----BEGIN PRIVATE KEY-----" } } }))).toEqual([
      { path: "backends[1].tls.clientCertificate.key", message: "unknown key" },
    ]);
    expect(issues(backend({ tls: { ...tls, ca: "not a certificate" } }))).toEqual([{ path: "backends[1].tls.ca", message: expect.stringContaining("PEM bundle") }]);
  });
});

describe("tls at snapshot validation: only what the process was started with", () => {
  const base = { supportedProtocols: builtinCodecs.ids(), logprobsProtocols: builtinCodecs.logprobsIds(), requirements: [], egress: { allow: [] } };
  const source = (b: Record<string, unknown>) => ({ version: 1, backends: [b], pools: [{ name: "p", members: [{ backend: b.name, model: "llama" }] }] });
  const reasons = async (b: Record<string, unknown>, ctx: SnapshotContext) => {
    const r = await normalizeSnapshot(source(b), ctx);
    return r.ok ? [] : r.reasons.map((x) => ({ code: x.code, path: x.path, message: x.message }));
  };
  const started = async (b: Record<string, unknown> = backend()) => new Map([[tls.binding, await tlsFingerprint(b.baseUrl as string, b.tls as typeof tls)]]);

  it("accepts the material the gateway was started with, and records it", async () => {
    const r = await normalizeSnapshot(source(backend()), { ...base, tlsBindings: await started() });
    if (!r.ok) throw new Error(JSON.stringify(r.reasons));
    expect(r.snapshot.backends[0]).toMatchObject({ tls: { ...tls, ca: CA.trim() } });
  });

  it("refuses a binding the process was not started with, naming the backend and the fix", async () => {
    expect(await reasons(backend(), { ...base, tlsBindings: parseTlsBindings("{}") })).toEqual([
      { code: "tls_unavailable", path: "backends[0].tls", message: expect.stringMatching(/backend "vllm" is reached through TLS binding VLLM_TLS, which this gateway was not started with: restart/) },
    ]);
  });

  it("refuses other material under a started binding: another CA, server name, client certificate or address", async () => {
    const ctx = { ...base, tlsBindings: await started() };
    for (const changed of [
      backend({ tls: { ...tls, serverName: "other.internal" } }),
      backend({ tls: { ...tls, clientCertificate: { certificateSecret: "OTHER_CERT", keySecret: "VLLM_CLIENT_KEY" } } }),
      backend({ tls: { ...tls, ca: `${CA}${CA}` } }),
      backend({ baseUrl: "https://vllm.example.com:9443/v1" }),
    ]) {
      const got = await reasons(changed, ctx);
      expect(got).toEqual([{ code: "tls_unavailable", path: "backends[0].tls", message: expect.stringContaining("TLS binding VLLM_TLS was started for another address, CA, server name or client certificate") }]);
    }
    // Another path at the same address is the same connection.
    expect(await reasons(backend({ baseUrl: "https://vllm.example.com:8443/v2" }), ctx)).toEqual([]);
  });

  it("on the edge (no rendered bindings) refuses a CA or server name, which an mTLS certificate binding cannot honour", async () => {
    const edge = { ...base, tlsBindings: parseTlsBindings(undefined) };
    expect(await reasons(backend(), edge)).toEqual([{ code: "tls_unavailable", path: "backends[0].tls", message: expect.stringContaining("mTLS certificate binding") }]);
    expect(await reasons(backend({ tls: { binding: "VLLM_TLS", clientCertificate: tls.clientCertificate } }), edge)).toEqual([]);
  });

  it("a bindings value that does not parse carries none: TLS backends are refused, never sent without their material", () => {
    expect(parseTlsBindings("not json")).toEqual(new Map());
    expect(parseTlsBindings('["x"]')).toEqual(new Map());
  });
});
