import {
  extraSpecKeyOwner,
  isValidResourceClass,
  messageOf,
  isValidTraitName,
  type CapabilityRequirement,
  type ExtraSpecKey,
  type Flavor,
  type GroupPolicy,
  type RequestGroup,
  type RequestSpec,
  type ResourceClass,
  type SchedulingHints,
} from '@ert/plugin-api';
import { describeKey, PlacementErrorCodes, pluginPrefix, RequestSpecError, type PlacementErrorCode } from './errors.js';
import { attributeToImage, mergeImageProperties } from './image.js';
import { parseOpExpression } from './ops.js';
import { requestGroupsOf } from './request-groups.js';
import { convertPluginValue } from './plugin-values.js';

/**
 * Prefixes of the extra-spec keys ert itself interprets. A plugin must not declare a key
 * starting with one of them (the host refuses such a plugin at load time):
 * `resources[N]:CLASS`, `trait[N]:NAME`, `member_of[N]`, `group_policy`,
 * `aggregate_instance_extra_specs:KEY`, `capabilities:KEY`, and the `ert:` namespace
 * (of which `ert:policy` is defined).
 */
export const BUILTIN_EXTRA_SPEC_PREFIXES: readonly string[] = Object.freeze([
  'resources',
  'trait',
  'member_of',
  'group_policy',
  'aggregate_instance_extra_specs:',
  'capabilities:',
  'ert:',
]);

/** True when `key` falls in ert's own namespace (see BUILTIN_EXTRA_SPEC_PREFIXES). */
export function isBuiltinExtraSpecKey(key: string): boolean {
  return BUILTIN_EXTRA_SPEC_PREFIXES.some((prefix) => key.startsWith(prefix));
}

// Group suffixes as Nova and Placement (>= 1.33) accept them: `1`, `_NET1`, `-gpu`.
const SUFFIX = '([a-zA-Z0-9_-]{1,64})?';
const RESOURCES_KEY = new RegExp(`^resources${SUFFIX}:(.*)$`);
const TRAIT_KEY = new RegExp(`^trait${SUFFIX}:(.*)$`);
const MEMBER_OF_KEY = new RegExp(`^member_of${SUFFIX}$`);
const AMOUNT_PATTERN = /^\d+$/;
const AGGREGATE_PATTERN = /^[A-Za-z0-9_.:-]+$/;
const AGGREGATE_SPECS_PREFIX = 'aggregate_instance_extra_specs:';
const CAPABILITIES_PREFIX = 'capabilities:';
const POLICY_KEY = 'ert:policy';
const GROUP_POLICY_KEY = 'group_policy';

const RESOURCE_CLASS_EXPECTED = 'a standard resource class or CUSTOM_[A-Z0-9_]+';

/** The flavor fields Nova turns into resources (disk: root + ephemeral + swap/1024 GB, as `diskGb`). */
const FLAVOR_BASE_CLASSES = [
  ['vcpus', 'VCPU'],
  ['memoryMb', 'MEMORY_MB'],
  ['diskGb', 'DISK_GB'],
] as const;

/** Options of `parseFlavor`. */
export interface ParseFlavorOptions {
  /** Extra-spec keys of the loaded plugins (`PluginRuntime.extraSpecKeys`). */
  keys: readonly ExtraSpecKey[];
  hints?: SchedulingHints;
  /**
   * The flavor of an instance already placed (a tracker rebuilding its views, an event), not
   * a request: the checks Nova makes only when it accepts a request are skipped — explicit
   * CPU amounts (VCPU beside PCPU, PCPU other than vcpus) and a plugin's `applyResources`
   * returning a refusal (its adjustment up to then kept) — so that an instance placed before
   * such a check existed is still seen where it is. Malformed keys and values, and keys no
   * loaded plugin owns, still throw.
   */
  recorded?: boolean;
}

/** The error about `key` (`value` as written); `plugin`: the plugin that owns the key, named first. */
function specError(code: PlacementErrorCode, key: string, value: string | undefined, expected: string, why?: string, plugin?: string): RequestSpecError {
  const message = `${pluginPrefix(plugin)}extra spec ${describeKey(key, value)}: ${why ?? `expected ${expected}`}`;
  return new RequestSpecError(code, message, { key, value, expected, ...(plugin === undefined ? {} : { plugin }) });
}

interface GroupDraft {
  resources: Record<ResourceClass, number>;
  requiredTraits: string[];
  forbiddenTraits: string[];
  memberOf: string[][];
  forbiddenAggregates?: string[];
}

