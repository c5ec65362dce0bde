import { describe, expect, it } from "vitest";
import { checkEgress, networkAllowFor, parseAllowEntry, type EgressPolicy } from "../../../src/egress/egress-guard.ts";
import { classifyIpv4, classifyIpv6, parseIpv4, parseIpv6 } from "../../../src/egress/ip-address.ts";
import { passedResponseHeaders, responseHeaderRefusal } from "../../../src/egress/response-headers.ts";
import { ALLOWED_TARGETS, FORBIDDEN_TARGETS } from "../support/egress-targets.ts";

/** The bundled gateway.yaml's policy: the simulator only. */
const bundledPolicy: EgressPolicy = { allow: ["127.0.0.1:9901"] };

describe("the egress guard, under the bundled policy", () => {
  it.each(FORBIDDEN_TARGETS)("refuses $url ($what)", ({ url }) => {
    const verdict = checkEgress(url, bundledPolicy);
    expect(verdict.ok).toBe(false);
  });

  it.each(ALLOWED_TARGETS)("allows $url ($what)", ({ url }) => {
    expect(checkEgress(url, bundledPolicy)).toMatchObject({ ok: true });
  });

  it("says why, with a code for each rule", () => {
    const code = (url: string, policy = bundledPolicy) => {
      const v = checkEgress(url, policy);
      return v.ok ? "ok" : v.refusal.code;
    };
    expect(code("not a url")).toBe("invalid_url");
    expect(code("https://[fe80::1%25eth0]/")).toBe("invalid_url");
    expect(code("ftp://api.example.com/")).toBe("scheme_not_allowed");
    expect(code("https://u:p@api.example.com/")).toBe("credentials_in_url");
    expect(code("http://api.example.com/")).toBe("http_not_allowed");
    expect(code("https://0x7f.1/")).toBe("private_address");
    expect(code("https://[::ffff:7f00:1]/")).toBe("private_address");
    expect(code("https://localhost/")).toBe("internal_name");
    expect(code("http://169.254.169.254/")).toBe("metadata_service");
    expect(code("http://metadata.google.internal/")).toBe("metadata_service");
    expect(code("https://0.0.0.0/")).toBe("reserved_address");
    expect(code("https://224.0.0.1/")).toBe("reserved_address");
  });

  it("names the host in its message, never a credential", () => {
    const v = checkEgress("https://user:hunter2@10.0.0.1/v1", bundledPolicy);
    expect(v.ok).toBe(false);
    if (!v.ok) expect(v.refusal.message).not.toContain("hunter2");
    const p = checkEgress("https://10.0.0.1:8443/v1?key=abc", bundledPolicy);
    expect(!p.ok && p.refusal.message).toBe("https://10.0.0.1:8443 is a private (RFC 1918) address; list it in gateway.yaml security.egress.allow to reach it");
  });
});

describe("the allowlist", () => {
  it("lifts the http and private-range refusals for the host and port it names, in any spelling of the host", () => {
    const policy: EgressPolicy = { allow: ["127.0.0.1:9901", "10.0.0.7", "[::1]:8080", "vllm:8000", "sidecar.internal"] };
    for (const url of ["http://127.0.0.1:9901/v1", "http://0x7f.1:9901/", "https://10.0.0.7/", "http://10.0.0.7:1234/", "http://[::1]:8080/", "http://[0:0::1]:8080/", "http://vllm:8000/v1", "https://sidecar.internal/", "http://sidecar.internal.:9/"]) {
      expect(checkEgress(url, policy), url).toMatchObject({ ok: true });
    }
    for (const url of ["http://127.0.0.1:9902/", "http://127.0.0.2:9901/", "http://10.0.0.8/", "http://[::1]:8081/", "http://vllm:8001/", "http://vllm/"]) {
      expect(checkEgress(url, policy).ok, url).toBe(false);
    }
  });

  it("never lifts metadata, credentials or a scheme other than http(s)", () => {
    const policy: EgressPolicy = { allow: ["127.0.0.1"] };
    expect(checkEgress("http://u:p@127.0.0.1/", policy)).toMatchObject({ ok: false, refusal: { code: "credentials_in_url" } });
    expect(checkEgress("ws://127.0.0.1/", policy)).toMatchObject({ ok: false, refusal: { code: "scheme_not_allowed" } });
    // An entry that would name a metadata service or an address nothing answers on is refused.
    for (const entry of ["169.254.169.254", "169.254.169.254:80", "[fd00:ec2::254]", "metadata.google.internal", "0.0.0.0:80", "224.0.0.1", "255.255.255.255"]) {
      expect(parseAllowEntry(entry).ok, entry).toBe(false);
    }
  });

  it("takes host or host:port entries and nothing else", () => {
    expect(parseAllowEntry("127.0.0.1:9901")).toMatchObject({ ok: true, entry: { host: "127.0.0.1", port: 9901 } });
    expect(parseAllowEntry("127.0.0.1")).toMatchObject({ ok: true, entry: { host: "127.0.0.1", port: undefined } });
    expect(parseAllowEntry("[::1]:80")).toMatchObject({ ok: true, entry: { host: "[::1]", port: 80 } });
    expect(parseAllowEntry("LocalHost.:9901")).toMatchObject({ ok: true, entry: { host: "localhost", port: 9901 } });
    for (const bad of ["http://127.0.0.1:9901", "127.0.0.1:9901/v1", "*.internal", "127.0.0.1:0", "127.0.0.1:65536", "127.0.0.1:", "user@host", "::1", "[::1", ""]) {
      expect(parseAllowEntry(bad).ok, bad).toBe(false);
    }
  });

  it("tells workerd's network allow list exactly which private addresses to open", () => {
    expect(networkAllowFor({ allow: [] })).toEqual(["public"]);
    expect(networkAllowFor({ allow: ["127.0.0.1:9901", "127.0.0.1:9902", "[::1]:80"] })).toEqual(["public", "127.0.0.1/32", "0:0:0:0:0:0:0:1/128"]);
    expect(networkAllowFor({ allow: ["localhost:9901"] })).toEqual(["public", "local"]);
    expect(networkAllowFor({ allow: ["vllm:8000"] })).toEqual(["public", "private"]);
  });
});

