/** Cells of a markdown table row; `\|` inside a cell is text, not a separator. */
export function tableCells(line: string): string[] {
  return line
    .trim()
    .replace(/^\||\|$/g, "")
    .split(/(?<!\\)\|/)
    .map((c) => c.trim());
}