function newDraft(): GroupDraft {
  return { resources: {}, requiredTraits: [], forbiddenTraits: [], memberOf: [] };
}

/**
 * Turn a flavor (and the request's scheduling hints) into a `RequestSpec`, the way Nova's
 * ResourceRequest does, but refusing what Nova only logged:
 *
 * - the unnumbered group gets VCPU=vcpus, MEMORY_MB=memoryMb, DISK_GB=diskGb (zero
 *   amounts omitted) for each class that no group names (Nova: `resources1:VCPU=4`
 *   replaces the flavor's vcpus, it is not added to them), VCPU not when a group names
 *   PCPU; `resources:CLASS=N` overrides a flavor-derived amount, 0 removes it; explicit VCPU
 *   and PCPU amounts together, or PCPU amounts other than vcpus, are refused (Nova's API);
 * - `resources<S>:CLASS=N`, `trait<S>:NAME=required|forbidden`, `member_of<S>=in:a,b`
 *   (or `!in:a,b`: none of them) build numbered groups (suffix `S` is 1-64 of `[a-zA-Z0-9_-]`, as in Placement 1.33);
 *   `group_policy=none|isolate` (required with two or more numbered groups);
 * - `aggregate_instance_extra_specs:KEY=VALUE`, `capabilities:KEY=<op> VALUE`, `ert:policy`;
 * - keys owned by loaded plugins are converted by their schema into `pluginSpecs`, then
 *   each plugin's `applyResources` adjusts the unnumbered group, in `keys` order (a reason
 *   it returns instead refuses the flavor: ERT_SPEC_CONFLICT);
 * - `flavor.image.properties` are merged in first, by Nova's rules (`mergeImageProperties`,
 *   docs/images.md): `trait:NAME` joins the unnumbered group, `hw_X` is the flavor's `hw:X`;
 *   a conflict between flavor and image is ERT_SPEC_CONFLICT naming both.
 *
 * Throws RequestSpecError (ERT_SPEC_UNKNOWN_KEY, ERT_SPEC_INVALID_VALUE, ERT_SPEC_CONFLICT,
 * ERT_SPEC_SCHEMA_UNSUPPORTED, ERT_SPEC_PLUGIN_FAILED) naming the key and value at fault, and for a plugin's key the
 * plugin too (`plugin "llc": extra spec "llc:ways=abc": ...`, `details.plugin`; the name
 * `definePlugin` recorded, `extraSpecKeyOwner`). Pure: the flavor is
 * not modified and the same input always gives an equal spec. Groups come out in the
 * order unnumbered, then numbered by suffix (numeric suffixes in numeric order first).
 */
export function parseFlavor(flavor: Flavor, opts: ParseFlavorOptions): RequestSpec {
  // An image's properties (flavor.image) join the extra specs by Nova's rules first (image.ts);
  // what goes wrong with a value the image gave is said about the image property.
  const merged = mergeImageProperties(flavor);
  try {
    return parseExtraSpecs(flavor, merged.extraSpecs, opts);
  } catch (err) {
    throw attributeToImage(err, merged);
  }
}

