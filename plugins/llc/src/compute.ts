/**
 * Compute entry of the llc plugin: discovers the last-level cache and resctrl's cache
 * allocation, offers CUSTOM_LLC_WAYS on one nested provider per cache domain, grants
 * contiguous way masks with a class of service, and (with enforcement) programs resctrl.
 */
import { mkdir, rm, rmdir, writeFile } from 'node:fs/promises';
import {
  definePlugin,
  type ClaimedInstance,
  type ClaimGrant,
  type ClaimRequest,
  type Discovery,
  type InstanceEvent,
  type ResourceContext,
  type ResourceHooks,
  type TestResult,
} from '@ert/plugin-api';
import { HostFs } from '@ert/sysfs';
import { LlcEnforcementError } from './errors.js';
import { RESCTRL_DIR, domainCpus, readLastLevelCache, readResctrl, type LastLevelCache, type ResctrlL3 } from './hardware.js';
import {
  GROUP_PREFIX,
  LLC_WAYS,
  PLUGIN_NAME,
  TRAIT_CAT,
  TRAIT_CDP,
  domainKey,
  domainOfProvider,
  extraSpecs,
  optionsSchema,
  requestedWays,
  statsSchema,
  type LlcOptions,
  type LlcStats,
  type WayAssignment,
} from './shared.js';
import { bitCount, chooseWays, formatMask, largestRun, parseMask, runMask, type WayView } from './ways.js';

/** What the last discovery found. */
interface HardwareView {
  cache?: LastLevelCache;
  resctrl?: ResctrlL3;
  /** Set when no capacity is offered. */
  reason?: string;
  /** Ways of each domain kept for the host. */
  reservedMask: number;
}

interface HeldWays {
  domain: number;
  mask: number;
  closid: number;
}

