import { isValidTraitName, type Flavor } from '@ert/plugin-api';
import { describeKey, PlacementErrorCodes, pluginPrefix, RequestSpecError, type PlacementErrorCode } from './errors.js';

/**
 * Image properties merged with a flavor's extra specs, the way Nova merges them
 * (nova/virt/hardware.py's `get_cpu_policy_constraint`, `get_cpu_thread_policy_constraint`,
 * `_numa_get_pagesize_constraints`, `_get_unique_flavor_image_meta`, and
 * nova/scheduler/utils.py's `ResourceRequest._process_image_meta` for traits):
 *
 * - `trait:NAME=required|forbidden` joins the unnumbered group (Nova: image traits never go
 *   to a numbered group; Nova reads only `required`, ert also `forbidden`). The flavor saying
 *   the opposite for the same trait in the unnumbered group is a conflict.
 * - `hw_X` is the image spelling of the flavor's `hw:X`:
 *   - `hw_cpu_policy` (`shared`, `dedicated`, `mixed`): a flavor without `hw:cpu_policy` takes
 *     the image's; a `dedicated` flavor stays dedicated whatever the image says; a `shared`
 *     flavor refuses an image asking `dedicated` or `mixed`; a `mixed` one refuses `dedicated`.
 *   - `hw_cpu_thread_policy` (`prefer`, `isolate`, `require`): a flavor without one takes the
 *     image's; `prefer` in the flavor wins; any other flavor value must equal the image's.
 *   - `hw_mem_page_size`: the image may only choose within what the flavor allows: the
 *     flavor must set `hw:mem_page_size`; `any` or `large` there lets the image choose any
 *     page size; otherwise both must name the same size (`2MB` = `2048`).
 *   - any other `hw_X`: taken when the flavor has no `hw:X`, else both must be equal. The key
 *     `hw:X` must then be one a loaded plugin owns, as for a flavor.
 * - Any other property is refused (ert reads only these; Nova dropped what it did not know).
 */
export interface MergedExtraSpecs {
  /** The flavor's extra specs with the image's properties merged in (flavor spelling). */
  extraSpecs: Record<string, string>;
  /** Merged key -> the image property whose value it holds (only keys the image decided). */
  fromImage: Map<string, string>;
}

const IMAGE_TRAIT_KEY = /^trait([^:]*):(.*)$/;
const HW_PREFIX = 'hw_';
const CPU_POLICIES = ['shared', 'dedicated', 'mixed'];
const THREAD_POLICIES = ['prefer', 'isolate', 'require'];
const PAGE_SIZE = /^(\d+)\s*(?:([kmgt])(?:i?b)?)?$/i;
const UNIT_KB: Record<string, number> = { '': 1, k: 1, m: 1024, g: 1024 * 1024, t: 1024 * 1024 * 1024 };

function imageError(code: PlacementErrorCode, property: string, value: string | undefined, key: string, expected: string, why?: string): RequestSpecError {
  return new RequestSpecError(code, `image property ${describeKey(property, value)}: ${why ?? `expected ${expected}`}`, {
    key,
    value,
    expected,
    source: 'image',
    imageProperty: property,
  });
}

function conflict(property: string, value: string, key: string, flavorValue: string, flavorName: string, rule: string): RequestSpecError {
  return new RequestSpecError(
    PlacementErrorCodes.CONFLICT,
    `flavor ${key}=${flavorValue} conflicts with image ${property}=${value}: ${rule}`,
    { key, value, expected: rule, source: 'image', imageProperty: property, flavorValue, flavor: flavorName },
  );
}

/** The flavor's value of `key`, trimmed; undefined when absent; null when not a string (its parse refuses it). */
function flavorValueOf(flavor: Flavor, key: string): string | undefined | null {
  if (!Object.prototype.hasOwnProperty.call(flavor.extraSpecs, key)) return undefined;
  const raw = flavor.extraSpecs[key];
  return typeof raw === 'string' ? raw.trim() : null;
}

/** `small` / `large` / `any`, or the size in KiB (4 KiB is `small`); undefined when not a page size. */
function pageSize(value: string): string | number | undefined {
  const word = value.trim().toLowerCase();
  if (word === 'small' || word === 'large' || word === 'any') return word;
  const m = PAGE_SIZE.exec(word);
  if (!m) return undefined;
  const kb = Number(m[1]) * UNIT_KB[(m[2] ?? '').toLowerCase()]!;
  if (!Number.isSafeInteger(kb) || kb <= 0) return undefined;
  return kb === 4 ? 'small' : kb;
}

/**
 * Merge `flavor.image.properties` into `flavor.extraSpecs` by Nova's rules (above). Throws
 * RequestSpecError naming the image property (and, on a conflict, the flavor's key and value
 * too): ERT_SPEC_UNKNOWN_KEY for a property ert does not read, ERT_SPEC_INVALID_VALUE for a
 * malformed value, ERT_SPEC_CONFLICT when flavor and image disagree. Pure.
 */
