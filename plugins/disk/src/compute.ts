/**
 * disk, compute side: DISK_GB from statfs of the configured instance paths, each
 * filesystem counted once (on the host's root provider when there is one, as child
 * providers `disk_<name>` when there are several, nowhere in `shared` mode), and a `test`
 * that refuses a claim the filesystem cannot hold now.
 */
import path from 'node:path';
import { amountProblem, definePlugin, normalizeInventory, requestedAmount, type ClaimedInstance, type Discovery, type Inventory, type TestResult } from '@ert/plugin-api';
import { DiskError, DiskErrorCodes } from './errors.js';
import { PLUGIN_NAME, RESOURCE_CLASS, availableGb, spaceProblem, statsSchema, optionsSchema, type DiskOptions, type DiskPathStats, type DiskStatsV1 } from './shared.js';
import { reader, toGb } from './statfs.js';

/** One filesystem as the last discovery read it. */
interface Filesystem {
  filesystem: string;
  /** Child provider key; undefined: the host's root (one filesystem) or shared. */
  key: string | undefined;
  paths: string[];
  totalGb: number;
  freeGb: number;
  reservedGb: number;
  /** Undefined in shared mode (no inventory reported). */
  inventory: Inventory | undefined;
}
type View = { available: true; filesystems: Filesystem[]; paths: DiskPathStats[] } | { available: false; reason: string };
interface Held {
  filesystem: string;
  gb: number;
}

/** `/var/lib/nova/instances` -> `var_lib_nova_instances`, `/` -> `root`. */
export function nameOf(machinePath: string): string {
  const name = machinePath.toLowerCase().replace(/[^a-z0-9]+/g, '_').replace(/^_+|_+$/g, '').slice(0, 40);
  return name === '' ? 'root' : name;
}

const normalize = (p: string) => path.posix.normalize(p).replace(/(.)\/$/, '$1');

