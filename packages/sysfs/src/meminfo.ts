import type { HostFs } from './fs.js';
import { found, unreadable, type Reading } from './reading.js';

export const MEMINFO_PATH = '/proc/meminfo';

/**
 * /proc/meminfo (or a NUMA node's meminfo) as numbers by key: `kB` values in kB
 * (`MemTotal`), counts as written (`HugePages_Total`).
 */
export type MemInfo = Readonly<Record<string, number>>;

/**
 * Parse meminfo text. `linePrefix` matches the `Node 0 ` prefix of a node's meminfo.
 * Returns the problem as a string when a line is not `Key: number [kB]` or `MemTotal` is
 * absent.
 */
export function parseMemInfo(text: string, linePrefix = ''): MemInfo | string {
  const values: Record<string, number> = {};
  for (const line of text.split('\n')) {
    if (line.trim() === '') continue;
    if (!line.startsWith(linePrefix)) return `line "${line.slice(0, 60)}" does not start with "${linePrefix}"`;
    const match = /^([A-Za-z0-9_()]+):\s+(\d+)(?:\s+kB)?\s*$/.exec(line.slice(linePrefix.length));
    if (!match) return `line "${line.slice(0, 60)}" is not "Key: number [kB]"`;
    values[match[1]!] = Number(match[2]);
  }
  if (values.MemTotal === undefined) return 'no MemTotal line';
  return values;
}

/** Read and parse /proc/meminfo below the root. */
export async function readMemInfo(fs: HostFs): Promise<Reading<MemInfo>> {
  return readMemInfoFile(fs, MEMINFO_PATH, '');
}

/** Read and parse a meminfo-format file at `machinePath`; `linePrefix` as in `parseMemInfo`. */
export async function readMemInfoFile(fs: HostFs, machinePath: string, linePrefix: string): Promise<Reading<MemInfo>> {
  const text = await fs.text(machinePath);
  if (text === undefined) return unreadable(machinePath, 'missing or unreadable');
  const parsed = parseMemInfo(text, linePrefix);
  return typeof parsed === 'string' ? unreadable(machinePath, parsed) : found(parsed);
}
