import { describe, expect, it } from "vitest";
import { countPii, findPii, PII_DETECTORS, type PiiDetector } from "../../../src/signals/pii.ts";

const ALL: ReadonlySet<PiiDetector> = new Set(PII_DETECTORS);

/** What each match covers, as [detector, matched text]. */
function found(text: string, detectors: ReadonlySet<PiiDetector> = ALL): [PiiDetector, string][] {
  return findPii(text, detectors).map((m) => [m.detector, text.slice(m.start, m.end)]);
}

/** Each case must match exactly `expected` (the whole of it) as `detector`, inside a sentence. */
function expectMatches(detector: PiiDetector, cases: readonly string[]): void {
  for (const value of cases) expect(found(`see ${value}, thanks`), value).toEqual([[detector, value]]);
}

/** None of the cases may match anything, under any detector. */
function expectNothing(cases: readonly string[]): void {
  for (const value of cases) expect(found(`see ${value}, thanks`), value).toEqual([]);
}

describe("email", () => {
  it("finds addresses in the practical RFC 5322 subset", () => {
    expectMatches("email", ["john.doe@example.com", "a.b+tag@sub.example.co.uk", "first_last%x@mail-host.example.org", "x@xn--bcher-kva.example"]);
    expect(found("Write to <ops@example.com>.")).toEqual([["email", "ops@example.com"]]);
    expect(found("mailto:ops@example.com")).toEqual([["email", "ops@example.com"]]);
  });

  it("ignores what is not an address", () => {
    expectNothing(["user@localhost", "john@", "@example.com", "john..doe@example.com", "john.@example.com", "foo@bar", "a@b.c", "john(at)example.com", "@@@", "name@-example.com"]);
  });
});

describe("payment_card", () => {
  it("finds numbers of a known issuer that pass Luhn, together or grouped", () => {
    expectMatches("payment_card", [
      "4111 1111 1111 1111",
      "4111-1111-1111-1111",
      "4012888888881881",
      "4222222222222",
      "5555 5555 5555 4444",
      "2223003122003222",
      "3782 822463 10005",
      "371449635398431",
      "6011 0009 9013 9424",
      "3530111333300000",
      "3056 930902 5904",
      "6200000000000005",
    ]);
  });

  it("finds a grouped card among other numbers", () => {
    expect(found("card 4111 1111 1111 1111 2027 CVC", new Set(["payment_card"]))).toEqual([["payment_card", "4111 1111 1111 1111"]]);
  });

  it("ignores Luhn-invalid numbers, unknown issuers, wrong lengths and longer digit runs", () => {
    expectNothing([
      "4111 1111 1111 1112",
      "4111111111111112",
      "1000234567890127", // passes Luhn, no issuer starts with 1: an order number
      "9876543210987658", // passes Luhn, no issuer starts with 98
      "41111111111111110", // Visa is 13, 16 or 19 digits
      "41111111111111111111",
      "order ORD-41111111111111119",
      "4111 11 11 1111 1111",
    ]);
  });
});

describe("iban", () => {
  it("finds IBANs of the country's length that pass mod 97, in electronic and print form", () => {
    expectMatches("iban", [
      "DE89 3704 0044 0532 0130 00",
      "DE89370400440532013000",
      "GB82 WEST 1234 5698 7654 32",
      "FR14 2004 1010 0505 0001 3M02 606",
      "NL91ABNA0417164300",
      "CH9300762011623852957",
      "BE68539007547034",
      "NO9386011117947",
      "IT60X0542811101000000123456",
      "ES91 2100 0418 4502 0005 1332",
    ]);
  });

  it("ignores a wrong checksum, a wrong length, an unknown country and odd grouping", () => {
    expectNothing([
      "DE88 3704 0044 0532 0130 00",
      "DE89 3704 0044 0532 0130 0",
      "DE89 3704 0044 0532 0130 001",
      "XX89 3704 0044 0532 0130 00",
      "DE89 37040 044 0532 0130 00",
      "de89370400440532013000",
    ]);
  });
});

