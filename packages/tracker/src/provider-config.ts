import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { parseDocument } from 'yaml';
import { inventoryProblem, isCustomName, normalizeInventory, type Inventory, type ResourceClass } from '@ert/plugin-api';
import { TrackerError, TrackerErrorCodes } from './errors.js';

/** The value of `identification.name` / `identification.uuid` that means "this host's root". */
export const HOST_PLACEHOLDER = '$HOST';
/** The provider config format version this tracker reads. */
export const PROVIDER_CONFIG_SCHEMA_VERSION = '1.0';

/** One `providers[]` entry of a provider config file, validated. */
export interface ProviderConfigEntry {
  /** Absolute path of the file the entry came from. */
  file: string;
  /** Position in the file's `providers` list. */
  index: number;
  /** Exactly one of `name` / `uuid`; either may be `$HOST`. */
  identification: { name?: string; uuid?: string };
  /**
   * Where the entry creates its provider when no plugin reports it: `$HOST` (the host's root)
   * or another provider of the host's tree, by name as `identification.name` matches (a
   * plugin's `llc_0`, another entry's provider, or a full name).
   */
  parent?: string;
  /** Additional CUSTOM_ inventories, normalized. */
  inventories: Record<ResourceClass, Inventory>;
  /** Additional CUSTOM_ traits. */
  traits: string[];
  /** Aggregates (uuids, lower case) the provider is put in; other memberships are kept. */
  aggregates: string[];
}

/** True when the entry describes the host's root provider. */
export function isHostEntry(entry: ProviderConfigEntry): boolean {
  return entry.identification.name === HOST_PLACEHOLDER || entry.identification.uuid === HOST_PLACEHOLDER;
}

/** `file entry #i (name=x)`: how errors and reports point at an entry. */
export function describeEntry(entry: Pick<ProviderConfigEntry, 'file' | 'index' | 'identification'>): string {
  return `${entry.file} providers[${entry.index}] (${identificationLabel(entry.identification)})`;
}

function identificationLabel(identification: { name?: string; uuid?: string }): string {
  return identification.name !== undefined ? `name=${identification.name}` : `uuid=${String(identification.uuid)}`;
}

const NESTED_NAME_PATTERN = /^[a-z0-9_]+$/;
const UUID_PATTERN = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const INVENTORY_FIELDS: Record<string, keyof Inventory> = {
  total: 'total',
  reserved: 'reserved',
  min_unit: 'minUnit',
  max_unit: 'maxUnit',
  step_size: 'stepSize',
  allocation_ratio: 'allocationRatio',
};

/** An inventory problem with the field names as the file spells them (`max_unit`, not `maxUnit`). */
function asWritten(problem: string): string {
  return Object.entries(INVENTORY_FIELDS).reduce((text, [yamlKey, field]) => text.replace(new RegExp(`\\b${field}\\b`, 'g'), yamlKey), problem);
}

type Fail = (message: string, extra?: Record<string, unknown>) => never;

