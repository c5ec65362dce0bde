/**
 * The secrets the gateway holds, by name and by value: what a provider's response must never carry
 * to a client (a backend that echoes its own key in a header, an error page quoting a token).
 */

/** A key naming a secret: `secret`, `secrets`, or one ending in `Secret` (`adminTokenSecret`, `stateSecret`, `headersSecret`). */
const SECRET_KEY = /^secrets?$|Secret$/;

/**
 * Every secret name a config object refers to: the strings at keys that name secrets (walked
 * through nested objects and arrays, so a secret setting added later is covered without a list to
 * keep), and every part of an AWS credential (`accessKeyId`, `secretAccessKey`, `sessionToken`).
 */
export function secretNamesIn(value: unknown, into: Set<string> = new Set()): Set<string> {
  if (Array.isArray(value)) {
    for (const v of value) secretNamesIn(v, into);
  } else if (typeof value === "object" && value !== null) {
    for (const [k, v] of Object.entries(value)) {
      if (k === "awsCredential" && typeof v === "object" && v !== null) {
        for (const part of Object.values(v)) if (typeof part === "string") into.add(part);
      } else if (SECRET_KEY.test(k) && typeof v === "string") {
        into.add(v);
      } else if (SECRET_KEY.test(k) && Array.isArray(v)) {
        for (const s of v) if (typeof s === "string") into.add(s);
      } else {
        secretNamesIn(v, into);
      }
    }
  }
  return into;
}

/**
 * The values of every secret the given config objects name (gateway.yaml's bootstrap, each
 * backend of a snapshot) that are set, longest first; empty ones left out, as they are in every
 * string. Any object is walked, so this layer needs none of their types.
 */
export function heldSecretValues(configs: Iterable<unknown>, read: (name: string) => string | undefined): readonly string[] {
  const names = new Set<string>();
  for (const c of configs) secretNamesIn(c, names);
  const values = new Set<string>();
  for (const name of names) {
    const v = read(name);
    if (v !== undefined && v !== "") values.add(v);
  }
  return Object.freeze([...values].sort((a, b) => b.length - a.length));
}