function parseExtraSpecs(flavor: Flavor, extraSpecs: Record<string, string>, opts: ParseFlavorOptions): RequestSpec {
  const unnumbered = newDraft();
  const base: Record<ResourceClass, number> = {};
  for (const [field, resourceClass] of FLAVOR_BASE_CLASSES) {
    const amount = flavor[field];
    if (!Number.isSafeInteger(amount) || amount < 0) {
      throw specError(PlacementErrorCodes.INVALID_VALUE, field, String(amount), 'a non-negative integer', `flavor "${flavor.name}" field ${field}=${String(amount)}: expected a non-negative integer`);
    }
    base[resourceClass] = amount;
  }
  // Classes that some group's `resources[S]:CLASS` names, even with 0: the flavor's own amount is then not added.
  const named = new Set<ResourceClass>();
  // The explicit VCPU and PCPU amounts of every group, for Nova's checks of them (checkCpuAmounts).
  const cpuAmounts: CpuAmounts = { VCPU: [], PCPU: [] };

  const numbered = new Map<string, GroupDraft>();
  const group = (suffix: string): GroupDraft => {
    if (suffix === '') return unnumbered;
    let draft = numbered.get(suffix);
    if (draft === undefined) {
      draft = newDraft();
      numbered.set(suffix, draft);
    }
    return draft;
  };

  const pluginKeys = new Map<string, ExtraSpecKey>();
  for (const k of opts.keys) pluginKeys.set(k.key, k);
  const pluginRaw = new Map<string, string>();
  let groupPolicy: GroupPolicy | undefined;
  let policy: string | undefined;
  const aggregateExtraSpecs: Record<string, string> = {};
  const capabilities: CapabilityRequirement[] = [];

  for (const key of Object.keys(extraSpecs).sort()) {
    const raw = extraSpecs[key];
    if (typeof raw !== 'string') {
      throw specError(PlacementErrorCodes.INVALID_VALUE, key, String(raw), 'a string value');
    }
    const value = raw.trim();
    let m: RegExpExecArray | null;

    if (key === GROUP_POLICY_KEY) {
      if (value !== 'none' && value !== 'isolate') throw specError(PlacementErrorCodes.INVALID_VALUE, key, raw, 'none or isolate');
      groupPolicy = value;
    } else if ((m = RESOURCES_KEY.exec(key)) !== null) {
      const resourceClass = m[2]!;
      if (!isValidResourceClass(resourceClass)) {
        throw specError(PlacementErrorCodes.UNKNOWN_KEY, key, raw, RESOURCE_CLASS_EXPECTED, `"${resourceClass}" is not ${RESOURCE_CLASS_EXPECTED}`);
      }
      const amount = Number(value);
      if (!AMOUNT_PATTERN.test(value) || !Number.isSafeInteger(amount)) throw specError(PlacementErrorCodes.INVALID_VALUE, key, raw, 'a non-negative integer amount');
      named.add(resourceClass);
      if (resourceClass === 'VCPU' || resourceClass === 'PCPU') cpuAmounts[resourceClass].push({ key, raw, amount });
      const target = group(m[1] ?? '');
      if (amount === 0) delete target.resources[resourceClass];
      else target.resources[resourceClass] = amount;
    } else if ((m = TRAIT_KEY.exec(key)) !== null) {
      const trait = m[2]!;
      if (!isValidTraitName(trait)) {
        throw specError(PlacementErrorCodes.UNKNOWN_KEY, key, raw, 'a trait name [A-Z][A-Z0-9_]*', `"${trait}" is not a valid trait name`);
      }
      if (value !== 'required' && value !== 'forbidden') throw specError(PlacementErrorCodes.INVALID_VALUE, key, raw, 'required or forbidden');
      const target = group(m[1] ?? '');
      (value === 'required' ? target.requiredTraits : target.forbiddenTraits).push(trait);
    } else if ((m = MEMBER_OF_KEY.exec(key)) !== null) {
      const target = group(m[1] ?? '');
      const parsed = parseMemberOf(key, raw);
      if (parsed.forbidden) (target.forbiddenAggregates ??= []).push(...parsed.aggregates.filter((a) => !target.forbiddenAggregates?.includes(a)));
      else target.memberOf.push(parsed.aggregates);
    } else if (key.startsWith(AGGREGATE_SPECS_PREFIX)) {
      const name = key.slice(AGGREGATE_SPECS_PREFIX.length);
      if (name.length === 0) throw specError(PlacementErrorCodes.UNKNOWN_KEY, key, raw, `${AGGREGATE_SPECS_PREFIX}<metadata key>`, 'the metadata key is empty');
      const problem = parseOpExpression(raw);
      if (typeof problem === 'string') throw specError(PlacementErrorCodes.INVALID_VALUE, key, raw, 'a value or an operator expression', problem);
      aggregateExtraSpecs[name] = value;
    } else if (key.startsWith(CAPABILITIES_PREFIX)) {
      const name = key.slice(CAPABILITIES_PREFIX.length);
      if (name.length === 0) throw specError(PlacementErrorCodes.UNKNOWN_KEY, key, raw, `${CAPABILITIES_PREFIX}<capability>`, 'the capability name is empty');
      const expression = parseOpExpression(raw);
      if (typeof expression === 'string') throw specError(PlacementErrorCodes.INVALID_VALUE, key, raw, 'a value or an operator expression', expression);
      capabilities.push({ key: name, ...expression });
    } else if (key === POLICY_KEY) {
      policy = raw;
    } else if (pluginKeys.has(key) && !isBuiltinExtraSpecKey(key)) {
      pluginRaw.set(key, raw);
    } else {
      throw specError(PlacementErrorCodes.UNKNOWN_KEY, key, raw, 'a built-in key or one owned by a loaded plugin', 'no built-in form and no loaded plugin owns this key');
    }
  }

  // Nova's rule: the flavor's vcpus, memory and disk go to the unnumbered group only for a
  // class no group names (so `resources1:VCPU=4` is not counted twice, and
  // `resources:VCPU=0` drops the flavor's VCPU), and its vcpus not as VCPU when a group names
  // PCPU (`resources:PCPU=4` asks 4 pinned CPUs, not 4 of each); the base classes come first.
  const explicit = unnumbered.resources;
  unnumbered.resources = {};
  for (const [resourceClass, amount] of Object.entries(base)) {
    const namedInstead = named.has(resourceClass) || (resourceClass === 'VCPU' && named.has('PCPU'));
    if (amount > 0 && !namedInstead) unnumbered.resources[resourceClass] = amount;
  }
  Object.assign(unnumbered.resources, explicit);

  // Plugin keys in the order the plugins were loaded, so resource adjustments compose predictably.
  const pluginSpecs: Record<string, unknown> = {};
  for (const spec of opts.keys) {
    const raw = pluginRaw.get(spec.key);
    if (raw === undefined) continue;
    const value = convertPluginValue(spec, raw);
    pluginSpecs[spec.key] = value;
    if (spec.applyResources !== undefined) {
      const plugin = extraSpecKeyOwner(spec);
      let refusal: unknown;
      try {
        refusal = spec.applyResources(value, unnumbered.resources, extraSpecs, flavor);
      } catch (err) {
        throw specError(PlacementErrorCodes.PLUGIN_FAILED, spec.key, raw, 'a plugin whose applyResources does not throw', `the owning plugin's applyResources threw: ${messageOf(err)}`, plugin);
      }
      if (typeof refusal === 'string' && opts.recorded !== true) {
        throw specError(PlacementErrorCodes.CONFLICT, spec.key, raw, 'a value that agrees with the amounts the flavor asks for', refusal, plugin);
      }
      checkAdjustedResources(spec.key, raw, unnumbered.resources, plugin);
    }
  }

  // After the plugins' keys: a CPU policy beside explicit amounts is the vcpu plugin's refusal,
  // which Nova makes first.
  if (opts.recorded !== true) checkCpuAmounts(flavor, cpuAmounts);

  const groups: RequestGroup[] = [{ suffix: '', ...unnumbered }];
  for (const suffix of [...numbered.keys()].sort(compareSuffixes)) {
    const draft = numbered.get(suffix)!;
    const hasResources = Object.keys(draft.resources).length > 0;
    if (!hasResources) {
      if (draft.requiredTraits.length === 0 && draft.forbiddenTraits.length === 0 && draft.memberOf.length === 0 && draft.forbiddenAggregates === undefined) continue;
      // Placement refuses a resourceless numbered group outside same_subtree (which ert does not offer).
      const key = draft.requiredTraits.length + draft.forbiddenTraits.length > 0 ? `trait${suffix}:*` : `member_of${suffix}`;
      throw specError(PlacementErrorCodes.CONFLICT, key, undefined, `resources${suffix}:<CLASS> for group ${suffix}`, `numbered group "${suffix}" has traits or member_of but no resources${suffix}: amounts`);
    }
    groups.push({ suffix, ...draft });
  }
  // Ports' and devices' request groups (flavor.requestGroups) are numbered groups of their own.
  for (const extra of requestGroupsOf(flavor)) {
    if (numbered.has(extra.suffix)) {
      throw specError(PlacementErrorCodes.CONFLICT, `resources${extra.suffix}`, undefined, 'a request group suffix the flavor does not use', `the flavor's numbered group "${extra.suffix}" and the request group of requester ${extra.suffix} would be one group`);
    }
    groups.push(extra);
  }
  // Placement needs group_policy with two or more numbered groups. The flavor's own groups
  // keep that rule; request groups (ports, devices) default to `none` when the flavor does not
  // say (unlike Nova, which fails such a boot: a hot-attached second port must not make the
  // instance unplaceable at its next resize or move).
  const flavorNumbered = groups.length - 1 - (flavor.requestGroups?.length ?? 0);
  if (flavorNumbered >= 2 && groupPolicy === undefined) {
    throw specError(PlacementErrorCodes.CONFLICT, GROUP_POLICY_KEY, undefined, 'none or isolate', `${flavorNumbered} numbered groups (${groups.slice(1, 1 + flavorNumbered).map((g) => g.suffix).join(', ')}) need group_policy=none or group_policy=isolate`);
  }

  const spec: RequestSpec = {
    flavor,
    groups,
    groupPolicy: groupPolicy ?? 'none',
    aggregateExtraSpecs,
    capabilities,
    pluginSpecs,
    hints: opts.hints ?? {},
  };
  if (policy !== undefined) spec.policy = policy;
  return spec;
}

