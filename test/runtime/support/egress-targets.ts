/**
 * The egress guard's table: targets refused under the bundled policy (gateway.yaml allows only the
 * simulator, `127.0.0.1:9901`) in every spelling, and targets that must pass. The config-load,
 * snapshot-push (runtime and end-to-end) and probe-time tests all run this one table.
 */

/** A refused target and what it is. */
export interface EgressCase {
  readonly url: string;
  readonly what: string;
}

export const FORBIDDEN_TARGETS: readonly EgressCase[] = [
  // Loopback, in every spelling a URL parser or a resolver accepts.
  { url: "http://127.0.0.1:8080/v1", what: "loopback on a port the allowlist does not name" },
  { url: "https://127.0.0.1/v1", what: "loopback over https" },
  { url: "https://127.0.0.2/v1", what: "loopback, another address of 127/8" },
  { url: "https://2130706433/v1", what: "loopback as a decimal integer" },
  { url: "https://0177.0.0.1/v1", what: "loopback in octal" },
  { url: "https://017700000001/v1", what: "loopback as one octal integer" },
  { url: "https://0x7f.0.0.1/v1", what: "loopback in hex" },
  { url: "https://0x7f000001/v1", what: "loopback as one hex integer" },
  { url: "https://127.1/v1", what: "loopback, short form" },
  { url: "https://127.000.000.001/v1", what: "loopback with zero padding" },
  { url: "https://127.0.0.1./v1", what: "loopback with a trailing dot" },
  { url: "https://127.0.0.1.../v1", what: "loopback with trailing dots (URL keeps them)" },
  { url: "https://１２７.０.０.１/v1", what: "loopback in full-width digits" },
  { url: "https://[::1]/v1", what: "IPv6 loopback" },
  { url: "https://[0:0:0:0:0:0:0:1]/v1", what: "IPv6 loopback, uncompressed" },
  { url: "https://[::ffff:127.0.0.1]/v1", what: "IPv4-mapped loopback" },
  { url: "https://[::ffff:7f00:1]/v1", what: "IPv4-mapped loopback in hex" },
  { url: "https://[::127.0.0.1]/v1", what: "IPv4-compatible loopback" },
  { url: "https://[::ffff:0:127.0.0.1]/v1", what: "IPv4-translated loopback" },
  { url: "https://[64:ff9b::127.0.0.1]/v1", what: "NAT64 loopback" },
  { url: "https://[2002:7f00:1::]/v1", what: "6to4 loopback" },
  { url: "https://localhost/v1", what: "localhost" },
  { url: "https://LOCALHOST./v1", what: "localhost, upper case with a trailing dot" },
  { url: "https://api.localhost/v1", what: "a name under .localhost" },
  { url: "https://%6c%6fcalhost/v1", what: "localhost, percent-encoded" },
  { url: "https://ⓛocalhost/v1", what: "localhost, IDNA-mapped" },
  // Private, shared, unique-local and link-local.
  { url: "https://10.1.2.3/v1", what: "private 10/8" },
  { url: "https://172.16.0.1/v1", what: "private 172.16/12" },
  { url: "https://172.31.255.254/v1", what: "private 172.16/12, its top" },
  { url: "https://192.168.1.10/v1", what: "private 192.168/16" },
  { url: "https://3232235786/v1", what: "private 192.168.1.10 as a decimal integer" },
  { url: "https://100.64.0.1/v1", what: "shared address space (CGNAT)" },
  { url: "https://[fd12:3456::1]/v1", what: "IPv6 unique-local" },
  { url: "https://[fc00::1]/v1", what: "IPv6 unique-local, fc00::/8" },
  { url: "https://[::ffff:10.0.0.1]/v1", what: "IPv4-mapped private" },
  { url: "https://169.254.1.1/v1", what: "link-local" },
  { url: "https://[fe80::1]/v1", what: "IPv6 link-local" },
  { url: "https://[fe80::1%25eth0]/v1", what: "IPv6 link-local with a zone id" },
  // Cloud metadata services.
  { url: "http://169.254.169.254/latest/meta-data", what: "AWS, GCP, Azure metadata" },
  { url: "http://2852039166/latest/meta-data", what: "169.254.169.254 as a decimal integer" },
  { url: "http://0xa9.0xfe.0xa9.0xfe/latest", what: "169.254.169.254 in hex" },
  { url: "http://[::ffff:169.254.169.254]/latest", what: "169.254.169.254, IPv4-mapped" },
  { url: "http://169.254.170.2/v2/credentials", what: "AWS ECS task metadata" },
  { url: "http://[fd00:ec2::254]/latest", what: "AWS IPv6 metadata" },
  { url: "http://100.100.100.200/latest", what: "Alibaba metadata" },
  { url: "http://metadata.google.internal/computeMetadata/v1", what: "GCP metadata by name" },
  { url: "http://metadata.google.internal./computeMetadata/v1", what: "GCP metadata by name, trailing dot" },
  // Unspecified, broadcast, multicast, reserved.
  { url: "https://0.0.0.0/v1", what: "unspecified" },
  { url: "https://0/v1", what: "unspecified as an integer" },
  { url: "https://[::]/v1", what: "IPv6 unspecified" },
  { url: "https://255.255.255.255/v1", what: "broadcast" },
  { url: "https://224.0.0.1/v1", what: "multicast" },
  { url: "https://[ff02::1]/v1", what: "IPv6 multicast" },
  { url: "https://240.0.0.1/v1", what: "reserved 240/4" },
  // Internal names.
  { url: "https://db.internal/v1", what: "a name under .internal" },
  { url: "https://printer.local/v1", what: "an mDNS .local name" },
  { url: "https://vllm:8000/v1", what: "a single-label name (resolved by search domains)" },
  // Schemes and credentials.
  { url: "http://api.example.com/v1", what: "plain http to a public host" },
  { url: "ftp://api.example.com/v1", what: "not http(s)" },
  { url: "https://user:secret@api.example.com/v1", what: "credentials in the URL" },
  { url: "https://api.example.com@127.0.0.1/v1", what: "a user name that looks like the host" },
];

/** Targets the bundled policy lets through. */
export const ALLOWED_TARGETS: readonly EgressCase[] = [
  { url: "https://api.openai.com/v1", what: "a public provider" },
  { url: "https://api.anthropic.com/v1", what: "a public provider" },
  { url: "https://api.example.com:8443/v1", what: "https on another port" },
  { url: "https://8.8.8.8/v1", what: "a public IPv4 literal" },
  { url: "https://[2606:4700:4700::1111]/v1", what: "a public IPv6 literal" },
  { url: "http://127.0.0.1:9901/v1", what: "the allowlisted simulator" },
  { url: "http://2130706433:9901/v1", what: "the allowlisted simulator's address, spelled as an integer" },
];
