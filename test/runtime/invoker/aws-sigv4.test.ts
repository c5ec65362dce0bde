/**
 * SigV4 on Web Crypto: AWS's published signing test suite (credentials AKIDEXAMPLE, 2015-08-30
 * 12:36:00Z, us-east-1, service `service`), and a Bedrock request whose signature covers exactly
 * the body bytes sent.
 */
import { describe, expect, it } from "vitest";
import { amzDate, canonicalPath, signSigV4, type SigV4Request } from "../../../src/invoker/auth/aws-sigv4.ts";

const SUITE = {
  credentials: { accessKeyId: "AKIDEXAMPLE", secretAccessKey: "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY" },
  region: "us-east-1",
  service: "service",
  now: new Date("2015-08-30T12:36:00Z"),
} as const;
const CREDENTIAL = "AKIDEXAMPLE/20150830/us-east-1/service/aws4_request";

const sign = (over: Partial<SigV4Request>) => signSigV4({ method: "GET", url: "https://example.amazonaws.com/", headers: {}, body: "", ...SUITE, ...over });
const signatureOf = (authorization: string | undefined) => /Signature=([0-9a-f]{64})$/.exec(authorization ?? "")?.[1];

describe("SigV4 against AWS's signing test suite", () => {
  it("get-vanilla", async () => {
    const h = await sign({});
    expect(h["x-amz-date"]).toBe("20150830T123600Z");
    expect(h.authorization).toBe(
      `AWS4-HMAC-SHA256 Credential=${CREDENTIAL}, SignedHeaders=host;x-amz-date, Signature=5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31`,
    );
  });

  it("post-vanilla", async () => {
    const h = await sign({ method: "POST" });
    expect(signatureOf(h.authorization)).toBe("5da7c1a2acd57cee7505fc6676e4e544621c30862966e37dddb68e92efbe5d6b");
  });

  it("derives the day's signing key per secret: a rotated secret signs differently, and the first signs as before", async () => {
    const rotated = await sign({ method: "POST", credentials: { ...SUITE.credentials, secretAccessKey: "rotated-secret" } });
    expect(signatureOf(rotated.authorization)).not.toBe("5da7c1a2acd57cee7505fc6676e4e544621c30862966e37dddb68e92efbe5d6b");
    expect(signatureOf((await sign({ method: "POST" })).authorization)).toBe("5da7c1a2acd57cee7505fc6676e4e544621c30862966e37dddb68e92efbe5d6b");
    // Another day, another key: the vector's request a day later signs differently.
    const nextDay = await sign({ method: "POST", now: new Date("2015-08-31T12:36:00Z") });
    expect(nextDay.authorization).toContain("AKIDEXAMPLE/20150831/us-east-1/service/aws4_request");
    expect(signatureOf(nextDay.authorization)).not.toBe("5da7c1a2acd57cee7505fc6676e4e544621c30862966e37dddb68e92efbe5d6b");
  });

  it("get-vanilla-query-order-key-case (the query sorted)", async () => {
    const h = await sign({ url: "https://example.amazonaws.com/?Param2=value2&Param1=value1" });
    expect(signatureOf(h.authorization)).toBe("b97d918cfa904a5beff61c982a1b6f458b799221646efd99d3219ec94cdf2500");
  });

  it("post-x-www-form-urlencoded (a header of the request and the body signed)", async () => {
    const h = await sign({ method: "POST", headers: { "Content-Type": "application/x-www-form-urlencoded" }, body: "Param1=value1" });
    expect(h.authorization).toBe(
      `AWS4-HMAC-SHA256 Credential=${CREDENTIAL}, SignedHeaders=content-type;host;x-amz-date, Signature=ff11897932ad3f4e8b18135d722051e5ac45fc38421b1da7b9d196a0fe09473a`,
    );
  });

  it("get-vanilla-with-session-token (the token sent and signed)", async () => {
    const token = "6e86291e8372ff2a2260956d9b8aae1d763fbf315fa00fa31553b73ebf194267";
    const h = await sign({ credentials: { ...SUITE.credentials, sessionToken: token } });
    expect(h["x-amz-security-token"]).toBe(token);
    expect(h.authorization).toBe(
      `AWS4-HMAC-SHA256 Credential=${CREDENTIAL}, SignedHeaders=host;x-amz-date;x-amz-security-token, Signature=07ec1639c89043aa0e3e2de82b96708f198cceab042d4a97044c66dd9f74e7f8`,
    );
  });
});

describe("SigV4 for Bedrock", () => {
  const body = new TextEncoder().encode(JSON.stringify({ messages: [{ role: "user", content: [{ text: "hi" }] }] }));
  const bedrock = (b: Uint8Array | string): SigV4Request => ({
    method: "POST",
    url: "https://bedrock-runtime.us-east-1.amazonaws.com/model/anthropic.claude-3-haiku-20240307-v1%3A0/converse",
    headers: { "content-type": "application/json" },
    body: b,
    credentials: { accessKeyId: "AKIAEXAMPLE", secretAccessKey: "secret" },
    region: "us-east-1",
    service: "bedrock",
    now: new Date("2026-01-02T03:04:05.678Z"),
  });

  it("encodes a sent path once more, as for every service but S3", () => {
    expect(canonicalPath("/model/anthropic.claude-v2%3A1/converse")).toBe("/model/anthropic.claude-v2%253A1/converse");
    expect(amzDate(new Date("2026-01-02T03:04:05.678Z"))).toBe("20260102T030405Z");
  });

  it("covers the body bytes sent: the same bytes sign the same, one changed byte signs differently", async () => {
    const a = await signSigV4(bedrock(body));
    expect(a.authorization).toMatch(/^AWS4-HMAC-SHA256 Credential=AKIAEXAMPLE\/20260102\/us-east-1\/bedrock\/aws4_request, SignedHeaders=content-type;host;x-amz-date, Signature=[0-9a-f]{64}$/);
    expect(await signSigV4(bedrock(new TextDecoder().decode(body)))).toEqual(a);
    const tampered = body.slice();
    tampered[tampered.length - 3] = 0x21;
    expect(signatureOf((await signSigV4(bedrock(tampered))).authorization)).not.toBe(signatureOf(a.authorization));
    expect(signatureOf((await signSigV4({ ...bedrock(body), credentials: { accessKeyId: "AKIAEXAMPLE", secretAccessKey: "other" } })).authorization)).not.toBe(
      signatureOf(a.authorization),
    );
  });
});