function resource(ctx: ResourceContext<LlcOptions>): ResourceHooks<LlcStats> {
  const fs = new HostFs(ctx.root);
  const reservedWays = ctx.options.reservedWays ?? 0;
  let hw: HardwareView = { reason: 'not discovered yet', reservedMask: 0 };
  const held = new Map<string, HeldWays>();

  /** Ways of a domain no instance (other than `except`) holds and the host does not keep. */
  function freeMask(domain: number, except?: string): number {
    let free = (hw.resctrl!.cbmMask & ~hw.reservedMask) >>> 0;
    for (const [uuid, ways] of held) if (ways.domain === domain && uuid !== except) free = (free & ~ways.mask) >>> 0;
    return free;
  }

  function freeClosids(except?: string): number {
    const ours = [...held.keys()].filter((uuid) => uuid !== except).length;
    return hw.resctrl!.numClosids - 1 - hw.resctrl!.foreignGroups.length - ours;
  }

  function wayView(except?: string, onlyDomain?: number): WayView {
    const ids = hw.resctrl!.domainIds.filter((id) => onlyDomain === undefined || id === onlyDomain);
    return {
      minCbmBits: hw.resctrl!.minCbmBits,
      freeClosids: freeClosids(except),
      domains: ids.map((id) => ({ id, free: freeMask(id, except) })),
    };
  }

  /** The lowest class-of-service slot no other instance uses. */
  function freeSlot(except?: string): number {
    const used = new Set([...held].filter(([uuid]) => uuid !== except).map(([, w]) => w.closid));
    let slot = 1;
    while (used.has(slot)) slot++;
    return slot;
  }

  /** The reason last logged for offering no cache allocation (undefined: none logged, or offered). */
  let loggedReason: string | undefined;

  async function discover(): Promise<Discovery> {
    const cache = await readLastLevelCache(fs);
    const resctrl = await readResctrl(fs);
    hw = { cache: cache.value, resctrl: resctrl.value, reservedMask: 0 };
    if (cache.problem !== undefined) hw.reason = cache.problem;
    else if (resctrl.problem !== undefined) hw.reason = `no cache allocation: ${resctrl.problem}`;
    else {
      const { cbmMask, domainIds } = resctrl.value;
      const cacheIds = cache.value.domains.map((d) => d.id);
      const unknown = domainIds.filter((id) => !cacheIds.includes(id));
      const lowest = runsLow(cbmMask);
      if (unknown.length > 0) hw.reason = `${RESCTRL_DIR}/schemata names L3 domains ${unknown.join(',')} that no cache/index*/id describes`;
      else if (reservedWays >= bitCount(cbmMask)) hw.reason = `reservedWays ${reservedWays} leaves none of the ${bitCount(cbmMask)} ways of cbm_mask ${formatMask(cbmMask)}`;
      else hw.reservedMask = runMask(lowest, reservedWays);
    }
    if (hw.reason !== loggedReason) {
      // Once per change, not once per periodic update.
      if (hw.reason !== undefined) ctx.logger.info({ reason: hw.reason }, 'llc: no cache allocation offered');
      else if (loggedReason !== undefined) ctx.logger.info('llc: cache allocation offered');
      loggedReason = hw.reason;
    }
    if (hw.reason !== undefined) {
      // A host without CAT still has a cache: staying available (with no capacity) is what
      // gets the stats, its geometry and the reason, recorded. A broken file makes it unavailable.
      const withoutCat = cache.problem === undefined && resctrl.problem !== undefined && resctrl.absent === true;
      return { available: withoutCat, reason: hw.reason };
    }
    const r = hw.resctrl!;
    const usable = bitCount(r.cbmMask);
    const traits = r.cdp ? [TRAIT_CAT, TRAIT_CDP] : [TRAIT_CAT];
    return {
      available: true,
      host: { traits },
      children: r.domainIds.map((id) => ({
        key: domainKey(id),
        inventories: {
          [LLC_WAYS]: { total: usable, reserved: reservedWays, minUnit: r.minCbmBits, maxUnit: usable - reservedWays },
        },
        traits,
      })),
    };
  }

  function test(request: ClaimRequest): TestResult {
    const ways = requestedWays(request.spec);
    if (typeof ways === 'string') return ways;
    if (ways === 0) return undefined;
    if (hw.reason !== undefined) return `cannot grant ${ways} cache ways: ${hw.reason}`;
    // Every mask and class of service in the view is held, a resize's old ones included (the
    // tracker holds them under the migration uuid until the resize is confirmed or reverted):
    // the new ways are disjoint from them and the new flavor gets a class of service of its own.
    const choice = chooseWays(wayView(), ways);
    if (typeof choice === 'string') return choice;
    const closid = freeSlot();
    const assignment: WayAssignment = { domain: choice.domain, mask: formatMask(choice.mask), closid };
    const grant: ClaimGrant = {
      allocations: [{ provider: domainKey(choice.domain), resourceClass: LLC_WAYS, amount: ways }],
      assignment: { ...assignment },
      // The ways and the class of service are the instance's alone: the store refuses them to a
      // second instance of the host even if another tracker's view offered them too.
      units: [...wayBits(choice.mask).map((bit) => `L3-${choice.domain}/way/${bit}`), `clos/${closid}`],
    };
    return grant;
  }

  function addInstance(instance: ClaimedInstance): void {
    const recorded = assignmentOf(instance);
    if (recorded) {
      held.set(instance.uuid, recorded);
      return;
    }
    // No assignment (e.g. claimed before this plugin ran): place the allocated ways on
    // their domain as a claim would, so the view still counts them.
    const allocation = instance.allocations.find((a) => a.resourceClass === LLC_WAYS);
    const domain = allocation ? domainOfProvider(allocation.providerName) : undefined;
    if (!allocation || domain === undefined || hw.reason !== undefined) return;
    const choice = chooseWays(wayView(instance.uuid, domain), allocation.amount);
    if (typeof choice === 'string') {
      ctx.logger.warn({ instance: instance.uuid, reason: choice }, 'llc: cannot place the ways of an instance without assignment');
      return;
    }
    held.set(instance.uuid, { domain, mask: choice.mask, closid: freeSlot(instance.uuid) });
  }

  function stats(): LlcStats {
    const cache = hw.cache
      ? {
          level: hw.cache.level,
          sizeKiB: hw.cache.sizeKiB,
          ways: hw.cache.ways,
          domains: hw.cache.domains.map((d) => ({ id: d.id, cpus: domainCpus(d) })),
        }
      : null;
    if (hw.reason !== undefined || !hw.resctrl) {
      return { available: false, reason: hw.reason ?? 'not discovered yet', cache, resctrl: null, domains: [] };
    }
    const r = hw.resctrl;
    return {
      available: true,
      cache,
      resctrl: {
        cdp: r.cdp,
        cbmMask: formatMask(r.cbmMask),
        numClosids: r.numClosids,
        minCbmBits: r.minCbmBits,
        shareableBits: formatMask(r.shareableBits),
        foreignGroups: r.foreignGroups.length,
        freeClosids: Math.max(freeClosids(), 0),
      },
      domains: r.domainIds.map((id) => {
        const free = freeMask(id);
        return {
          id,
          key: domainKey(id),
          cbmMask: formatMask(r.cbmMask),
          ways: bitCount(r.cbmMask) - reservedWays,
          reservedMask: formatMask(hw.reservedMask),
          freeMask: formatMask(free),
          largestFreeRun: largestRun(free),
          // Lowest ways first (masks of one domain are disjoint): the same view gives the same
          // stats whatever order the instances were added in (a restart, a refused resize).
          instances: [...held]
            .filter(([, w]) => w.domain === id)
            .sort(([, a], [, b]) => a.mask - b.mask)
            .map(([uuid, w]) => ({ uuid, mask: formatMask(w.mask), closid: w.closid })),
        };
      }),
    };
  }

  async function enforce(event: InstanceEvent): Promise<void> {
    // The tracker calls this only with enforcement on; checking again keeps a host that
    // did not opt in from ever being written to, whoever calls.
    if (!ctx.enforce) return;
    const uuid = event.instance.uuid;
    const group = `${RESCTRL_DIR}/${GROUP_PREFIX}${uuid}`;
    const ways = assignmentOf(event.instance);
    if (event.type === 'released' || !ways) {
      await removeGroup(group, uuid);
      return;
    }
    if (!hw.resctrl) throw new LlcEnforcementError(`llc: cannot program ${group}: ${hw.reason ?? 'resctrl not discovered'}`, { file: group, instance: uuid });
    await attempt(group, uuid, () => mkdir(fs.resolve(group), { recursive: true }));
    const schemata = schemataFor(hw.resctrl, ways);
    await attempt(`${group}/schemata`, uuid, () => writeFile(fs.resolve(`${group}/schemata`), schemata));
    const cpus = event.instance.cpus;
    if (cpus && cpus.length > 0) {
      await attempt(`${group}/cpus_list`, uuid, () => writeFile(fs.resolve(`${group}/cpus_list`), `${[...cpus].sort((a, b) => a - b).join(',')}\n`));
    }
    ctx.logger.info({ instance: uuid, domain: ways.domain, mask: formatMask(ways.mask) }, 'llc: resctrl group programmed');
  }

  async function removeGroup(group: string, uuid: string): Promise<void> {
    const dir = fs.resolve(group);
    try {
      await rmdir(dir); // resctrl removes a group's files itself on rmdir
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (code === 'ENOENT') return;
      // A plain directory (not resctrl) keeps the files ert wrote: remove them too.
      if (code === 'ENOTEMPTY') return attempt(group, uuid, () => rm(dir, { recursive: true }));
      throw new LlcEnforcementError(`llc: cannot remove ${group}: ${(err as Error).message}`, { file: group, instance: uuid }, err);
    }
  }

  /** Run a write; on failure, raise an error naming the file and resctrl's last_cmd_status. */
  async function attempt(file: string, uuid: string, write: () => Promise<unknown>): Promise<void> {
    try {
      await write();
    } catch (err) {
      const lastCmdStatus = await fs.text(`${RESCTRL_DIR}/info/last_cmd_status`);
      const status = lastCmdStatus === undefined ? '' : ` (last_cmd_status: ${lastCmdStatus})`;
      throw new LlcEnforcementError(`llc: writing ${file} failed: ${(err as Error).message}${status}`, { file, instance: uuid, lastCmdStatus }, err);
    }
  }

  return {
    discover,
    reset: () => held.clear(),
    test,
    addInstance,
    removeInstance: (uuid) => void held.delete(uuid),
    stats,
    enforce,
  };
}

