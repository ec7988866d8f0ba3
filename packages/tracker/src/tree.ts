import {
  inventoryProblem,
  isValidResourceClass,
  isValidTraitName,
  normalizeInventory,
  type Inventory,
  type JsonValue,
  type ResourceClass,
} from '@ert/plugin-api';
import { TrackerError, TrackerErrorCodes } from './errors.js';
import { childProviderName, providerUuid } from './ids.js';
import { describeEntry, HOST_PLACEHOLDER, isHostEntry, type ProviderConfigEntry } from './provider-config.js';

/** One provider's share of a plugin's discovery, validated and normalized. */
export interface NormalizedContribution {
  inventories: Record<ResourceClass, Inventory>;
  traits: string[];
}

/** A plugin's `discover` result after validation. */
export interface NormalizedDiscovery {
  available: boolean;
  reason?: string;
  host: NormalizedContribution;
  children: Array<NormalizedContribution & { key: string; parent?: string }>;
}

/** One provider of the tree the tracker wants in the store. */
export interface DesiredProvider {
  name: string;
  uuid: string;
  /** Undefined for the host's root. */
  parentName?: string;
  parentUuid?: string;
  inventories: Record<ResourceClass, Inventory>;
  traits: string[];
  /** Who reported each class: a plugin name or `file providers[i]`. */
  owners: Record<ResourceClass, string>;
  /** Aggregates provider config files put the provider in: the tracker's memberships (docs/ownership.md); other writers' are kept. */
  aggregates: string[];
}

const CHILD_KEY_PATTERN = /^[a-z0-9_]+$/;

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function invalid(plugin: string, path: string, message: string): never {
  throw new TrackerError(TrackerErrorCodes.INVALID_DISCOVERY, `plugin ${plugin}: discover() returned an invalid result at ${path}: ${message}`, {
    plugin,
    path,
  });
}

function normalizeContribution(plugin: string, path: string, value: unknown): NormalizedContribution {
  if (value === undefined) return { inventories: {}, traits: [] };
  if (!isRecord(value)) invalid(plugin, path, 'must be an object');
  const inventories: Record<ResourceClass, Inventory> = {};
  const rawInv = value['inventories'] ?? {};
  if (!isRecord(rawInv)) invalid(plugin, `${path}.inventories`, 'must be an object keyed by resource class');
  for (const [resourceClass, input] of Object.entries(rawInv)) {
    const at = `${path}.inventories.${resourceClass}`;
    if (!isValidResourceClass(resourceClass)) invalid(plugin, at, `${resourceClass} is neither a standard class nor CUSTOM_[A-Z0-9_]+`);
    if (!isRecord(input) || typeof input['total'] !== 'number') invalid(plugin, at, 'must be an object with a numeric total');
    const inventory = normalizeInventory(input as { total: number });
    const problem = inventoryProblem(inventory);
    if (problem) invalid(plugin, at, problem);
    inventories[resourceClass] = inventory;
  }
  const rawTraits = value['traits'] ?? [];
  if (!Array.isArray(rawTraits)) invalid(plugin, `${path}.traits`, 'must be a list of trait names');
  const traits: string[] = [];
  rawTraits.forEach((trait: unknown, i: number) => {
    if (typeof trait !== 'string' || !isValidTraitName(trait)) invalid(plugin, `${path}.traits[${i}]`, `${JSON.stringify(trait)} is not a valid trait name`);
    if (!traits.includes(trait)) traits.push(trait);
  });
  return { inventories, traits };
}

/**
 * Check a plugin's `discover` result against the contract (`Discovery`) and normalize
 * its inventories (Placement's defaults). Throws ERT_TRACKER_INVALID_DISCOVERY naming
 * the plugin and the JSON path at fault. An unavailable plugin contributes nothing,
 * whatever else it returned.
 */
