/**
 * IP literals in every spelling a resolver or URL parser accepts, and the ranges the egress guard
 * refuses. Parsing is done here rather than trusted to `new URL()`: WHATWG already folds most IPv4
 * spellings into dotted quads, but a host that reaches the guard some other way (a stored probe
 * target, a name with trailing dots) must be read the way a socket library would read it.
 */

/** Why an address is not public; `metadata` and the `never` kinds cannot be allowlisted. */
export type AddressKind =
  | "public"
  | "loopback"
  | "private"
  | "link_local"
  | "shared"
  | "unique_local"
  | "special"
  | "metadata"
  | "unspecified"
  | "broadcast"
  | "multicast"
  | "reserved";

/** Kinds that no allowlist entry lifts: nothing legitimate answers there. */
export const NEVER_ALLOWED: ReadonlySet<AddressKind> = new Set(["metadata", "unspecified", "broadcast", "multicast", "reserved"]);

/** A parsed literal: `v4` as an unsigned 32-bit number, `v6` as eight 16-bit words. */
export type IpLiteral = { readonly family: 4; readonly v4: number } | { readonly family: 6; readonly words: readonly number[] };

/** Parses one IPv4 part the way inet_aton does: `0x` hex, a leading `0` octal, else decimal. */
function ipv4Part(part: string): number | undefined {
  if (/^0[xX][0-9a-fA-F]*$/.test(part)) return part.length === 2 ? 0 : parseInt(part.slice(2), 16);
  if (/^0[0-7]+$/.test(part)) return parseInt(part.slice(1), 8);
  if (/^0[0-9]+$/.test(part)) return undefined; // `08`: octal-looking but not octal
  if (/^[0-9]+$/.test(part)) return parseInt(part, 10);
  return undefined;
}

/**
 * An IPv4 address in any inet_aton spelling — `127.0.0.1`, `2130706433`, `0177.0.0.1`,
 * `0x7f.1`, `127.1` — with trailing dots ignored. `undefined` when the text is not all numbers
 * (a host name); `"invalid"` when it is numbers but no address (`256.1.1.1`, five parts).
 */
export function parseIpv4(text: string): number | "invalid" | undefined {
  const parts = text.replace(/\.+$/, "").split(".");
  if (parts.length === 0 || parts.some((p) => p === "")) return undefined;
  const values = parts.map(ipv4Part);
  if (values.some((v) => v === undefined)) {
    // A name, unless its last label looks numeric: WHATWG treats such a host as a broken IPv4.
    return /^(0[xX][0-9a-fA-F]*|[0-9]+)$/.test(parts.at(-1)!) ? "invalid" : undefined;
  }
  const nums = values as number[];
  if (nums.length > 4) return "invalid";
  const last = nums.at(-1)!;
  const head = nums.slice(0, -1);
  if (head.some((n) => n > 255) || last >= 2 ** (8 * (5 - nums.length))) return "invalid";
  let v = 0;
  for (const n of head) v = v * 256 + n;
  return v * 2 ** (8 * (5 - nums.length)) + last;
}

/**
 * An IPv6 address, with or without brackets, `::` compression, a dotted IPv4 tail and a zone id
 * (`%eth0`, or `%25eth0` as URLs write it; the zone is dropped: the address still decides).
 * `undefined` when it is not one.
 */
export function parseIpv6(text: string): readonly number[] | undefined {
  let s = text.startsWith("[") && text.endsWith("]") ? text.slice(1, -1) : text;
  const zone = s.indexOf("%");
  if (zone >= 0) s = s.slice(0, zone);
  if (s === "" || !/^[0-9a-fA-F:.]+$/.test(s)) return undefined;
  const halves = s.split("::");
  if (halves.length > 2) return undefined;
  const groups = (half: string): number[] | undefined => {
    if (half === "") return [];
    const out: number[] = [];
    const pieces = half.split(":");
    for (const [i, p] of pieces.entries()) {
      if (p.includes(".")) {
        // Only the last piece may be a dotted quad, and only in strict dotted form.
        if (i !== pieces.length - 1 || !/^\d{1,3}(\.\d{1,3}){3}$/.test(p)) return undefined;
        const bytes = p.split(".").map(Number);
        if (bytes.some((b) => b > 255)) return undefined;
        out.push(bytes[0]! * 256 + bytes[1]!, bytes[2]! * 256 + bytes[3]!);
      } else {
        if (!/^[0-9a-fA-F]{1,4}$/.test(p)) return undefined;
        out.push(parseInt(p, 16));
      }
    }
    return out;
  };
  const head = groups(halves[0]!);
  const tail = halves.length === 2 ? groups(halves[1]!) : [];
  if (!head || !tail) return undefined;
  if (halves.length === 1) return head.length === 8 ? head : undefined;
  const missing = 8 - head.length - tail.length;
  if (missing < 1) return undefined;
  return [...head, ...new Array<number>(missing).fill(0), ...tail];
}

/** A host as it appears in a URL (brackets for IPv6) → a literal, `"invalid"`, or undefined for a name. */
export function parseIpLiteral(host: string): IpLiteral | "invalid" | undefined {
  if (host.startsWith("[")) {
    const words = parseIpv6(host);
    return words ? { family: 6, words } : "invalid";
  }
  if (host.includes(":")) {
    const words = parseIpv6(host);
    return words ? { family: 6, words } : "invalid";
  }
  const v4 = parseIpv4(host);
  if (v4 === undefined || v4 === "invalid") return v4;
  return { family: 4, v4 };
}

