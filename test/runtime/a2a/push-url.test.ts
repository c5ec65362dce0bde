import { describe, expect, it } from "vitest";
import { checkPushUrl, deliverableUrl, ownsPushConfig, pushUrlError, type PushRelayRecord, type PushUrlVerdict } from "../../../src/a2a/push-url.ts";

/** An allowlist that lifts every private target the tests use: a caller's URL must still be refused. */
const generous = { allow: ["127.0.0.1", "localhost", "10.0.0.5", "[::1]", "hooks.internal", "169.254.10.10", "[fd00::5]", "public.example.com"] };

const code = (v: PushUrlVerdict) => (v.ok ? "ok" : v.refusal.code);

describe("push-notification URLs", () => {
  it("accepts a public https URL, normalized", () => {
    const v = checkPushUrl("https://Hooks.Example.com/a2a/notify?k=1", { allow: [] });
    expect(v.ok && v.url.href).toBe("https://hooks.example.com/a2a/notify?k=1");
  });

  it.each([
    ["https://127.0.0.1/hook", "private_address"],
    ["https://127.1/hook", "private_address"],
    ["https://2130706433/hook", "private_address"],
    ["https://0x7f000001/hook", "private_address"],
    ["https://[::1]/hook", "private_address"],
    ["https://[::ffff:10.0.0.5]/hook", "private_address"],
    ["https://10.0.0.5/hook", "private_address"],
    ["https://192.168.1.1/hook", "private_address"],
    ["https://169.254.10.10/hook", "private_address"],
    ["https://[fe80::1]/hook", "private_address"],
    ["https://[fd00::5]/hook", "private_address"],
    ["https://100.64.0.1/hook", "private_address"],
    ["https://169.254.169.254/latest/meta-data", "metadata_service"],
    ["https://[fd00:ec2::254]/latest", "metadata_service"],
    ["https://metadata.google.internal/computeMetadata/v1", "metadata_service"],
    ["https://localhost/hook", "internal_name"],
    ["https://hooks.internal/hook", "internal_name"],
    ["https://intranet/hook", "internal_name"],
    ["https://0.0.0.0/hook", "reserved_address"],
    ["http://public.example.com/hook", "http_not_allowed"],
    ["ftp://public.example.com/hook", "scheme_not_allowed"],
    ["https://user:pw@public.example.com/hook", "credentials_in_url"],
    ["/relative", "invalid_url"],
    ["https://public.example.com/hook#frag", "fragment"],
  ])("refuses %s (%s) whatever the allowlist says", (url, expected) => {
    expect(code(checkPushUrl(url, generous))).toBe(expected);
    expect(code(checkPushUrl(url, { allow: [] }))).toBe(expected);
  });

  it("refuses an overlong URL", () => {
    expect(code(checkPushUrl(`https://hooks.example.com/${"a".repeat(2100)}`, { allow: [] }))).toBe("too_long");
  });

  it("says why in the caller's words, naming the origin but not the path, query or credentials", () => {
    const v = checkPushUrl("https://user:secret@10.0.0.5/hook?token=abc", generous);
    expect(v.ok).toBe(false);
    if (v.ok) return;
    expect(v.refusal.message).toBe("The push notification URL https://10.0.0.5 must not carry credentials; use the push config's token or authentication; webhooks must be public https URLs.");
    const meta = checkPushUrl("https://169.254.169.254/latest?token=abc", generous);
    if (meta.ok) throw new Error("accepted a metadata address");
    expect(meta.refusal.message).toBe("The push notification URL https://169.254.169.254 is a cloud metadata service; webhooks must be public https URLs.");
    expect(meta.refusal.message).not.toMatch(/egress|gateway\.yaml|abc/);
    const err = pushUrlError(meta.refusal);
    expect(err).toMatchObject({ code: "invalid_request", status: 400, param: "pushNotificationConfig.url", details: [{ reason: "metadata_service" }] });
  });

  it("binds a record to its caller and checks its URL again at delivery", () => {
    const v = checkPushUrl("https://hooks.example.com/n", { allow: [] });
    if (!v.ok) throw new Error(v.refusal.message);
    const record: PushRelayRecord = { tenant: "acme", key: "k1", agent: "billing", generation: "1.0", url: v.url.href, token: "tok", authentication: undefined, configId: "mine", gatewayToken: "g", issuedAt: 42 };
    expect(ownsPushConfig(record, { tenant: "acme", key: "k1" })).toBe(true);
    expect(ownsPushConfig(record, { tenant: "acme", key: "k2" })).toBe(false);
    expect(ownsPushConfig(record, { tenant: "other", key: "k1" })).toBe(false);
    expect(deliverableUrl(record, { allow: [] }).ok).toBe(true);
    // A record stored before a check existed (or tampered with) is not delivered.
    expect(code(deliverableUrl({ ...record, url: "https://169.254.169.254/" }, generous))).toBe("metadata_service");
  });

  it("lifts the https and public rules for an origin the operator lists, exactly, but never for a metadata service", () => {
    const listed = ["http://127.0.0.1:8123", "https://hooks.corp.internal"];
    expect(checkPushUrl("http://127.0.0.1:8123/hook?x=1", { allow: [] }, listed).ok).toBe(true);
    expect(checkPushUrl("https://hooks.corp.internal/a", { allow: [] }, listed).ok).toBe(true);
    // Another port, another scheme, another host: not listed.
    expect(code(checkPushUrl("http://127.0.0.1:8124/hook", { allow: [] }, listed))).toBe("private_address");
    expect(code(checkPushUrl("https://127.0.0.1:8123/hook", { allow: [] }, listed))).toBe("private_address");
    expect(code(checkPushUrl("http://localhost:8123/hook", { allow: [] }, listed))).toBe("internal_name");
    expect(code(checkPushUrl("http://169.254.169.254/latest", { allow: [] }, ["http://169.254.169.254"]))).toBe("metadata_service");
    expect(code(checkPushUrl("http://u:p@127.0.0.1:8123/hook", { allow: [] }, listed))).toBe("credentials_in_url");
  });
});