describe("ip_address", () => {
  it("finds IPv4 with octets up to 255 and IPv6 in full, compressed and IPv4-embedding forms", () => {
    expectMatches("ip_address", [
      "192.168.1.1",
      "10.0.0.255",
      "8.8.8.8",
      "2001:0db8:85a3:0000:0000:8a2e:0370:7334",
      "2001:db8::1",
      "fe80::1ff:fe23:4567:890a",
      "::1",
      "::ffff:192.0.2.128",
      "2001:db8::",
    ]);
    expect(found("connect to [2001:db8::1]:443 now")).toEqual([["ip_address", "2001:db8::1"]]);
    expect(found("listening on fe80::1: ready")).toEqual([["ip_address", "fe80::1"]]);
  });

  it("counts a bare four-part version as an address, and nothing else that looks like one", () => {
    // 1.2.3.4 cannot be told from an address: it is one (documented on the detector).
    expect(found("release 1.2.3.4 is out")).toEqual([["ip_address", "1.2.3.4"]]);
    expectNothing(["256.1.1.1", "1.2.3", "v1.2.3.4", "1.2.3.4.5", "01.02.03.04", "10:30:00", "00:1A:2B:3C:4D:5E", "std::vector", "a[1::2]", "x[::2]", "1::2::3", "12345::1"]);
  });
});

describe("us_ssn", () => {
  it("finds AAA-GG-SSSS with a valid area, group and serial, and nine digits after 'SSN'", () => {
    expectMatches("us_ssn", ["123-45-6789", "123 45 6789", "078-05-1121"]);
    expect(found("SSN: 123456789")).toEqual([["us_ssn", "123456789"]]);
    expect(found("social security number 123456789")).toEqual([["us_ssn", "123456789"]]);
  });

  it("ignores excluded areas, groups and serials, and nine digits that are not SSNs", () => {
    expectNothing(["000-12-3456", "666-12-3456", "900-12-3456", "999-12-3456", "123-00-4567", "123-45-0000", "123-45 6789", "123456789", "order 123456789", "1123-45-6789", "123-45-67890"]);
  });
});

describe("phone", () => {
  it("finds international numbers with a plausible count of digits", () => {
    expectMatches("phone", ["+1 (415) 555-2671", "+1 415 555 2671", "+14155552671", "+44 20 7946 0958", "+44 (0) 20 7946 0958", "+49 30 901820", "+33 1 42 68 53 00", "+81 3-1234-5678", "+86 138 0013 8000", "+7 495 123-45-67"]);
  });

  it("finds national numbers in common formats", () => {
    expectMatches("phone", ["(415) 555-2671", "415-555-2671", "415.555.2671", "1-800-555-0199", "020 7946 0958", "030 901820", "(02) 9876 5432", "06 12 34 56 78", "01.42.68.53.00", "090-1234-5678"]);
  });

  it("drops a number that prose glued onto a phone number", () => {
    expect(found("call +44 20 7946 0958 2026 ok")).toEqual([["phone", "+44 20 7946 0958"]]);
  });

  it("ignores dates, times, ids, versions and implausible numbers", () => {
    expectNothing([
      "2026-12-07",
      "07/12/2026",
      "07.12.2026",
      "12.07.2026 10:30",
      "2026-12-07T10:30:00Z",
      "1765065600",
      "1765065600000",
      "order #100234567890",
      "4155552671",
      "123-456-7890", // no area code starts with 1
      "415-555.2671",
      "555-1234",
      "+1 123 456 7890",
      "+12",
      "2+2=4",
      "0012-3456-7890",
      "2026 044 0532 0130", // a national number is not taken from the middle of a longer run
      "v1.2.3",
    ]);
  });
});

describe("api_key", () => {
  const openai = "sk-Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4zAb7cDe0fGh3iJk6l";
  const project = "sk-proj-Zx9Yw8Vu7Ts6Rq5Po4Nm3Lk2Ji1Hg0FeDcBa_Zx9Yw8Vu7Ts6-Rq5Po4Nm3Lk2Ji1Hg0";
  const anthropic = "sk-ant-api03-" + "Qw3Er5Ty7Ui9Op1As3Df5Gh7Jk9Lz1Xc3Vb5Nm7Qw9Er1Ty3Ui5Op7As9Df1Gh3Jk5Lz7Xc9Vb1Nm3Qw5Er7Ty9Ui1-Op3AsAA";
  const cases = [
    openai,
    project,
    anthropic,
    "AKIAIOSFODNN7EXAMPLE",
    "ASIAY34FZKBOKMUTVV7A",
    "ghp_" + "aB1cD2eF3gH4iJ5kL6mN7oP8qR9sT0uV1wX2y",
    "github_pat_11ABCDEFG0123456789abc_" + "aBcDeFgHiJkLmNoPqRsTuVwXyZ0123456789aBcDeFgHiJkLmNoPqRsTuVw",
    "xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx",
    "AIzaSyA1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q",
    "sk_live_4eC39HqLyjWDarjtT1zdp7dc",
  ];

  it("finds provider key shapes", () => {
    expectMatches("api_key", cases);
    expect(found(`OPENAI_API_KEY=${openai}`)).toEqual([["api_key", openai]]);
    expect(found(`"Authorization: Bearer ${project}"`)).toEqual([["api_key", project]]);
  });

  it("ignores sk- in ordinary words and prefixes without a key's body", () => {
    expectNothing([
      "risk-free",
      "a desk-top app",
      "sk-learn",
      "sk-the-quick-brown-fox-jumps-over-the-lazy-dog",
      "sk-1234567890abcdef1234567890abcdef",
      "task-" + openai.slice(3),
      "ghp_short",
      "AKIAIOSFODNN7EXAMPL",
      "AKIAIOSFODNN7EXAMPLE1",
      "ASIAN markets",
      "xoxb-not-a-token-at-all",
      "AIzaTooShort",
    ]);
  });
});