const ip4 = (a: number, b: number, c: number, d: number) => ((a * 256 + b) * 256 + c) * 256 + d;
const inV4 = (v: number, base: number, bits: number) => Math.floor(v / 2 ** (32 - bits)) === Math.floor(base / 2 ** (32 - bits));

/** Cloud metadata services: AWS (EC2, ECS, EKS pod identity), GCP, Azure and Oracle at 169.254.169.254, Alibaba, Oracle's older address. */
const METADATA_V4 = new Set([ip4(169, 254, 169, 254), ip4(169, 254, 170, 2), ip4(169, 254, 170, 23), ip4(100, 100, 100, 200), ip4(192, 0, 0, 192)]);
/** AWS's IPv6 instance metadata and EKS pod identity addresses. */
const METADATA_V6 = new Set(["fd00:ec2:0:0:0:0:0:254", "fd00:ec2:0:0:0:0:0:23"]);

/** The IPv4 ranges that are not public, most specific first. */
const V4_RANGES: readonly (readonly [number, number, AddressKind])[] = [
  [ip4(255, 255, 255, 255), 32, "broadcast"],
  [ip4(0, 0, 0, 0), 8, "unspecified"],
  [ip4(127, 0, 0, 0), 8, "loopback"],
  [ip4(10, 0, 0, 0), 8, "private"],
  [ip4(172, 16, 0, 0), 12, "private"],
  [ip4(192, 168, 0, 0), 16, "private"],
  [ip4(169, 254, 0, 0), 16, "link_local"],
  [ip4(100, 64, 0, 0), 10, "shared"],
  [ip4(192, 0, 0, 0), 24, "special"],
  [ip4(192, 0, 2, 0), 24, "special"],
  [ip4(192, 88, 99, 0), 24, "special"],
  [ip4(198, 18, 0, 0), 15, "special"],
  [ip4(198, 51, 100, 0), 24, "special"],
  [ip4(203, 0, 113, 0), 24, "special"],
  [ip4(224, 0, 0, 0), 4, "multicast"],
  [ip4(240, 0, 0, 0), 4, "reserved"],
];

/** What an IPv4 address is. */
export function classifyIpv4(v: number): AddressKind {
  if (METADATA_V4.has(v)) return "metadata";
  for (const [base, bits, kind] of V4_RANGES) if (inV4(v, base, bits)) return kind;
  return "public";
}

const v4Of = (hi: number, lo: number) => hi * 65536 + lo;

/**
 * What an IPv6 address is. Addresses that carry an IPv4 address (mapped `::ffff:0:0/96`,
 * compatible `::/96`, SIIT `::ffff:0:0:0/96`, NAT64 `64:ff9b::/96`, 6to4 `2002::/16`) are what
 * the IPv4 address they carry is, so `[::ffff:127.0.0.1]` is loopback like `127.0.0.1`.
 */
export function classifyIpv6(w: readonly number[]): AddressKind {
  const key = w.map((x) => x.toString(16)).join(":");
  if (METADATA_V6.has(key)) return "metadata";
  const zeros = (from: number, to: number) => w.slice(from, to).every((x) => x === 0);
  if (zeros(0, 8)) return "unspecified";
  if (zeros(0, 7) && w[7] === 1) return "loopback";
  if (zeros(0, 5) && w[5] === 0xffff) return classifyIpv4(v4Of(w[6]!, w[7]!));
  if (zeros(0, 4) && w[4] === 0xffff && w[5] === 0) return classifyIpv4(v4Of(w[6]!, w[7]!));
  if (zeros(0, 6)) return classifyIpv4(v4Of(w[6]!, w[7]!));
  if (w[0] === 0x64 && w[1] === 0xff9b && zeros(2, 6)) return classifyIpv4(v4Of(w[6]!, w[7]!));
  if (w[0] === 0x64 && w[1] === 0xff9b && w[2] === 1) return "special";
  if (w[0] === 0x2002) return classifyIpv4(v4Of(w[1]!, w[2]!));
  const first = w[0]!;
  if ((first & 0xff00) === 0xff00) return "multicast";
  if ((first & 0xfe00) === 0xfc00) return "unique_local";
  if ((first & 0xffc0) === 0xfe80) return "link_local";
  if ((first & 0xffc0) === 0xfec0) return "link_local"; // deprecated site-local
  if (first === 0x100 && zeros(1, 4)) return "special"; // discard-only 100::/64
  if (first === 0x2001 && w[1]! < 0x200) return "special"; // IETF protocol assignments, Teredo included
  if (first === 0x2001 && w[1] === 0xdb8) return "special"; // documentation
  if ((first & 0xe000) !== 0x2000) return "reserved"; // outside global unicast 2000::/3
  return "public";
}

/** What a parsed literal is. */
export function classifyIp(ip: IpLiteral): AddressKind {
  return ip.family === 4 ? classifyIpv4(ip.v4) : classifyIpv6(ip.words);
}

/** The literal as a CIDR of one address (`127.0.0.1/32`, `::1/128`), as workerd's network allow list takes it. */
export function hostCidr(ip: IpLiteral): string {
  if (ip.family === 4) return `${[24, 16, 8, 0].map((s) => Math.floor(ip.v4 / 2 ** s) % 256).join(".")}/32`;
  return `${ip.words.map((x) => x.toString(16)).join(":")}/128`;
}