describe("IP literals", () => {
  it("reads IPv4 the way inet_aton does", () => {
    const lo = 0x7f000001;
    for (const s of ["127.0.0.1", "2130706433", "0177.0.0.1", "0x7f.0.0.1", "0X7F.0.0.1", "127.1", "127.0.1", "0x7f000001", "017700000001", "127.0.0.1.", "127.0.0.1..."]) {
      expect(parseIpv4(s), s).toBe(lo);
    }
    expect(parseIpv4("api.example.com")).toBeUndefined();
    for (const s of ["256.0.0.1", "1.2.3.4.5", "08.0.0.1", "4294967296", "1.16777216", "foo.0x7f"]) expect(parseIpv4(s), s).toBe("invalid");
  });

  it("reads IPv6 with compression, dotted tails and zone ids", () => {
    expect(parseIpv6("[::1]")).toEqual([0, 0, 0, 0, 0, 0, 0, 1]);
    expect(parseIpv6("::ffff:127.0.0.1")).toEqual([0, 0, 0, 0, 0, 0xffff, 0x7f00, 1]);
    expect(parseIpv6("fe80::1%eth0")).toEqual([0xfe80, 0, 0, 0, 0, 0, 0, 1]);
    expect(parseIpv6("fe80::1%25eth0")).toEqual([0xfe80, 0, 0, 0, 0, 0, 0, 1]);
    for (const s of ["1::2::3", "12345::", "1:2:3:4:5:6:7:8:9", "::1.2.3", ":::"]) expect(parseIpv6(s), s).toBeUndefined();
  });

  it("classifies every refused range, and the IPv4 inside IPv6 forms as that IPv4", () => {
    const v4 = (s: string) => classifyIpv4(parseIpv4(s) as number);
    expect([v4("8.8.8.8"), v4("127.255.0.1"), v4("10.0.0.1"), v4("172.20.0.1"), v4("172.32.0.1"), v4("192.168.0.1")]).toEqual(["public", "loopback", "private", "private", "public", "private"]);
    expect([v4("169.254.0.1"), v4("169.254.169.254"), v4("100.64.0.1"), v4("100.127.255.255"), v4("100.128.0.1"), v4("100.100.100.200")]).toEqual(["link_local", "metadata", "shared", "shared", "public", "metadata"]);
    expect([v4("0.1.2.3"), v4("255.255.255.255"), v4("239.1.1.1"), v4("250.0.0.1"), v4("198.18.0.1"), v4("192.0.2.1")]).toEqual(["unspecified", "broadcast", "multicast", "reserved", "special", "special"]);
    const v6 = (s: string) => classifyIpv6(parseIpv6(s)!);
    expect([v6("::"), v6("::1"), v6("fc00::1"), v6("fdff::1"), v6("fe80::1"), v6("febf::1"), v6("ff00::1")]).toEqual(["unspecified", "loopback", "unique_local", "unique_local", "link_local", "link_local", "multicast"]);
    expect([v6("::ffff:8.8.8.8"), v6("::ffff:192.168.0.1"), v6("64:ff9b::a9fe:a9fe"), v6("2002:0a00:0001::1"), v6("2001:db8::1"), v6("2606:4700::1")]).toEqual(["public", "private", "metadata", "private", "special", "public"]);
    expect(v6("fd00:ec2::254")).toBe("metadata");
  });
});

describe("provider response headers", () => {
  it("refuses hop-by-hop, cookies, server software and the gateway's own headers, listed or not", () => {
    for (const h of ["connection", "keep-alive", "transfer-encoding", "upgrade", "set-cookie", "server", "x-powered-by", "via", "content-type", "content-length", "content-encoding", "x-sluice-attempts", "access-control-allow-origin", "retry-after", "cf-ray"]) {
      expect(responseHeaderRefusal(h), h).toBeTypeOf("string");
    }
    for (const h of ["x-request-id", "request-id", "openai-processing-ms", "x-ratelimit-remaining-requests", "anthropic-ratelimit-tokens-remaining"]) {
      expect(responseHeaderRefusal(h), h).toBeUndefined();
    }
  });

  it("passes only the listed ones the provider sent, never a refused one", () => {
    const sent = new Headers({ "x-request-id": "prov-1", "set-cookie": "a=b", server: "nginx", "openai-processing-ms": "12" });
    expect(passedResponseHeaders(sent, undefined)).toEqual({});
    expect(passedResponseHeaders(sent, [])).toEqual({});
    expect(passedResponseHeaders(sent, ["x-request-id", "set-cookie", "server", "x-missing"])).toEqual({ "x-request-id": "prov-1" });
  });
});