describe("jwt", () => {
  const header = "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9";
  const payload = "eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4gRG9lIiwiaWF0IjoxNTE2MjM5MDIyfQ";
  const token = `${header}.${payload}.SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c`;

  it("finds three base64url parts whose header is a JSON object with alg", () => {
    expectMatches("jwt", [token, "eyJhbGciOiJub25lIn0.eyJzdWIiOiI0MiJ9."]);
    expect(found(`Authorization: Bearer ${token}.`)).toEqual([["jwt", token]]);
  });

  it("finds a JWE's five parts", () => {
    const jwe = "eyJhbGciOiJSU0EtT0FFUCIsImVuYyI6IkEyNTZHQ00ifQ.OKOawDo13gRp2ojaHV7LFpZcgV7T6DVZKTyKOMTYUmKoTCVJRgckCL9kiMT03JGe.48V1_ALb6US04U3b.5eym8TW_c8SuK0ltJ3rpYIzOeDQz7TALvtu6UG9oMo4vpzs9tX_EFShS8iB7j6jiSdiwkIr3ajwQzaBtQD_A.XFBoMYUZodetZdvTiFvSkQ";
    expect(found(`token ${jwe} end`)).toEqual([["jwt", jwe]]);
  });

  it("ignores a header without alg, a header that is not JSON, and two parts", () => {
    expectNothing([`eyJ0eXAiOiJKV1QifQ.${payload}.c2ln`, `eyJub3QganNvbg.${payload}.c2ln`, `${header}.${payload}`, `${header}..c2ln`, "eyJ.eyJ.eyJ"]);
  });
});

describe("private_key", () => {
  const line = "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7VJTUt9Us8cKj";
  const body = [line, line, "MZ8a0b1c2d3e4f5g6h7i8j9k0l1m2n3o4p5q6r7s8t9u0v1w2x3y4z5A6B7C8D9E", "Zx8=="].join("\n");

  it("finds a PEM block from its BEGIN line through its END line", () => {
    for (const kind of ["PRIVATE KEY", "RSA PRIVATE KEY", "EC PRIVATE KEY", "OPENSSH PRIVATE KEY", "ENCRYPTED PRIVATE KEY"]) {
      const pem = `-----BEGIN ${kind}-----\n${body}\n-----END ${kind}-----`;
      expect(found(`key:\n${pem}\nthanks`)).toEqual([["private_key", pem]]);
    }
  });

  it("finds a PGP private key block with its armor headers", () => {
    const pgp = `-----BEGIN PGP PRIVATE KEY BLOCK-----\nVersion: GnuPG v2\n\n${body}\n=AbCd\n-----END PGP PRIVATE KEY BLOCK-----`;
    expect(found(pgp)).toEqual([["private_key", pgp]]);
  });

  it("finds a block written inside a JSON string, with escaped line breaks", () => {
    const pem = `-----BEGIN PRIVATE KEY-----\\n${line}\\n${line}\\n-----END PRIVATE KEY-----`;
    expect(found(`{"type": "service_account", "private_key": "${pem}\\n", "client_email": "x"}`, new Set(["private_key"]))).toEqual([["private_key", pem]]);
  });

  it("covers a block cut before its END line up to its last line of key material", () => {
    const cut = `-----BEGIN RSA PRIVATE KEY-----\n${line}\n${line.slice(0, 20)}`;
    expect(found(`${cut}\nThanks\nCan you check this key?`)).toEqual([["private_key", cut]]);
    expect(found(`${cut}`)).toEqual([["private_key", cut]]);
  });

  it("ignores public keys and certificates", () => {
    expectNothing([`-----BEGIN PUBLIC KEY-----\n${line}\n-----END PUBLIC KEY-----`, `-----BEGIN CERTIFICATE-----\n${line}\n-----END CERTIFICATE-----`]);
  });
});