export function normalizeDiscovery(plugin: string, value: unknown): NormalizedDiscovery {
  if (!isRecord(value)) invalid(plugin, '$', 'must be an object with "available"');
  if (typeof value['available'] !== 'boolean') invalid(plugin, '$.available', 'must be a boolean');
  if (value['reason'] !== undefined && typeof value['reason'] !== 'string') invalid(plugin, '$.reason', 'must be a string');
  const reason = value['reason'] as string | undefined;
  if (!value['available']) {
    return { available: false, reason: reason ?? 'the plugin reported itself unavailable', host: { inventories: {}, traits: [] }, children: [] };
  }
  const host = normalizeContribution(plugin, '$.host', value['host']);
  const rawChildren = value['children'] ?? [];
  if (!Array.isArray(rawChildren)) invalid(plugin, '$.children', 'must be a list');
  const children: NormalizedDiscovery['children'] = [];
  const keys = new Set<string>();
  rawChildren.forEach((raw: unknown, i: number) => {
    const at = `$.children[${i}]`;
    if (!isRecord(raw)) invalid(plugin, at, 'must be an object');
    const key = raw['key'];
    if (typeof key !== 'string' || !CHILD_KEY_PATTERN.test(key)) invalid(plugin, `${at}.key`, `${JSON.stringify(key)} does not match [a-z0-9_]+`);
    if (keys.has(key)) invalid(plugin, `${at}.key`, `key ${key} is used twice`);
    keys.add(key);
    const parent = raw['parent'];
    if (parent !== undefined && typeof parent !== 'string') invalid(plugin, `${at}.parent`, 'must be a child key');
    children.push({ key, ...(parent !== undefined ? { parent } : {}), ...normalizeContribution(plugin, at, raw) });
  });
  for (const [i, child] of children.entries()) {
    if (child.parent === undefined) continue;
    if (!keys.has(child.parent)) invalid(plugin, `$.children[${i}].parent`, `no child with key ${child.parent}`);
    // Walk up: a cycle would never reach the root.
    const visited = new Set<string>([child.key]);
    for (let p: string | undefined = child.parent; p !== undefined; p = children.find((c) => c.key === p)?.parent) {
      if (visited.has(p)) invalid(plugin, `$.children[${i}].parent`, `parent chain of ${child.key} loops`);
      visited.add(p);
    }
  }
  return { available: true, ...(reason !== undefined ? { reason } : {}), host, children };
}

/**
 * Merge the plugins' discoveries (in config order) and the provider config entries into
 * the host's provider tree, root first, parents before children. Throws
 * ERT_TRACKER_INVENTORY_CONFLICT when two plugins report the same class on one provider
 * (naming both) and ERT_TRACKER_PROVIDER_CONFIG_CONFLICT when a config entry adds a class
 * a plugin reports there (naming the file and entry). An entry with `parent` creates its
 * provider `<host>_<name>` under that parent (the root for `$HOST`, else a provider of the
 * tree: a plugin's, or one another entry creates) when nothing reports it. Entries that match
 * no provider of the tree (or whose parent is not in it) are returned in `unmatched` (Nova
 * warns, too). Each provider's `aggregates` are the entries' (`aggregates:`).
 */
