// Web platform types the gateway's engine names and workerd declares globally: the CLI runs that
// engine in Node (an offline explain), whose own types keep them under node:crypto and
// node:stream/web.
type CryptoKey = import("node:crypto").webcrypto.CryptoKey;
type SubtleCrypto = import("node:crypto").webcrypto.SubtleCrypto;
type ReadableStreamReadResult<T> = import("node:stream/web").ReadableStreamReadResult<T>;