/**
 * `member_of[S]=in:agg1,agg2` or `member_of[S]=agg1`: the providers must be in one of these;
 * `member_of[S]=!agg1` or `!in:agg1,agg2` (Placement 1.32): in none of them.
 */
function parseMemberOf(key: string, raw: string): { forbidden: boolean; aggregates: string[] } {
  const trimmed = raw.trim();
  const forbidden = trimmed.startsWith('!');
  const value = forbidden ? trimmed.slice(1) : trimmed;
  const expected = '[!]in:<aggregate>[,<aggregate>...] or [!]<aggregate>';
  const list = value.startsWith('in:') ? value.slice(3) : value;
  const aggregates = list.split(',').map((a) => a.trim());
  if (aggregates.some((a) => !AGGREGATE_PATTERN.test(a))) throw specError(PlacementErrorCodes.INVALID_VALUE, key, raw, expected);
  if (!value.startsWith('in:') && aggregates.length > 1) throw specError(PlacementErrorCodes.INVALID_VALUE, key, raw, expected, 'several aggregates need the "in:" prefix');
  return { forbidden, aggregates: [...new Set(aggregates)] };
}

/** The explicit `resources[S]:VCPU` and `resources[S]:PCPU` amounts of a flavor, in key order. */
interface CpuAmounts {
  VCPU: Array<{ key: string; raw: string; amount: number }>;
  PCPU: Array<{ key: string; raw: string; amount: number }>;
}