function isMapping(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function onlyKeys(value: Record<string, unknown>, allowed: readonly string[], where: string, fail: Fail): void {
  for (const key of Object.keys(value)) {
    if (!allowed.includes(key)) fail(`unknown key "${key}" in ${where} (allowed: ${allowed.join(', ')})`, { key });
  }
}

/**
 * Parse and validate one provider config file's text. Throws
 * ERT_TRACKER_PROVIDER_CONFIG_INVALID naming the file, the entry (index and
 * identification) and the key at fault for: YAML syntax errors, a missing or unsupported
 * `schema_version`, any unknown key, a non-CUSTOM_ class or trait, an invalid inventory,
 * a malformed identification, or a nested provider without a usable name.
 */
export function parseProviderConfig(text: string, file: string): ProviderConfigEntry[] {
  const fileFail: Fail = (message, extra = {}) => {
    throw new TrackerError(TrackerErrorCodes.PROVIDER_CONFIG_INVALID, `provider config ${file}: ${message}`, { file, ...extra });
  };
  const doc = parseDocument(text, { uniqueKeys: true });
  if (doc.errors.length > 0) fileFail(`not valid YAML: ${doc.errors[0]!.message}`);
  const root: unknown = doc.toJS();
  if (!isMapping(root)) fileFail('the file must be a mapping with schema_version and providers');
  onlyKeys(root, ['schema_version', 'providers'], 'the top level', fileFail);
  if (root['schema_version'] !== PROVIDER_CONFIG_SCHEMA_VERSION) {
    fileFail(`schema_version must be "${PROVIDER_CONFIG_SCHEMA_VERSION}" (a string), got ${JSON.stringify(root['schema_version'])}`, {
      key: 'schema_version',
    });
  }
  const providers = root['providers'];
  if (!Array.isArray(providers)) fileFail('providers must be a list', { key: 'providers' });
  return providers.map((raw, index) => parseEntry(raw, file, index));
}

function parseEntry(raw: unknown, file: string, index: number): ProviderConfigEntry {
  // Once the identification is valid, errors name it in the message and in `details`.
  const at: { label: string; identification?: { name?: string; uuid?: string } } = { label: `providers[${index}]` };
  const fail: Fail = (message, extra = {}) => {
    throw new TrackerError(TrackerErrorCodes.PROVIDER_CONFIG_INVALID, `provider config ${file} ${at.label}: ${message}`, {
      file,
      index,
      ...(at.identification ? { identification: at.identification } : {}),
      ...extra,
    });
  };
  if (!isMapping(raw)) fail('each provider must be a mapping');

  const ident = raw['identification'];
  if (!isMapping(ident)) fail('identification is required and must be a mapping with name or uuid', { key: 'identification' });
  onlyKeys(ident, ['name', 'uuid'], `${at.label}.identification`, fail);
  const keys = Object.keys(ident);
  if (keys.length !== 1) fail('identification must have exactly one of name, uuid', { key: 'identification' });
  const identification: { name?: string; uuid?: string } = {};
  if ('name' in ident) {
    if (typeof ident['name'] !== 'string' || ident['name'] === '') fail('identification.name must be a non-empty string', { key: 'identification.name' });
    identification.name = ident['name'];
  } else {
    const uuid = ident['uuid'];
    if (typeof uuid !== 'string' || (uuid !== HOST_PLACEHOLDER && !UUID_PATTERN.test(uuid))) {
      fail(`identification.uuid must be a uuid or "${HOST_PLACEHOLDER}", got ${JSON.stringify(uuid)}`, { key: 'identification.uuid' });
    }
    identification.uuid = uuid === HOST_PLACEHOLDER ? uuid : uuid.toLowerCase();
  }
  at.label = `providers[${index}] (${identificationLabel(identification)})`;
  at.identification = identification;
  onlyKeys(raw, ['identification', 'parent', 'inventories', 'traits', 'aggregates'], 'the entry', fail);

  const entry: ProviderConfigEntry = { file, index, identification, inventories: {}, traits: [], aggregates: [] };
  if (raw['parent'] !== undefined) {
    const parent = raw['parent'];
    if (typeof parent !== 'string' || parent.trim() === '') fail(`parent must be "${HOST_PLACEHOLDER}" or the name of a provider of the host, got ${JSON.stringify(parent)}`, { key: 'parent' });
    if (isHostEntry(entry)) fail('the host itself cannot have a parent', { key: 'parent' });
    if (identification.name === undefined || !NESTED_NAME_PATTERN.test(identification.name)) {
      fail('a provider nested in the host\'s tree is identified by a name matching [a-z0-9_]+ (it is named <host>_<name>)', {
        key: 'identification',
      });
    }
    if (parent === identification.name) fail('a provider cannot be its own parent', { key: 'parent' });
    entry.parent = parent;
  }

  if (raw['aggregates'] !== undefined) {
    const aggregates = raw['aggregates'];
    if (!Array.isArray(aggregates)) fail('aggregates must be a list of aggregate uuids', { key: 'aggregates' });
    for (const aggregate of aggregates) {
      if (typeof aggregate !== 'string' || !UUID_PATTERN.test(aggregate)) fail(`aggregate ${JSON.stringify(aggregate)} is not a uuid`, { key: 'aggregates', aggregate });
      if (!entry.aggregates.includes(aggregate.toLowerCase())) entry.aggregates.push(aggregate.toLowerCase());
    }
  }

  if (raw['inventories'] !== undefined) {
    const inv = raw['inventories'];
    if (!isMapping(inv)) fail('inventories must be a mapping with "additional"', { key: 'inventories' });
    onlyKeys(inv, ['additional'], `${at.label}.inventories`, fail);
    const additional = inv['additional'] ?? [];
    if (!Array.isArray(additional)) fail('inventories.additional must be a list', { key: 'inventories.additional' });
    for (const item of additional) {
      if (!isMapping(item)) fail('each inventories.additional item must be a mapping { CUSTOM_X: {...} }', { key: 'inventories.additional' });
      for (const [resourceClass, fields] of Object.entries(item)) {
        const key = `inventories.additional.${resourceClass}`;
        if (!isCustomName(resourceClass)) fail(`resource class ${resourceClass} is not CUSTOM_[A-Z0-9_]+; only custom classes may be added`, { key, resourceClass });
        if (resourceClass in entry.inventories) fail(`resource class ${resourceClass} is listed twice`, { key, resourceClass });
        if (!isMapping(fields)) fail(`${resourceClass} must be a mapping with total and optional fields`, { key, resourceClass });
        onlyKeys(fields, Object.keys(INVENTORY_FIELDS), `${at.label}.${key}`, fail);
        if (fields['total'] === undefined) fail(`${resourceClass}.total is required`, { key: `${key}.total`, resourceClass });
        const input: Record<string, unknown> = {};
        for (const [yamlKey, field] of Object.entries(INVENTORY_FIELDS)) {
          if (fields[yamlKey] !== undefined) input[field] = fields[yamlKey];
        }
        const inventory = normalizeInventory(input as { total: number });
        const problem = inventoryProblem(inventory);
        if (problem) fail(`${resourceClass}: ${asWritten(problem)}`, { key, resourceClass });
        entry.inventories[resourceClass] = inventory;
      }
    }
  }

  if (raw['traits'] !== undefined) {
    const traits = raw['traits'];
    if (!isMapping(traits)) fail('traits must be a mapping with "additional"', { key: 'traits' });
    onlyKeys(traits, ['additional'], `${at.label}.traits`, fail);
    const additional = traits['additional'] ?? [];
    if (!Array.isArray(additional)) fail('traits.additional must be a list', { key: 'traits.additional' });
    for (const trait of additional) {
      if (typeof trait !== 'string' || !isCustomName(trait)) {
        fail(`trait ${JSON.stringify(trait)} is not CUSTOM_[A-Z0-9_]+; only custom traits may be added`, { key: 'traits.additional', trait });
      }
      if (!entry.traits.includes(trait)) entry.traits.push(trait);
    }
  }
  return entry;
}

function identityKey(identification: { name?: string; uuid?: string }): string {
  if (identification.name === HOST_PLACEHOLDER || identification.uuid === HOST_PLACEHOLDER) return HOST_PLACEHOLDER;
  return identification.name !== undefined ? `name:${identification.name}` : `uuid:${identification.uuid}`;
}

/**
 * Read every `*.yaml` / `*.yml` file of `dir` (sorted by name) and validate it with
 * `parseProviderConfig`. A provider described twice (in one file or across files) is
 * ERT_TRACKER_PROVIDER_CONFIG_DUPLICATE naming both places; a directory that cannot be
 * read is ERT_TRACKER_PROVIDER_CONFIG_INVALID. Reads only; safe to call repeatedly.
 */
export async function loadProviderConfigs(dir: string): Promise<ProviderConfigEntry[]> {
  let names: string[];
  try {
    names = (await readdir(dir)).filter((n) => /\.ya?ml$/.test(n)).sort();
  } catch (err) {
    throw new TrackerError(TrackerErrorCodes.PROVIDER_CONFIG_INVALID, `provider config directory ${dir} cannot be read: ${(err as Error).message}`, { file: dir }, { cause: err });
  }
  const entries: ProviderConfigEntry[] = [];
  const seen = new Map<string, ProviderConfigEntry>();
  for (const name of names) {
    const file = path.join(dir, name);
    let text: string;
    try {
      text = await readFile(file, 'utf8');
    } catch (err) {
      throw new TrackerError(TrackerErrorCodes.PROVIDER_CONFIG_INVALID, `provider config ${file} cannot be read: ${(err as Error).message}`, { file }, { cause: err });
    }
    for (const entry of parseProviderConfig(text, file)) {
      const key = identityKey(entry.identification);
      const earlier = seen.get(key);
      if (earlier) {
        throw new TrackerError(
          TrackerErrorCodes.PROVIDER_CONFIG_DUPLICATE,
          `${describeEntry(entry)} describes the same provider as ${describeEntry(earlier)}`,
          { file: entry.file, index: entry.index, identification: entry.identification, otherFile: earlier.file, otherIndex: earlier.index },
        );
      }
      seen.set(key, entry);
      entries.push(entry);
    }
  }
  return entries;
}
