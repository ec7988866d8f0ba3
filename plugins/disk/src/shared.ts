/**
 * What both entries of the disk plugin share: options, the stats schema and the arithmetic
 * both sides agree on. Imports no file-system code, so the scheduler entry never loads it.
 */
import type { JsonSchema, StatsSchema } from '@ert/plugin-api';

export const PLUGIN_NAME = 'disk';
export const RESOURCE_CLASS = 'DISK_GB';
/** Nova's default `instances_path`, the plugin's default path. */
export const DEFAULT_PATH = '/var/lib/nova/instances';
/** The file of a host profile that stands in for statfs (machine path, read below the root). */
export const PROFILE_STATFS_FILE = '/.ert/statfs.json';

/** One configured instance path. */
export interface DiskPathOptions {
  /** Absolute machine path (read below the tracker's root). */
  path: string;
  /** GB of the path's filesystem kept free for the host (default 0). Paths on one
   *  filesystem add their reservations up. */
  reservedGb: number;
  /** Name of the child provider (`disk_<name>`) when there are several filesystems;
   *  derived from the path when omitted. */
  name?: string;
}

export interface DiskOptions {
  /** Where instances' disks live; default one path, Nova's `/var/lib/nova/instances`. */
  paths: DiskPathOptions[];
  /** DISK_GB allocation ratio (Nova's `disk_allocation_ratio`), default 1.0. */
  allocationRatio: number;
  /** The paths are shared storage whose DISK_GB a sharing provider supplies: report no
   *  DISK_GB inventory, still refuse claims the storage cannot hold now. Default false. */
  shared: boolean;
}

export const optionsSchema: JsonSchema = {
  type: 'object',
  additionalProperties: false,
  properties: {
    paths: {
      type: 'array',
      minItems: 1,
      default: [{ path: DEFAULT_PATH, reservedGb: 0 }],
      items: {
        type: 'object',
        additionalProperties: false,
        required: ['path'],
        properties: {
          path: { type: 'string', pattern: '^/' },
          reservedGb: { type: 'integer', minimum: 0, default: 0 },
          name: { type: 'string', pattern: '^[a-z0-9_]{1,40}$' },
        },
      },
    },
    allocationRatio: { type: 'number', exclusiveMinimum: 0, maximum: 1000, default: 1.0 },
    shared: { type: 'boolean', default: false },
  },
};

/** One configured path as last read. */
export interface DiskPathStats {
  path: string;
  /** The filesystem holding it (`major:minor` of the device, or the profile's `device`). */
  filesystem: string;
  /** Size of the filesystem, GB (GiB, floor). */
  totalGb: number;
  /** Free for unprivileged users (statfs `bavail`), GB (floor), at the last reading. */
  freeGb: number;
  /** This path's `reservedGb` option. */
  reservedGb: number;
}

/** One filesystem, counted once however many paths are on it. */
export interface DiskFilesystemStats {
  filesystem: string;
  /** Child provider key (`disk_<name>`) holding its DISK_GB; null for the host's root provider
   *  (one filesystem) or when shared (a sharing provider holds it). */
  provider: string | null;
  paths: string[];
  totalGb: number;
  freeGb: number;
  /** The reservations of its paths, summed. */
  reservedGb: number;
  /** DISK_GB of the instances in the plugin's view on it. */
  heldGb: number;
  /** DISK_GB of the instances claimed since the last reading (not yet seen by statfs). */
  pendingGb: number;
  /** What a new instance can have now: freeGb - reservedGb - pendingGb, at least 0. */
  availableGb: number;
}

/** Stats v1. */
export interface DiskStatsV1 {
  shared: boolean;
  paths: DiskPathStats[];
  filesystems: DiskFilesystemStats[];
}

const gb = { type: 'integer', minimum: 0 };

export const statsSchema: StatsSchema = {
  version: 1,
  schema: {
    type: 'object',
    additionalProperties: false,
    required: ['shared', 'paths', 'filesystems'],
    properties: {
      shared: { type: 'boolean' },
      paths: {
        type: 'array',
        items: {
          type: 'object',
          additionalProperties: false,
          required: ['path', 'filesystem', 'totalGb', 'freeGb', 'reservedGb'],
          properties: { path: { type: 'string' }, filesystem: { type: 'string' }, totalGb: gb, freeGb: gb, reservedGb: gb },
        },
      },
      filesystems: {
        type: 'array',
        items: {
          type: 'object',
          additionalProperties: false,
          required: ['filesystem', 'provider', 'paths', 'totalGb', 'freeGb', 'reservedGb', 'heldGb', 'pendingGb', 'availableGb'],
          properties: {
            filesystem: { type: 'string' },
            provider: { type: ['string', 'null'] },
            paths: { type: 'array', items: { type: 'string' } },
            totalGb: gb,
            freeGb: gb,
            reservedGb: gb,
            heldGb: gb,
            pendingGb: gb,
            availableGb: gb,
          },
        },
      },
    },
  },
};

/** GB a new instance can have on a filesystem now (never negative). */
export function availableGb(fs: { freeGb: number; reservedGb: number; pendingGb: number }): number {
  return Math.max(0, fs.freeGb - fs.reservedGb - fs.pendingGb);
}

/** The reason a filesystem cannot take `amount` GB now, or undefined when it can. */
export function spaceProblem(fs: { paths: readonly string[]; freeGb: number; reservedGb: number; pendingGb: number }, amount: number): string | undefined {
  const available = availableGb(fs);
  if (amount <= available) return undefined;
  return (
    `${fs.paths.join(', ')}: needs ${amount} GB, ${available} GB free now ` +
    `(statfs ${fs.freeGb} GB free - ${fs.reservedGb} GB reserved - ${fs.pendingGb} GB claimed since the last reading)`
  );
}
