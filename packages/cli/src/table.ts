/** One column of a table: which field to show, its header, and how to align it. */
export interface Column<Row> {
  header: string;
  value: (row: Row) => unknown;
  /** Numbers align right by default, everything else left. */
  align?: 'left' | 'right';
}

/** How a cell is printed: numbers with at most 3 decimals, nothing for null/undefined. */
export function formatCell(value: unknown): string {
  if (value === undefined || value === null) return '';
  if (typeof value === 'number') return Number.isInteger(value) ? String(value) : String(Math.round(value * 1000) / 1000);
  if (Array.isArray(value)) return value.map(formatCell).join(',');
  if (typeof value === 'object') return JSON.stringify(value);
  return String(value);
}

/**
 * Render rows as an aligned text table: a header line, then one line per row, columns
 * separated by two spaces, trailing spaces trimmed. An empty `rows` renders the header only.
 */
export function formatTable<Row>(rows: readonly Row[], columns: readonly Column<Row>[]): string {
  const cells = rows.map((row) => columns.map((col) => col.value(row)));
  const text = cells.map((line) => line.map(formatCell));
  const widths = columns.map((col, i) => Math.max(col.header.length, ...text.map((line) => line[i]!.length)));
  const alignOf = (i: number): 'left' | 'right' => {
    const explicit = columns[i]!.align;
    if (explicit) return explicit;
    return cells.length > 0 && cells.every((line) => typeof line[i] === 'number') ? 'right' : 'left';
  };
  const render = (line: string[]): string =>
    line
      .map((cell, i) => (alignOf(i) === 'right' ? cell.padStart(widths[i]!) : cell.padEnd(widths[i]!)))
      .join('  ')
      .trimEnd();
  return [render(columns.map((c) => c.header)), ...text.map(render)].join('\n') + '\n';
}
