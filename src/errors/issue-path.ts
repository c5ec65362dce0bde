/**
 * Formats a validation path the way people write it: `a.b[2].c`. Config files, snapshot
 * candidates and request bodies all report the place of a problem this way.
 */
export function formatPath(path: readonly PropertyKey[]): string {
  let out = "";
  for (const seg of path) {
    if (typeof seg === "number") out += `[${seg}]`;
    else out += out === "" ? String(seg) : `.${String(seg)}`;
  }
  return out;
}
