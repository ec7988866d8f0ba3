import type { HostFs } from './fs.js';
import { found, unreadable, type Reading } from './reading.js';

export const CPUINFO_PATH = '/proc/cpuinfo';

/** One `processor` record of /proc/cpuinfo (x86 field names). Absent fields are undefined. */
export interface CpuInfoProcessor {
  processor: number;
  vendorId?: string;
  family?: number;
  model?: number;
  modelName?: string;
  /** The `flags` words, in file order; empty when the record has none. */
  flags: string[];
  physicalId?: number;
  coreId?: number;
  /** Every field of the record as written, for anything not promoted above. */
  fields: Readonly<Record<string, string>>;
}

/**
 * Parse the text of /proc/cpuinfo: records separated by blank lines, lines `key\t: value`.
 * Returns the problem as a string when the text is not cpuinfo (a line without a colon, a
 * record without a numeric `processor`, no records at all).
 */
export function parseCpuInfo(text: string): CpuInfoProcessor[] | string {
  const processors: CpuInfoProcessor[] = [];
  const blocks = text.split(/\n\s*\n/).filter((block) => block.trim() !== '');
  for (const [index, block] of blocks.entries()) {
    const fields: Record<string, string> = {};
    for (const line of block.split('\n')) {
      if (line.trim() === '') continue;
      const colon = line.indexOf(':');
      if (colon < 0) return `record ${index + 1}: line "${line.slice(0, 60)}" has no "key: value" form`;
      fields[line.slice(0, colon).trim()] = line.slice(colon + 1).trim();
    }
    const processor = integerField(fields.processor);
    if (processor === undefined) return `record ${index + 1} has no numeric "processor" field`;
    processors.push({
      processor,
      vendorId: fields.vendor_id,
      family: integerField(fields['cpu family']),
      model: integerField(fields.model),
      modelName: fields['model name'],
      flags: (fields.flags ?? '').split(/\s+/).filter(Boolean),
      physicalId: integerField(fields['physical id']),
      coreId: integerField(fields['core id']),
      fields,
    });
  }
  if (processors.length === 0) return 'no processor records';
  return processors;
}

/** Read and parse /proc/cpuinfo below the root. */
export async function readCpuInfo(fs: HostFs): Promise<Reading<CpuInfoProcessor[]>> {
  const text = await fs.text(CPUINFO_PATH);
  if (text === undefined) return unreadable(CPUINFO_PATH, 'missing or unreadable');
  const parsed = parseCpuInfo(text);
  return typeof parsed === 'string' ? unreadable(CPUINFO_PATH, parsed) : found(parsed);
}

/** The flags every processor has (a flag missing on one CPU cannot be promised to a guest). */
export function commonFlags(processors: readonly CpuInfoProcessor[]): string[] {
  const [first, ...rest] = processors;
  if (!first) return [];
  const sets = rest.map((p) => new Set(p.flags));
  return first.flags.filter((flag) => sets.every((set) => set.has(flag)));
}

function integerField(value: string | undefined): number | undefined {
  return value !== undefined && /^\d+$/.test(value) ? Number(value) : undefined;
}
