/**
 * Reading the filesystem of a path below the tracker's root: the host profile's stand-in
 * file (`<root>/.ert/statfs.json`) when there is one, else Node's `statfs` and `stat`.
 * Never throws: a failure is `{ ok: false, problem }` naming the path or file.
 */
import { readFile, stat, statfs } from 'node:fs/promises';
import path from 'node:path';
import { PROFILE_STATFS_FILE } from './shared.js';

/** One filesystem as statfs describes it (counts in blocks of `blockSize` bytes). */
export interface FsReading {
  /** Identity of the filesystem: `major:minor` of its device, or the profile's `device`. */
  filesystem: string;
  blockSize: bigint;
  blocks: bigint;
  bfree: bigint;
  bavail: bigint;
}

export type Outcome<T> = { ok: true; value: T } | { ok: false; problem: string };

/** One entry of a profile's statfs file. */
interface ProfileFilesystem extends FsReading {
  mountPoint: string;
}

const GIB = 1024n * 1024n * 1024n;

/** floor(blocks x blockSize / GiB). */
export function toGb(blocks: bigint, blockSize: bigint): number {
  return Number((blocks * blockSize) / GIB);
}

/** Linux's dev_t: major = bits 8-19 and 32-63, minor = bits 0-7 and 20-31 (`new_decode_dev`). */
export function formatDevice(dev: bigint): string {
  const major = ((dev >> 8n) & 0xfffn) | ((dev >> 32n) & ~0xfffn);
  const minor = (dev & 0xffn) | ((dev >> 12n) & ~0xffn);
  return `${major}:${minor}`;
}

function isCount(value: unknown): value is number {
  return typeof value === 'number' && Number.isSafeInteger(value) && value >= 0;
}

/** Parse and check a profile's statfs file; `file` names it in problems. */
export function parseProfile(text: string, file: string): Outcome<ProfileFilesystem[]> {
  let data: unknown;
  try {
    data = JSON.parse(text);
  } catch (err) {
    return { ok: false, problem: `${file}: not JSON (${(err as Error).message})` };
  }
  const list = (data as { filesystems?: unknown } | null)?.filesystems;
  if (typeof data !== 'object' || data === null || !Array.isArray(list) || list.length === 0) {
    return { ok: false, problem: `${file}: expected { "filesystems": [ ... ] } with at least one filesystem` };
  }
  const out: ProfileFilesystem[] = [];
  for (const [i, entry] of list.entries()) {
    const at = `${file}: filesystems[${i}]`;
    if (typeof entry !== 'object' || entry === null) return { ok: false, problem: `${at} is not an object` };
    const e = entry as Record<string, unknown>;
    if (typeof e['mountPoint'] !== 'string' || !e['mountPoint'].startsWith('/')) return { ok: false, problem: `${at}.mountPoint must be an absolute path` };
    for (const key of ['blockSize', 'blocks', 'bfree', 'bavail']) {
      if (!isCount(e[key])) return { ok: false, problem: `${at}.${key} must be a non-negative integer, got ${JSON.stringify(e[key])}` };
    }
    const [blockSize, blocks, bfree, bavail] = (['blockSize', 'blocks', 'bfree', 'bavail'] as const).map((k) => BigInt(e[k] as number)) as [bigint, bigint, bigint, bigint];
    if (blockSize < 1n) return { ok: false, problem: `${at}.blockSize must be at least 1` };
    if (bavail > bfree || bfree > blocks) return { ok: false, problem: `${at}: expected bavail <= bfree <= blocks, got ${bavail}, ${bfree}, ${blocks}` };
    if (e['device'] !== undefined && typeof e['device'] !== 'string') return { ok: false, problem: `${at}.device must be a string` };
    const mountPoint = path.posix.normalize(e['mountPoint']).replace(/(.)\/$/, '$1');
    out.push({ mountPoint, filesystem: (e['device'] as string | undefined) ?? `mount ${mountPoint}`, blockSize, blocks, bfree, bavail });
  }
  return { ok: true, value: out };
}

/** The profile's filesystem holding `machinePath`: the longest mount point above it. */
export function profileFilesystemOf(filesystems: readonly ProfileFilesystem[], machinePath: string): ProfileFilesystem | undefined {
  let best: ProfileFilesystem | undefined;
  for (const fs of filesystems) {
    const inside = fs.mountPoint === '/' || machinePath === fs.mountPoint || machinePath.startsWith(`${fs.mountPoint}/`);
    if (inside && (best === undefined || fs.mountPoint.length > best.mountPoint.length)) best = fs;
  }
  return best;
}

/**
 * A reader of the filesystems of machine paths below `root`. The profile file is read once
 * per `reader` call (each discovery), so one discovery sees one consistent description.
 */
export async function reader(root: string): Promise<Outcome<(machinePath: string) => Promise<Outcome<FsReading>>>> {
  const file = path.join(root, PROFILE_STATFS_FILE);
  let text: string | undefined;
  try {
    text = await readFile(file, 'utf8');
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code !== 'ENOENT' && code !== 'ENOTDIR') return { ok: false, problem: `${PROFILE_STATFS_FILE}: unreadable (${code ?? (err as Error).message})` };
  }
  if (text !== undefined) {
    const profile = parseProfile(text, PROFILE_STATFS_FILE);
    if (!profile.ok) return profile;
    return {
      ok: true,
      value: async (machinePath) => {
        const fs = profileFilesystemOf(profile.value, machinePath);
        return fs ? { ok: true, value: fs } : { ok: false, problem: `${machinePath}: no filesystem of ${PROFILE_STATFS_FILE} holds it` };
      },
    };
  }
  return {
    ok: true,
    value: async (machinePath) => {
      const real = path.join(root, machinePath);
      try {
        const [sizes, status] = await Promise.all([statfs(real, { bigint: true }), stat(real, { bigint: true })]);
        return { ok: true, value: { filesystem: formatDevice(status.dev), blockSize: sizes.bsize, blocks: sizes.blocks, bfree: sizes.bfree, bavail: sizes.bavail } };
      } catch (err) {
        const code = (err as NodeJS.ErrnoException).code;
        return { ok: false, problem: `${machinePath}: statfs failed (${code ?? (err as Error).message})` };
      }
    },
  };
}
