/**
 * A plain-text table: one header row, columns padded to their widest cell, two spaces apart.
 * Cells are flattened to one line so a value cannot break the layout.
 */
export function table(headers: readonly string[], rows: readonly (readonly unknown[])[]): string {
  const cell = (v: unknown) => (v === null || v === undefined ? "-" : Array.isArray(v) ? v.join(",") : String(v)).replace(/\s+/g, " ");
  const cells = [headers.map(cell), ...rows.map((r) => r.map(cell))];
  const widths = headers.map((_, i) => Math.max(...cells.map((r) => (r[i] ?? "").length)));
  return cells.map((r) => r.map((c, i) => (i === r.length - 1 ? c : c.padEnd(widths[i]!))).join("  ").trimEnd()).join("\n");
}

/** Key/value pairs as a two-column table without a header. */
export function pairs(entries: readonly (readonly [string, unknown])[]): string {
  const width = Math.max(0, ...entries.map(([k]) => k.length));
  return entries.map(([k, v]) => `${k.padEnd(width)}  ${v === null || v === undefined ? "-" : typeof v === "object" ? JSON.stringify(v) : String(v)}`).join("\n");
}