describe("near misses across every detector", () => {
  it("finds nothing in ids, UUIDs, timestamps, hashes and version strings", () => {
    expectNothing([
      "550e8400-e29b-41d4-a716-446655440000",
      "12345678-1234-1234-1234-123456789012",
      "1Z999AA10123456784", // a UPS tracking number
      "9400 1000 0000 0000 0000 00", // a USPS tracking number
      "ORD-2026-000123",
      "INV-100234567",
      "1765065600",
      "2026-12-07 10:30:00.123",
      "Tue, 07 Dec 2026 10:30:00 GMT",
      "d41d8cd98f00b204e9800998ecf8427e",
      "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
      "v2.14.0-rc.1",
      "node 22.20.7",
      "3.14159265358979323846",
      "1,234,567.89",
    ]);
  });
});

describe("findPii", () => {
  it("returns matches in text order, only of the detectors asked for", () => {
    const text = "Mail john@example.com or call +44 20 7946 0958 from 10.0.0.1; card 4111 1111 1111 1111.";
    expect(found(text)).toEqual([
      ["email", "john@example.com"],
      ["phone", "+44 20 7946 0958"],
      ["ip_address", "10.0.0.1"],
      ["payment_card", "4111 1111 1111 1111"],
    ]);
    expect(found(text, new Set(["ip_address", "email"]))).toEqual([
      ["email", "john@example.com"],
      ["ip_address", "10.0.0.1"],
    ]);
    expect(found(text, new Set())).toEqual([]);
  });

  it("never returns overlapping matches: the earlier wins, then the longer", () => {
    // The IPv4 tail of an IPv6 address starts later: the IPv6 match wins.
    expect(found("at ::ffff:192.0.2.128 now")).toEqual([["ip_address", "::ffff:192.0.2.128"]]);
    // A key inside a PEM body starts later than the block: the block wins.
    const pem = "-----BEGIN PRIVATE KEY-----\nAKIAIOSFODNN7EXAMPLEAAAAAAAAAAAAAAAAAAAAAAAAAAAA\n-----END PRIVATE KEY-----";
    expect(found(pem)).toEqual([["private_key", pem]]);
    for (const text of ["x 4111 1111 1111 1111 123-45-6789 +1 415 555 2671 a@b.co 1.2.3.4", "::1 ::1 fe80::1"]) {
      const ms = findPii(text, ALL);
      for (let i = 1; i < ms.length; i++) expect(ms[i]!.start).toBeGreaterThanOrEqual(ms[i - 1]!.end);
    }
  });
});

describe("countPii", () => {
  it("counts per detector asked for, zeros included, and never carries the matched text", () => {
    const text = "a@example.com, b@example.org, 10.0.0.1, 4111 1111 1111 1111";
    const counts = countPii(text, new Set(["email", "ip_address", "us_ssn"]));
    expect(counts).toEqual({ email: 2, ip_address: 1, us_ssn: 0 });
    expect(JSON.stringify(counts)).not.toContain("example");
  });
});

describe("linear time", () => {
  const SIZE = 200_000;
  const fill = (unit: string) => unit.repeat(Math.ceil(SIZE / unit.length)).slice(0, SIZE);
  const adversarial: Record<string, string> = {
    digits: fill("1"),
    "digits and spaces": fill("4 "),
    "four-digit groups": fill("4111 "),
    letters: fill("a"),
    "local part then @": fill("a") + "@",
    ats: fill("a@"),
    "dotted domain": "x@" + fill("a."),
    "jwt headers": fill("eyJ"),
    "jwt parts": fill("eyJa."),
    "pem begins": fill("-----BEGIN "),
    "pem body": "-----BEGIN PRIVATE KEY-----\n" + fill("A"),
    "pem lines": "-----BEGIN PRIVATE KEY-----\n" + fill("Ab1\n"),
    "sk prefixes": fill("sk-"),
    "sk body": "sk-" + fill("aB1-"),
    "plus signs": fill("+1 "),
    "plus digits": "+" + fill("1 "),
    "trunk zeros": fill("0 "),
    "dotted digits": fill("1."),
    colons: fill("1:"),
    "double colons": fill("::"),
    "iban starts": fill("DE89"),
    "iban groups": fill("DE89 "),
    "aws prefixes": fill("AKIA"),
    "ssn shapes": fill("123-45-"),
    "phone shapes": fill("(415) 555-"),
    parentheses: fill("(0"),
    "mixed punctuation": fill("a.1-2 3(4)5:6@7+8"),
  };

  for (const [name, text] of Object.entries(adversarial)) {
    it(`finishes quickly on 200 KB of ${name}`, () => {
      const start = performance.now();
      findPii(text, ALL);
      // A generous bound: a backtracking pattern would take minutes here, not a second.
      expect(performance.now() - start).toBeLessThan(1_000);
    });
  }
});