/** The lowest set bit of a mask (cbm_mask starts at way 0 on every CPU known, but need not). */
function runsLow(mask: number): number {
  let bit = 0;
  while (bit < 32 && ((mask >>> bit) & 1) === 0) bit++;
  return bit;
}

/** The way numbers (bit positions) set in a capacity bitmask, lowest first. */
function wayBits(mask: number): number[] {
  const bits: number[] = [];
  for (let bit = 0; bit < 32; bit++) if ((mask >>> bit) & 1) bits.push(bit);
  return bits;
}

/** An instance's ways from its assignment, or undefined when it has none (or it is malformed). */
function assignmentOf(instance: ClaimedInstance): HeldWays | undefined {
  const a = instance.assignment as Partial<WayAssignment> | null | undefined;
  if (!a || typeof a !== 'object' || typeof a.mask !== 'string') return undefined;
  const mask = parseMask(a.mask);
  if (mask === undefined || !Number.isSafeInteger(a.domain) || !Number.isSafeInteger(a.closid)) return undefined;
  return { domain: a.domain!, mask, closid: a.closid! };
}

/** The schemata of an instance's group: its mask on its domain, the full mask elsewhere. */
export function schemataFor(resctrl: ResctrlL3, ways: { domain: number; mask: number }): string {
  const masks = resctrl.domainIds.map((id) => `${id}=${formatMask(id === ways.domain ? ways.mask : resctrl.cbmMask)}`).join(';');
  const resources = resctrl.cdp ? ['L3CODE', 'L3DATA'] : ['L3'];
  return resources.map((name) => `${name}:${masks}\n`).join('');
}

/** The llc plugin's compute entry. */
export default definePlugin<LlcOptions, LlcStats>({
  name: PLUGIN_NAME,
  optionsSchema,
  stats: statsSchema,
  extraSpecs,
  // The reserved ways are taken out of cbm_mask in hardware, and ways are never overcommitted.
  inventoryFields: { fixed: { [LLC_WAYS]: ['allocationRatio', 'reserved'] } },
  resource,
});