export default definePlugin<DiskOptions, DiskStatsV1>({
  name: PLUGIN_NAME,
  optionsSchema,
  stats: statsSchema,
  // Nova's disk_allocation_ratio / initial_disk_allocation_ratio (docs/ownership.md); written
  // `paths` set DISK_GB's reserved (their reservedGb, 0 when not given).
  inventoryFields: { fromOptions: { allocationRatio: { [RESOURCE_CLASS]: ['allocationRatio'] }, paths: { [RESOURCE_CLASS]: ['reserved'] } } },
  resource(ctx) {
    let view: View = { available: false, reason: 'the host has not been discovered yet' };
    const instances = new Map<string, Held>();
    /** Instances added by claims since the last reading: statfs has not seen their disks. */
    const pending = new Set<string>();
    /** After `reset`, until the next `test`: the tracker is re-adding live instances. */
    let rebuilding = false;

    const sum = (filesystem: string, only?: ReadonlySet<string>) => {
      let gb = 0;
      for (const [uuid, held] of instances) if (held.filesystem === filesystem && (only === undefined || only.has(uuid))) gb += held.gb;
      return gb;
    };
    const pendingGb = (fs: Filesystem) => sum(fs.filesystem, pending);

    async function read(): Promise<View> {
      const open = await reader(ctx.root);
      if (!open.ok) return { available: false, reason: open.problem };
      const filesystems: Filesystem[] = [];
      const paths: DiskPathStats[] = [];
      for (const option of ctx.options.paths) {
        const machinePath = normalize(option.path);
        const reading = await open.value(machinePath);
        if (!reading.ok) return { available: false, reason: reading.problem };
        const { filesystem, blocks, bavail, blockSize } = reading.value;
        const totalGb = toGb(blocks, blockSize);
        const freeGb = toGb(bavail, blockSize);
        if (totalGb < 1) return { available: false, reason: `${machinePath}: its filesystem ${filesystem} holds less than 1 GB` };
        paths.push({ path: machinePath, filesystem, totalGb, freeGb, reservedGb: option.reservedGb });
        const known = filesystems.find((f) => f.filesystem === filesystem);
        if (known) {
          known.paths.push(machinePath);
          known.reservedGb += option.reservedGb;
        } else {
          filesystems.push({ filesystem, key: option.name ?? nameOf(machinePath), paths: [machinePath], totalGb, freeGb, reservedGb: option.reservedGb, inventory: undefined });
        }
      }
      const keys = new Set<string>();
      for (const fs of filesystems) {
        if (fs.reservedGb > fs.totalGb) {
          return { available: false, reason: `${fs.paths.join(', ')}: reservedGb ${fs.reservedGb} exceeds the ${fs.totalGb} GB of filesystem ${fs.filesystem}` };
        }
        if (!ctx.options.shared) fs.inventory = normalizeInventory({ total: fs.totalGb, reserved: fs.reservedGb, allocationRatio: ctx.options.allocationRatio });
        // One filesystem (or shared storage): no child provider.
        if (filesystems.length === 1 || ctx.options.shared) {
          fs.key = undefined;
          continue;
        }
        let key = `disk_${fs.key}`;
        for (let n = 2; keys.has(key); n++) key = `disk_${fs.key}_${n}`;
        keys.add(key);
        fs.key = key;
      }
      return { available: true, filesystems, paths };
    }

    /** The filesystem an instance's DISK_GB is on: by its allocation's provider, else the first. */
    function filesystemOf(instance: ClaimedInstance, filesystems: readonly Filesystem[]): string | undefined {
      for (const a of instance.allocations) {
        if (a.resourceClass !== RESOURCE_CLASS) continue;
        const fs = filesystems.find((f) => f.key !== undefined && a.providerName === `${ctx.hostName}_${f.key}`);
        if (fs) return fs.filesystem;
      }
      return filesystems[0]?.filesystem;
    }

    /** Why `fs` cannot take `amount` GB (inventory beside the view, then free space now). */
    function problemOn(fs: Filesystem, amount: number): string | undefined {
      if (fs.inventory) {
        const problem = amountProblem(fs.inventory, sum(fs.filesystem), amount);
        if (problem) return `${RESOURCE_CLASS} on ${fs.paths.join(', ')}: ${problem}`;
      }
      return spaceProblem({ paths: fs.paths, freeGb: fs.freeGb, reservedGb: fs.reservedGb, pendingGb: pendingGb(fs) }, amount);
    }

    return {
      async discover(): Promise<Discovery> {
        try {
          view = await read();
        } catch (err) {
          view = { available: false, reason: `cannot read the instance paths: ${(err as Error).message}` };
        }
        pending.clear();
        if (!view.available) {
          ctx.logger.warn({ reason: view.reason }, 'disk unavailable');
          return { available: false, reason: view.reason };
        }
        if (ctx.options.shared) return { available: true };
        const [first] = view.filesystems;
        if (view.filesystems.length === 1 && first?.inventory) return { available: true, host: { inventories: { [RESOURCE_CLASS]: { ...first.inventory } } } };
        return {
          available: true,
          children: view.filesystems.map((fs) => ({ key: fs.key!, inventories: { [RESOURCE_CLASS]: { ...fs.inventory! } } })),
        };
      },

      reset() {
        instances.clear();
        rebuilding = true;
      },

      test(request): TestResult {
        rebuilding = false;
        const amount = requestedAmount(request.spec, RESOURCE_CLASS);
        if (amount === 0) return undefined;
        if (!view.available) return `disk is unavailable on this host: ${view.reason}`;
        const problems: string[] = [];
        for (const fs of view.filesystems) {
          const problem = problemOn(fs, amount);
          if (problem === undefined) {
            // Several filesystems: place DISK_GB on the first that can hold it.
            return fs.key === undefined ? undefined : { allocations: [{ provider: fs.key, resourceClass: RESOURCE_CLASS, amount }] };
          }
          problems.push(problem);
          if (fs.key === undefined) break; // one filesystem (or shared): nothing else to try
        }
        return problems.join('; ');
      },

      addInstance(instance: ClaimedInstance) {
        if (!view.available) return;
        const allocated = instance.allocations.filter((a) => a.resourceClass === RESOURCE_CLASS).reduce((n, a) => n + a.amount, 0);
        const gb = instance.allocations.length > 0 ? allocated : requestedAmount(instance.spec, RESOURCE_CLASS);
        const filesystem = filesystemOf(instance, view.filesystems);
        if (filesystem === undefined || gb === 0) return;
        instances.set(instance.uuid, { filesystem, gb });
        if (!rebuilding) pending.add(instance.uuid);
      },

      removeInstance(uuid) {
        instances.delete(uuid);
        pending.delete(uuid);
      },

      stats(): DiskStatsV1 {
        if (!view.available) {
          throw new DiskError(DiskErrorCodes.unavailable, `plugin ${ctx.name} has no stats: ${view.reason}`, { plugin: ctx.name, reason: view.reason });
        }
        return {
          shared: ctx.options.shared,
          paths: view.paths.map((p) => ({ ...p })),
          filesystems: view.filesystems.map((fs) => {
            const waiting = pendingGb(fs);
            return {
              filesystem: fs.filesystem,
              provider: fs.key ?? null,
              paths: [...fs.paths],
              totalGb: fs.totalGb,
              freeGb: fs.freeGb,
              reservedGb: fs.reservedGb,
              heldGb: sum(fs.filesystem),
              pendingGb: waiting,
              availableGb: availableGb({ freeGb: fs.freeGb, reservedGb: fs.reservedGb, pendingGb: waiting }),
            };
          }),
        };
      },
    };
  },
});
