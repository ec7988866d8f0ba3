import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';

/**
 * Reading /proc and /sys under a configurable root. Every path is given as it is on a
 * real machine (`/sys/devices/system/cpu/online`) and read below `root`, so tests run on
 * fixture trees laid out exactly like real machines' files.
 *
 * Missing or unreadable files are not exceptions here: readers return `undefined` and the
 * plugin decides whether that makes it unavailable (and says why).
 */
export class HostFs {
  constructor(readonly root: string = '/') {}

  /** The real location of a machine path under the root. */
  resolve(machinePath: string): string {
    return path.join(this.root, machinePath);
  }

  /** File contents without the trailing newline, or undefined when absent or unreadable. */
  async text(machinePath: string): Promise<string | undefined> {
    try {
      return (await readFile(this.resolve(machinePath), 'utf8')).replace(/\n$/, '');
    } catch {
      return undefined;
    }
  }

  /** A decimal integer file (`42`), or undefined when absent, unreadable or not an integer. */
  async int(machinePath: string): Promise<number | undefined> {
    const raw = await this.text(machinePath);
    if (raw === undefined || !/^\s*-?\d+\s*$/.test(raw)) return undefined;
    return Number.parseInt(raw, 10);
  }

  /** Whitespace-separated words (`performance powersave`), or undefined. */
  async words(machinePath: string): Promise<string[] | undefined> {
    const raw = await this.text(machinePath);
    return raw === undefined ? undefined : raw.split(/\s+/).filter(Boolean);
  }

  /** A CPU list file (`0-3,8,10-11`), or undefined when absent or malformed. */
  async cpuList(machinePath: string): Promise<number[] | undefined> {
    const raw = await this.text(machinePath);
    if (raw === undefined) return undefined;
    try {
      return parseCpuList(raw);
    } catch {
      return undefined;
    }
  }

  /** Entry names of a directory, sorted naturally (`cpu2` before `cpu10`), or undefined. */
  async list(machinePath: string): Promise<string[] | undefined> {
    try {
      const names = await readdir(this.resolve(machinePath));
      return names.sort(naturalCompare);
    } catch {
      return undefined;
    }
  }
}

/** Parse the kernel's CPU list format (`0-3,8,10-11`, empty for none). Throws on malformed input. */
export function parseCpuList(text: string): number[] {
  const trimmed = text.trim();
  if (trimmed === '') return [];
  const cpus: number[] = [];
  for (const part of trimmed.split(',')) {
    const match = /^(\d+)(?:-(\d+))?$/.exec(part.trim());
    if (!match) throw new Error(`malformed CPU list "${text}" at "${part}"`);
    const first = Number(match[1]);
    const last = match[2] === undefined ? first : Number(match[2]);
    if (last < first) throw new Error(`malformed CPU list "${text}": range ${part} runs backwards`);
    for (let cpu = first; cpu <= last; cpu++) cpus.push(cpu);
  }
  return cpus;
}

/** Format CPUs in the kernel's list format, collapsing runs (`0-3,8`). */
export function formatCpuList(cpus: Iterable<number>): string {
  const sorted = [...new Set(cpus)].sort((a, b) => a - b);
  const parts: string[] = [];
  for (let i = 0; i < sorted.length; ) {
    let j = i;
    while (j + 1 < sorted.length && sorted[j + 1] === sorted[j]! + 1) j++;
    parts.push(i === j ? `${sorted[i]}` : `${sorted[i]}-${sorted[j]}`);
    i = j + 1;
  }
  return parts.join(',');
}

/** Compare names with embedded numbers numerically (`cpu2` < `cpu10`). */
export function naturalCompare(a: string, b: string): number {
  return a.localeCompare(b, 'en', { numeric: true });
}