export function mergeImageProperties(flavor: Flavor): MergedExtraSpecs {
  const extraSpecs: Record<string, string> = { ...flavor.extraSpecs };
  const fromImage = new Map<string, string>();
  const image = flavor.image;
  if (image === undefined) return { extraSpecs, fromImage };
  if (image === null || typeof image !== 'object' || image.properties === null || typeof image.properties !== 'object' || Array.isArray(image.properties)) {
    throw new RequestSpecError(PlacementErrorCodes.INVALID_VALUE, `flavor "${flavor.name}": image must be { properties: { NAME: VALUE } }`, {
      key: 'image',
      value: undefined,
      expected: '{ properties: { NAME: VALUE } }',
      source: 'image',
    });
  }
  const take = (key: string, property: string, value: string): void => {
    extraSpecs[key] = value;
    fromImage.set(key, property);
  };

  for (const property of Object.keys(image.properties).sort()) {
    const raw = image.properties[property];
    if (typeof raw !== 'string') throw imageError(PlacementErrorCodes.INVALID_VALUE, property, String(raw), property, 'a string value');
    const value = raw.trim();
    let m: RegExpExecArray | null;
    if ((m = IMAGE_TRAIT_KEY.exec(property)) !== null) {
      const suffix = m[1]!;
      const trait = m[2]!;
      if (suffix !== '') throw imageError(PlacementErrorCodes.UNKNOWN_KEY, property, raw, property, 'trait:NAME', 'an image\'s traits go to the unnumbered group only (trait:NAME), as in Nova');
      if (!isValidTraitName(trait)) throw imageError(PlacementErrorCodes.UNKNOWN_KEY, property, raw, property, 'a trait name [A-Z][A-Z0-9_]*', `"${trait}" is not a valid trait name`);
      if (value !== 'required' && value !== 'forbidden') throw imageError(PlacementErrorCodes.INVALID_VALUE, property, raw, property, 'required or forbidden');
      const key = `trait:${trait}`;
      const flavorValue = flavorValueOf(flavor, key);
      if (flavorValue === null) continue; // the flavor's own malformed value is refused by its parse, naming the flavor
      if (flavorValue === undefined) take(key, property, value);
      else if (flavorValue !== value && (flavorValue === 'required' || flavorValue === 'forbidden')) {
        throw conflict(property, value, key, flavorValue, flavor.name, `a trait cannot be both required and forbidden`);
      }
      continue;
    }
    if (!property.startsWith(HW_PREFIX) || property.length === HW_PREFIX.length) {
      throw imageError(PlacementErrorCodes.UNKNOWN_KEY, property, raw, property, 'trait:NAME or hw_<name>', 'ert reads only the image properties trait:NAME and hw_<name> (the flavor\'s hw:<name>)');
    }
    const key = `hw:${property.slice(HW_PREFIX.length)}`;
    const flavorValue = flavorValueOf(flavor, key);
    if (flavorValue === null) continue;
    if (key === 'hw:cpu_policy') {
      if (!CPU_POLICIES.includes(value)) throw imageError(PlacementErrorCodes.INVALID_VALUE, property, raw, key, CPU_POLICIES.join(', '));
      if (flavorValue === undefined) take(key, property, value);
      else if (flavorValue === 'shared' && value !== 'shared') throw conflict(property, value, key, flavorValue, flavor.name, 'a shared flavor does not let the image ask for dedicated CPUs');
      else if (flavorValue === 'mixed' && value === 'dedicated') throw conflict(property, value, key, flavorValue, flavor.name, 'a mixed flavor does not let the image ask for dedicated CPUs only');
      // A dedicated flavor stays dedicated (Nova ignores the image then).
    } else if (key === 'hw:cpu_thread_policy') {
      if (!THREAD_POLICIES.includes(value)) throw imageError(PlacementErrorCodes.INVALID_VALUE, property, raw, key, THREAD_POLICIES.join(', '));
      if (flavorValue === undefined) take(key, property, value);
      else if (flavorValue !== 'prefer' && flavorValue !== value) throw conflict(property, value, key, flavorValue, flavor.name, `only a flavor without ${key} or with prefer lets the image choose`);
    } else if (key === 'hw:mem_page_size') {
      const imageSize = pageSize(value);
      if (imageSize === undefined) throw imageError(PlacementErrorCodes.INVALID_VALUE, property, raw, key, 'small, large, any or a page size (2MB, 1GB, 2048)');
      if (flavorValue === undefined) {
        throw new RequestSpecError(
          PlacementErrorCodes.CONFLICT,
          `image ${property}=${value} needs the flavor to allow it: the flavor sets no ${key} (the image may only narrow the flavor's page size)`,
          { key, value, expected: `the flavor's ${key}=any|large|<the same size>`, source: 'image', imageProperty: property, flavorValue: undefined, flavor: flavor.name },
        );
      }
      const flavorSize = pageSize(flavorValue);
      if (flavorSize === undefined) continue; // the flavor's own value is refused by its parse, naming the flavor
      if (flavorSize === 'any' || flavorSize === 'large') take(key, property, value);
      else if (flavorSize !== imageSize) throw conflict(property, value, key, flavorValue, flavor.name, `the flavor allows only its own page size (any or large would let the image choose)`);
    } else if (flavorValue === undefined) take(key, property, value);
    else if (flavorValue !== value) throw conflict(property, value, key, flavorValue, flavor.name, 'flavor and image must agree');
  }
  return { extraSpecs, fromImage };
}

/**
 * A RequestSpecError about a key whose value came from the image, said about the image
 * property (`image property "hw_mem_page_size=huge" (as hw:mem_page_size): ...`, after
 * `plugin "<name>": ` when the error names the key's plugin); any other error unchanged.
 */
export function attributeToImage(err: unknown, merged: MergedExtraSpecs): unknown {
  if (!(err instanceof RequestSpecError)) return err;
  const property = merged.fromImage.get(err.details.key);
  if (property === undefined || err.details.source === 'image') return err;
  const value = merged.extraSpecs[err.details.key];
  const plugin = typeof err.details['plugin'] === 'string' ? err.details['plugin'] : undefined;
  const prefix = `${pluginPrefix(plugin)}extra spec ${describeKey(err.details.key, value)}: `;
  const why = err.message.startsWith(prefix) ? err.message.slice(prefix.length) : err.message;
  return new RequestSpecError(err.code, `${pluginPrefix(plugin)}image property ${describeKey(property, value)} (as ${err.details.key}): ${why}`, {
    ...err.details,
    source: 'image',
    imageProperty: property,
  });
}