export function buildTree(
  hostName: string,
  discoveries: ReadonlyArray<{ plugin: string; discovery: NormalizedDiscovery }>,
  entries: readonly ProviderConfigEntry[],
): { providers: DesiredProvider[]; unmatched: ProviderConfigEntry[] } {
  const byName = new Map<string, DesiredProvider>();
  const order: DesiredProvider[] = [];
  const add = (name: string, parentName: string | undefined): DesiredProvider => {
    const parent = parentName === undefined ? undefined : byName.get(parentName);
    const provider: DesiredProvider = {
      name,
      uuid: providerUuid(name),
      ...(parent ? { parentName: parent.name, parentUuid: parent.uuid } : {}),
      inventories: {},
      traits: [],
      owners: {},
      aggregates: [],
    };
    byName.set(name, provider);
    order.push(provider);
    return provider;
  };
  const merge = (provider: DesiredProvider, contribution: NormalizedContribution, owner: string, onClash: (resourceClass: string, other: string) => never): void => {
    for (const [resourceClass, inventory] of Object.entries(contribution.inventories)) {
      const other = provider.owners[resourceClass];
      if (other !== undefined) onClash(resourceClass, other);
      provider.inventories[resourceClass] = inventory;
      provider.owners[resourceClass] = owner;
    }
    for (const trait of contribution.traits) if (!provider.traits.includes(trait)) provider.traits.push(trait);
  };
  const root = add(hostName, undefined);

  for (const { plugin, discovery } of discoveries) {
    const clash = (provider: string) => (resourceClass: string, other: string): never => {
      throw new TrackerError(
        TrackerErrorCodes.INVENTORY_CONFLICT,
        `plugins ${other} and ${plugin} both report ${resourceClass} on provider ${provider}; configure only one of them`,
        { provider, resourceClass, plugins: [other, plugin] },
      );
    };
    merge(root, discovery.host, plugin, clash(root.name));
    // Parents first: repeat over the children until each has found its parent.
    const pending = [...discovery.children];
    while (pending.length > 0) {
      const index = pending.findIndex((c) => c.parent === undefined || byName.has(childProviderName(hostName, c.parent)));
      if (index < 0) invalid(plugin, '$.children', 'a parent chain does not reach the host');
      const child = pending.splice(index, 1)[0]!;
      const name = childProviderName(hostName, child.key);
      const parentName = child.parent === undefined ? hostName : childProviderName(hostName, child.parent);
      const provider = byName.get(name) ?? add(name, parentName);
      if (provider.parentName !== parentName) {
        throw new TrackerError(
          TrackerErrorCodes.INVENTORY_CONFLICT,
          `plugin ${plugin} puts provider ${name} under ${parentName}, another plugin put it under ${String(provider.parentName)}`,
          { provider: name, plugin },
        );
      }
      merge(provider, child, plugin, clash(name));
    }
  }

  const unmatched: ProviderConfigEntry[] = [];
  const byRef = (name: string): DesiredProvider | undefined => (name === HOST_PLACEHOLDER ? root : (byName.get(name) ?? byName.get(childProviderName(hostName, name))));
  const find = (entry: ProviderConfigEntry): DesiredProvider | undefined => {
    if (isHostEntry(entry)) return root;
    if (entry.identification.uuid !== undefined) return order.find((p) => p.uuid === entry.identification.uuid);
    return byRef(entry.identification.name!);
  };
  // Entries whose provider is created under a parent that another entry creates wait for it:
  // repeat until no entry makes progress; what is left matches nothing here (unmatched).
  const resolved: Array<{ entry: ProviderConfigEntry; provider: DesiredProvider }> = [];
  let pending = [...entries];
  for (let progress = true; progress && pending.length > 0; ) {
    progress = false;
    const waiting: ProviderConfigEntry[] = [];
    for (const entry of pending) {
      let provider = find(entry);
      if (!provider && entry.parent !== undefined) {
        const parent = byRef(entry.parent);
        if (parent) provider = add(childProviderName(hostName, entry.identification.name!), parent.name);
      }
      if (provider) {
        resolved.push({ entry, provider });
        progress = true;
      } else waiting.push(entry);
    }
    pending = waiting;
  }
  unmatched.push(...pending);
  for (const { entry, provider } of resolved.sort((a, b) => entries.indexOf(a.entry) - entries.indexOf(b.entry))) {
    const owner = `${entry.file} providers[${entry.index}]`;
    const target = provider;
    for (const aggregate of entry.aggregates) if (!target.aggregates.includes(aggregate)) target.aggregates.push(aggregate);
    merge(target, entry, owner, (resourceClass, other) => {
      throw new TrackerError(
        TrackerErrorCodes.PROVIDER_CONFIG_CONFLICT,
        `${describeEntry(entry)} adds ${resourceClass} to provider ${target.name}, which ${other} already reports`,
        { file: entry.file, index: entry.index, identification: entry.identification, resourceClass, provider: target.name, owner: other },
      );
    });
  }
  return { providers: order, unmatched };
}

/** Deep equality of JSON-like values (key order ignored). */
export function jsonEqual(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (typeof a !== typeof b || a === null || b === null || typeof a !== 'object') return false;
  if (Array.isArray(a) !== Array.isArray(b)) return false;
  if (Array.isArray(a)) {
    const bb = b as unknown[];
    return a.length === bb.length && a.every((v, i) => jsonEqual(v, bb[i]));
  }
  const ao = a as Record<string, unknown>;
  const bo = b as Record<string, unknown>;
  const ak = Object.keys(ao).filter((k) => ao[k] !== undefined);
  const bk = Object.keys(bo).filter((k) => bo[k] !== undefined);
  return ak.length === bk.length && ak.every((k) => jsonEqual(ao[k], bo[k]));
}

export type { JsonValue };