/**
 * Nova's checks of explicit CPU amounts (`numa_get_constraints`, which refuses the flavor at
 * the API): VCPU and PCPU amounts above 0 together are refused ("use one or the other"), and
 * PCPU amounts must add up to the flavor's vcpus (ert has no `hw:emulator_threads_policy`,
 * under which Nova wants one more). ERT_SPEC_CONFLICT naming the first such key.
 */
function checkCpuAmounts(flavor: Flavor, cpu: CpuAmounts): void {
  const asked = (list: CpuAmounts['VCPU']) => list.filter((a) => a.amount > 0);
  const vcpu = asked(cpu.VCPU);
  const pcpu = asked(cpu.PCPU);
  const listed = (list: CpuAmounts['VCPU']) => list.map((a) => `${a.key}=${a.amount}`).join(', ');
  if (vcpu.length > 0 && pcpu.length > 0) {
    const first = vcpu[0]!;
    throw specError(
      PlacementErrorCodes.CONFLICT,
      first.key,
      first.raw,
      'resources[N]:VCPU or resources[N]:PCPU, not both',
      `conflicts with ${listed(pcpu)}: Nova refuses explicit VCPU and PCPU amounts together; use one or the other`,
    );
  }
  const pinned = pcpu.reduce((sum, a) => sum + a.amount, 0);
  if (pcpu.length > 0 && pinned !== flavor.vcpus) {
    const first = pcpu[0]!;
    throw specError(
      PlacementErrorCodes.CONFLICT,
      first.key,
      first.raw,
      `PCPU amounts adding up to the flavor's vcpus (${flavor.vcpus})`,
      `${pcpu.length > 1 ? `with ${listed(pcpu.slice(1))}, ` : ''}${pinned} PCPU for flavor "${flavor.name}" of ${flavor.vcpus} vCPUs: Nova needs exactly flavor.vcpus PCPUs`,
    );
  }
}

/** A plugin's applyResources must leave valid classes and whole positive amounts; zeros are dropped. */
function checkAdjustedResources(key: string, raw: string, resources: Record<ResourceClass, number>, plugin: string | undefined): void {
  for (const [resourceClass, amount] of Object.entries(resources)) {
    if (!isValidResourceClass(resourceClass)) {
      throw specError(PlacementErrorCodes.INVALID_VALUE, key, raw, RESOURCE_CLASS_EXPECTED, `the owning plugin's applyResources produced class "${resourceClass}"`, plugin);
    }
    if (!Number.isSafeInteger(amount) || amount < 0) {
      throw specError(PlacementErrorCodes.INVALID_VALUE, key, raw, 'a non-negative integer amount', `the owning plugin's applyResources produced ${resourceClass}=${String(amount)}`, plugin);
    }
    if (amount === 0) delete resources[resourceClass];
  }
}

/** Numeric suffixes first in numeric order, then the others in code-point order. */
function compareSuffixes(a: string, b: string): number {
  const an = /^\d+$/.test(a);
  const bn = /^\d+$/.test(b);
  if (an && bn) return Number(a) - Number(b) || (a < b ? -1 : a > b ? 1 : 0);
  if (an !== bn) return an ? -1 : 1;
  return a < b ? -1 : a > b ? 1 : 0;
}
