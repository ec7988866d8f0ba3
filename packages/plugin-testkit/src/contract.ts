/**
 * The plugin contract as runnable checks. Each check builds the plugin afresh through its
 * factories (with the kit's contexts) and drives its hooks the way the tracker or the
 * scheduler would; a broken rule throws a `ContractViolation` naming the plugin, the
 * check and what was seen.
 *
 * `describePluginContract(plugin, fixture, { describe, it })` registers one test per check
 * with the caller's test runner (vitest, jest or `node:test`: the kit does not import one);
 * `verifyPluginContract` runs them all and returns a report instead.
 */
import { lstat, mkdtemp, readdir, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { isDeepStrictEqual } from 'node:util';
import { extraSpecKeyProblem } from '@ert/placement';
import {
  capacityOf,
  exclusionReason,
  inventoryProblem,
  isErtError,
  isPlugin,
  isValidResourceClass,
  isValidTraitName,
  kindsOf,
  messageOf,
  normalizeInventory,
  type ClaimRequest,
  type ConsumerHooks,
  type Discovery,
  type Flavor,
  type FilterHooks,
  type HostState,
  type Placement,
  type PluginDefinition,
  type RequestSpec,
  type ResourceHooks,
  type TestResult,
  type WeigherHooks,
} from '@ert/plugin-api';
import { optionsWithDefaults, pluginContext, resourceContext } from './context.js';
import { ContractViolation, TestkitErrorCodes } from './errors.js';
import { hostState, hostStateFromDiscovery, type HostStateInit } from './host-state.js';
import { claimRequest, claimedInstance, requestSpec, requestedResources, specFromFlavor, testUuid } from './requests.js';
import { statsProblems, statsValidator } from './stats.js';

/** Any plugin definition (as `definePlugin` returns it). */
export type AnyPlugin = PluginDefinition<any, any, any>;

/** Where and how to run the contract. */
export interface ContractFixture<Options = unknown> {
  /** The directory standing for `/`: a host profile (`config/hosts/<name>`) or a `writeHostTree` root. */
  root: string;
  /** The plugin's options, before defaults. */
  options?: Partial<Options>;
  /** The host name the contexts and claimed instances use (default `compute-1`). */
  hostName?: string;
  /**
   * Requests to test, claim and release: flavors (parsed with the plugin's extra-spec keys,
   * as the host would) or specs. Default: one spec asking for the smallest amount of every
   * class the plugin's discovery reports. At least one should fit an empty host.
   */
  requests?: ReadonlyArray<Flavor | RequestSpec>;
  /**
   * For a scheduler entry: the compute entry whose discovery and stats on `root` make the
   * host state and the stats `consume` reads. Not needed when the plugin is both.
   */
  compute?: AnyPlugin;
  /** Stats for `consume` when there is no compute entry to produce them. */
  stats?: unknown;
  /** The host state scheduler hooks see when there is no compute entry (a default one otherwise). */
  host?: HostStateInit;
  /**
   * False for a plugin that reads nothing below the root (always available): the
   * unreadable-root check then only requires that nothing throws an unnamed error.
   */
  readsRoot?: boolean;
  /** A root that cannot be read (default: a path that does not exist, then an empty directory). */
  unreadableRoot?: string;
  /** Compare the files below `root` before and after the hooks ran (default true). */
  watchHostFiles?: boolean;
}

/** The checks, by id, with the rule each one holds the plugin to. */
export const CONTRACT_CHECKS = {
  definition: 'is a definePlugin object whose extra-spec keys, stats schema and options schema the host accepts',
  'discover-idempotent': 'discover is idempotent: twice, and on a fresh instance, the same result and stats',
  'discovery-well-formed': 'discover reports valid classes, inventories, traits and child providers, as data',
  'stats-valid': 'stats are valid against the declared schema, after discovery and with an instance held',
  'test-read-only': 'test does not change the view: stats and answers identical before and after',
  'test-answers-well-formed': 'test answers nothing, a reason or a ClaimGrant of data (allocations, cpus, units, pools)',
  'add-remove-symmetric': 'addInstance then removeInstance (or reset) brings stats and answers back to the start; both idempotent',
  'host-untouched': 'discover, test, addInstance, removeInstance, stats and close change no file below the root',
  'unavailable-not-thrown': 'an unreadable root gives { available: false, reason }; other hooks fail only with named ErtErrors',
  'scheduler-sync': 'consume, placed, appliesTo, filter and weigh are synchronous and return what the API says',
  'scheduler-pure': 'scheduler hooks are pure: the same inputs give the same answers and are not modified',
} as const;

/** The id of one of `CONTRACT_CHECKS` (`discover-idempotent`, ...). */
export type ContractCheckId = keyof typeof CONTRACT_CHECKS;

/** One runnable check. */
export interface ContractCheck {
  /** Which rule it checks. */
  id: ContractCheckId;
  /** `<id>: <rule>`, the test's name. */
  title: string;
  /** Resolves when the plugin honours the rule; rejects with a ContractViolation otherwise. */
  run(): Promise<void>;
}

/** The part of a test runner the kit needs (vitest's, jest's and `node:test`'s have it). */
export interface ContractRunner {
  /** Group tests: called once, with `plugin <name> honours the plugin contract`. */
  describe(name: string, fn: () => void): unknown;
  /** Register one test per check, named by the check's title; `fn` rejects when the plugin breaks the rule. */
  it(name: string, fn: () => Promise<void>): unknown;
}

/** One line of `verifyPluginContract`'s report. */
export interface ContractResult {
  /** The check's id. */
  id: ContractCheckId;
  /** The check's title (`<id>: <rule>`). */
  title: string;
  /** The violation's message; undefined when the check passed. */
  problem?: string;
  /** What the check threw (usually a ContractViolation); undefined when it passed. */
  error?: unknown;
}

const SHOW = 400;
/** A value in a message: JSON, cut at a few hundred characters. */
function show(value: unknown): string {
  let text: string;
  try {
    text = value === undefined ? 'undefined' : (JSON.stringify(value) ?? String(value));
  } catch {
    text = String(value);
  }
  return text.length > SHOW ? `${text.slice(0, SHOW)}...` : text;
}

function isThenable(value: unknown): value is PromiseLike<unknown> {
  return (typeof value === 'object' || typeof value === 'function') && value !== null && typeof (value as { then?: unknown }).then === 'function';
}

/** The plugin's hooks, a fresh instance each time. */
interface Harness {
  plugin: AnyPlugin;
  fixture: ContractFixture<any>;
  hostName: string;
  /** The requests to claim with, cached after the first discovery on the fixture. */
  samples?: RequestSpec[];
  /**
   * Requests that only watch the view: per class reported, as much as its inventory holds
   * plus one (capped at max_unit), alone. A view that holds an instance answers them
   * differently (a refusal names what is free), so they show views that did not go back.
   */
  probes?: RequestSpec[];
}

class Violations {
  constructor(
    private readonly h: Harness,
    private readonly check: ContractCheckId,
  ) {}

  fail(problem: string, details: Record<string, unknown> = {}): never {
    throw new ContractViolation(TestkitErrorCodes.CONTRACT_VIOLATION, `plugin "${this.h.plugin.name}" breaks "${this.check}" (${CONTRACT_CHECKS[this.check]}): ${problem}`, {
      plugin: this.h.plugin.name,
      check: this.check,
      ...details,
    });
  }

  equal(actual: unknown, expected: unknown, what: string): void {
    if (!isDeepStrictEqual(actual, expected)) this.fail(`${what}: ${show(actual)} instead of ${show(expected)}`);
  }

  /** Run a hook; a throw becomes a violation naming it. */
  async call<T>(hook: string, fn: () => T | Promise<T>): Promise<T> {
    try {
      return await fn();
    } catch (err) {
      if (err instanceof ContractViolation) throw err;
      return this.fail(`${hook} threw: ${messageOf(err)}`, { hook, cause: err });
    }
  }
}

async function resourceHooks(h: Harness, v: Violations, root = h.fixture.root, plugin: AnyPlugin = h.plugin): Promise<ResourceHooks> {
  const ctx = resourceContext(plugin, root, { options: h.fixture.options, hostName: h.hostName });
  return v.call('resource (the factory)', () => plugin.resource!(ctx));
}

async function closeQuietly(hooks: ResourceHooks | undefined): Promise<void> {
  try {
    await hooks?.close?.();
  } catch {
    // close failures are not what these checks are about
  }
}

function toSpec(h: Harness, v: Violations, request: Flavor | RequestSpec): RequestSpec {
  if ('groups' in request) return request;
  try {
    return specFromFlavor(request, [h.plugin, ...(h.fixture.compute ? [h.fixture.compute] : [])]);
  } catch (err) {
    return v.fail(`the fixture's flavor "${request.name}" does not parse with the plugin's extra-spec keys: ${messageOf(err)}`);
  }
}

/** The smallest amount of `inventory` a request may ask for. */
function smallest(inventory: { minUnit?: number; stepSize?: number; total: number }): number {
  const inv = normalizeInventory(inventory);
  return Math.ceil(Math.max(inv.minUnit, 1) / inv.stepSize) * inv.stepSize;
}

/** The fixture's requests, or one asking for the smallest amount of every class `discovery` reports. */
function samplesFrom(h: Harness, v: Violations, discovery: Discovery | undefined): RequestSpec[] {
  if (h.fixture.requests && h.fixture.requests.length > 0) return h.fixture.requests.map((r) => toSpec(h, v, r));
  const resources: Record<string, number> = {};
  if (discovery?.available) {
    for (const provider of [discovery.host ?? {}, ...(discovery.children ?? [])]) {
      for (const [cls, inv] of Object.entries(provider.inventories ?? {})) resources[cls] ??= smallest(inv);
    }
  }
  return [requestSpec(resources)];
}

function probesFrom(discovery: Discovery | undefined): RequestSpec[] {
  const probes: RequestSpec[] = [];
  if (!discovery?.available) return probes;
  const seen = new Set<string>();
  for (const provider of [discovery.host ?? {}, ...(discovery.children ?? [])]) {
    for (const [cls, input] of Object.entries(provider.inventories ?? {})) {
      if (seen.has(cls)) continue;
      seen.add(cls);
      const inv = normalizeInventory(input);
      const amount = Math.min(capacityOf(inv) + 1, inv.maxUnit);
      if (amount >= 1) probes.push(requestSpec({ [cls]: amount }));
    }
  }
  return probes;
}

async function samples(h: Harness, v: Violations): Promise<RequestSpec[]> {
  if (h.samples) return h.samples;
  const producer = h.plugin.resource ? h.plugin : h.fixture.compute;
  let discovery: Discovery | undefined;
  if (producer?.resource) {
    const hooks = await resourceHooks(h, v, h.fixture.root, producer);
    try {
      discovery = await v.call('discover', () => hooks.discover());
    } finally {
      await closeQuietly(hooks);
    }
  }
  h.samples = samplesFrom(h, v, discovery);
  h.probes = probesFrom(discovery);
  return h.samples;
}

/** The samples and then the probes. */
async function watched(h: Harness, v: Violations): Promise<RequestSpec[]> {
  return [...(await samples(h, v)), ...(h.probes ?? [])];
}

/** The view as the host sees it: stats and the answers to every sample request. */
async function fingerprint(v: Violations, hooks: ResourceHooks, specs: readonly RequestSpec[]): Promise<{ stats: unknown; answers: unknown[] }> {
  const stats = hooks.stats ? await v.call('stats', () => hooks.stats!()) : undefined;
  const answers: unknown[] = [];
  for (const [i, spec] of specs.entries()) answers.push(hooks.test ? await v.call('test', () => hooks.test!(claimRequest(spec, { uuid: testUuid(100 + i) }))) : undefined);
  return { stats: structuredClone(stats), answers: structuredClone(answers) };
}

/** The first sample a fresh view accepts, with the answer, or undefined when every sample is refused. */
async function firstAccepted(v: Violations, hooks: ResourceHooks, specs: readonly RequestSpec[]): Promise<{ spec: RequestSpec; answer: TestResult } | undefined> {
  for (const spec of specs) {
    const answer = hooks.test ? await v.call('test', () => hooks.test!(claimRequest(spec))) : undefined;
    if (typeof answer !== 'string') return { spec, answer };
  }
  return undefined;
}

function validateStatsOrFail(h: Harness, v: Violations, data: unknown, when: string): void {
  const problems = statsProblems(h.plugin, data);
  if (problems.length > 0) v.fail(`stats ${when} fail the declared schema${h.plugin.stats ? ` (version ${h.plugin.stats.version})` : ''}: ${problems.join('; ')}`, { problems });
  try {
    structuredClone(data);
  } catch (err) {
    v.fail(`stats ${when} are not plain data (${messageOf(err)})`);
  }
}

/* -------------------------------------- the checks -------------------------------------- */

async function checkDefinition(h: Harness, v: Violations): Promise<void> {
  const p = h.plugin;
  if (!isPlugin(p)) v.fail('not made by definePlugin (the host refuses unbranded objects)');
  if (typeof p.name !== 'string' || p.name.trim() === '') v.fail(`name must be a non-empty string, got ${show(p.name)}`);
  if (kindsOf(p).length === 0) v.fail('provides no kind (none of resource, consumer, filter, weigher is a function)');
  const seen = new Set<string>();
  for (const key of p.extraSpecs ?? []) {
    if (seen.has(key.key)) v.fail(`extra-spec key ${key.key} is declared twice`);
    seen.add(key.key);
    const problem = extraSpecKeyProblem(key);
    if (problem) v.fail(`extra-spec key ${key.key}: ${problem}`);
  }
  if (p.stats !== undefined) {
    if (!Number.isSafeInteger(p.stats.version) || p.stats.version < 1) v.fail(`stats.version must be a positive integer, got ${show(p.stats.version)}`);
    try {
      statsValidator(p.stats);
    } catch (err) {
      v.fail(`the stats schema does not compile: ${messageOf(err)}`);
    }
  }
  try {
    optionsWithDefaults(p, h.fixture.options);
  } catch (err) {
    v.fail(`the fixture's options are refused: ${messageOf(err)}`);
  }
}

async function checkDiscoverIdempotent(h: Harness, v: Violations): Promise<void> {
  const hooks = await resourceHooks(h, v);
  const fresh = await resourceHooks(h, v);
  try {
    const first = structuredClone(await v.call('discover', () => hooks.discover()));
    const firstStats = hooks.stats && first.available ? structuredClone(await v.call('stats', () => hooks.stats!())) : undefined;
    const second = await v.call('discover', () => hooks.discover());
    v.equal(second, first, 'the second discover differs from the first');
    if (hooks.stats && first.available) v.equal(await v.call('stats', () => hooks.stats!()), firstStats, 'stats after a second discover differ');
    v.equal(await v.call('discover', () => fresh.discover()), first, "a fresh instance's discover differs from the first instance's");
  } finally {
    await closeQuietly(hooks);
    await closeQuietly(fresh);
  }
}

function inventoryCheck(v: Violations, where: string, inventories: Record<string, unknown> | undefined): void {
  for (const [cls, raw] of Object.entries(inventories ?? {})) {
    if (!isValidResourceClass(cls)) v.fail(`${where}: ${cls} is neither a standard resource class nor CUSTOM_[A-Z0-9_]+`);
    const input = raw as { total?: unknown };
    if (typeof input !== 'object' || input === null || typeof input.total !== 'number') v.fail(`${where}: inventory of ${cls} has no numeric total: ${show(raw)}`);
    const problem = inventoryProblem(normalizeInventory(input as { total: number }));
    if (problem) v.fail(`${where}: inventory of ${cls}: ${problem}`);
  }
}

async function checkDiscoveryWellFormed(h: Harness, v: Violations): Promise<void> {
  const hooks = await resourceHooks(h, v);
  try {
    const d = await v.call('discover', () => hooks.discover());
    if (typeof d !== 'object' || d === null) v.fail(`discover returned ${show(d)}, not a Discovery`);
    try {
      structuredClone(d);
    } catch (err) {
      v.fail(`the discovery is not plain data (${messageOf(err)}): it could not cross to an isolated worker`);
    }
    if (typeof d.available !== 'boolean') v.fail(`available must be a boolean, got ${show(d.available)}`);
    if (d.reason !== undefined && typeof d.reason !== 'string') v.fail(`reason must be a string, got ${show(d.reason)}`);
    const providers = [{ where: 'host', p: d.host }, ...(d.children ?? []).map((c) => ({ where: `child ${show(c.key)}`, p: c }))];
    if (!d.available) {
      if (typeof d.reason !== 'string' || d.reason.trim() === '') v.fail('unavailable without a reason');
      for (const { where, p } of providers) {
        if (p?.inventories && Object.keys(p.inventories).length > 0) v.fail(`unavailable but ${where} reports inventories (no inventory rather than zero)`);
      }
      return;
    }
    const keys = new Set<string>();
    for (const child of d.children ?? []) {
      if (typeof child.key !== 'string' || !/^[a-z0-9_]+$/.test(child.key)) v.fail(`child key ${show(child.key)} is not [a-z0-9_]+`);
      if (keys.has(child.key)) v.fail(`child key ${child.key} is reported twice`);
      keys.add(child.key);
    }
    for (const child of d.children ?? []) {
      if (child.parent !== undefined && !keys.has(child.parent)) v.fail(`child ${child.key} names parent ${show(child.parent)}, which is not one of its children`);
      // Parents must lead to the root: no cycle.
      const seen = new Set<string>([child.key]);
      for (let parent = child.parent; parent !== undefined; parent = d.children!.find((c) => c.key === parent)?.parent) {
        if (seen.has(parent)) v.fail(`child ${child.key}'s parents form a cycle through ${parent}`);
        seen.add(parent);
      }
    }
    for (const { where, p } of providers) {
      inventoryCheck(v, where, p?.inventories);
      for (const trait of p?.traits ?? []) if (!isValidTraitName(trait)) v.fail(`${where}: trait ${show(trait)} is not a valid trait name`);
    }
  } finally {
    await closeQuietly(hooks);
  }
}

async function checkStatsValid(h: Harness, v: Violations): Promise<void> {
  const specs = await samples(h, v);
  const hooks = await resourceHooks(h, v);
  try {
    if (!hooks.stats) return; // nothing is written for a plugin without stats
    const d = await v.call('discover', () => hooks.discover());
    if (!d.available) v.fail(`the fixture's root leaves the plugin unavailable (${d.reason ?? 'no reason'}): give a root it can read`);
    validateStatsOrFail(h, v, await v.call('stats', () => hooks.stats!()), 'after discovery');
    const accepted = await firstAccepted(v, hooks, specs);
    if (accepted && hooks.addInstance) {
      await v.call('addInstance', () => hooks.addInstance!(claimedInstance(accepted.spec, { grant: accepted.answer, discovery: d, hostName: h.hostName })));
      validateStatsOrFail(h, v, await v.call('stats', () => hooks.stats!()), 'with an instance held');
    }
  } finally {
    await closeQuietly(hooks);
  }
}

async function checkTestReadOnly(h: Harness, v: Violations): Promise<void> {
  const specs = await samples(h, v);
  const all = await watched(h, v);
  const hooks = await resourceHooks(h, v);
  try {
    if (!hooks.test) return; // the host accepts every claim for a plugin without test
    const d = await v.call('discover', () => hooks.discover());
    const phase = async (when: string) => {
      const before = hooks.stats ? structuredClone(await v.call('stats', () => hooks.stats!())) : undefined;
      const answers: unknown[] = [];
      for (const [i, spec] of all.entries()) {
        for (const kind of ['claim', 'resize', 'extend'] as const) answers.push(structuredClone(await v.call('test', () => hooks.test!(claimRequest(spec, { uuid: testUuid(200 + i), kind })))));
      }
      if (hooks.stats) v.equal(await v.call('stats', () => hooks.stats!()), before, `stats after test() ${when} changed`);
      const again: unknown[] = [];
      for (const [i, spec] of all.entries()) {
        for (const kind of ['claim', 'resize', 'extend'] as const) again.push(await v.call('test', () => hooks.test!(claimRequest(spec, { uuid: testUuid(200 + i), kind }))));
      }
      v.equal(again, answers, `test() ${when} answered differently the second time`);
    };
    await phase('on an empty view');
    const accepted = await firstAccepted(v, hooks, specs);
    if (accepted && hooks.addInstance) {
      await v.call('addInstance', () => hooks.addInstance!(claimedInstance(accepted.spec, { grant: accepted.answer, discovery: d, hostName: h.hostName })));
      await phase('with an instance held');
    }
  } finally {
    await closeQuietly(hooks);
  }
}

function grantProblem(answer: unknown): string | undefined {
  if (answer === undefined || typeof answer === 'string') return undefined;
  if (typeof answer !== 'object' || answer === null || Array.isArray(answer)) return `not nothing, a string or a ClaimGrant: ${show(answer)}`;
  const g = answer as Record<string, unknown>;
  const known = new Set(['allocations', 'assignment', 'cpus', 'units', 'pools']);
  const unknown = Object.keys(g).filter((k) => !known.has(k));
  if (unknown.length > 0) return `a ClaimGrant has no field ${unknown.join(', ')}`;
  if (g.allocations !== undefined) {
    if (!Array.isArray(g.allocations)) return 'allocations must be a list';
    for (const a of g.allocations as Array<Record<string, unknown>>) {
      if (typeof a?.resourceClass !== 'string' || !isValidResourceClass(a.resourceClass)) return `allocation ${show(a)} has no valid resourceClass`;
      if (!Number.isSafeInteger(a.amount) || (a.amount as number) < 1) return `allocation ${show(a)} needs a positive integer amount`;
      if (a.provider !== undefined && typeof a.provider !== 'string') return `allocation ${show(a)}: provider must be a child key`;
    }
  }
  if (g.cpus !== undefined) {
    const cpus = g.cpus as unknown[];
    if (!Array.isArray(cpus) || cpus.some((c) => !Number.isSafeInteger(c) || (c as number) < 0) || new Set(cpus).size !== cpus.length) return `cpus must be distinct non-negative integers: ${show(g.cpus)}`;
  }
  if (g.units !== undefined) {
    const units = g.units as unknown[];
    if (!Array.isArray(units) || units.some((u) => typeof u !== 'string' || u === '' || u.length > 200) || new Set(units).size !== units.length) {
      return `units must be distinct non-empty strings of at most 200 characters: ${show(g.units)}`;
    }
  }
  if (g.pools !== undefined) {
    if (typeof g.pools !== 'object' || g.pools === null) return 'pools must be an object';
    for (const [name, pool] of Object.entries(g.pools as Record<string, { amount?: unknown; capacity?: unknown }>)) {
      if (!Number.isSafeInteger(pool?.amount) || (pool.amount as number) < 1 || !Number.isSafeInteger(pool?.capacity) || (pool.capacity as number) < 0) {
        return `pool ${name} needs a positive integer amount and a capacity: ${show(pool)}`;
      }
    }
  }
  if (g.assignment !== undefined && !isDeepStrictEqual(JSON.parse(JSON.stringify(g.assignment) ?? 'null'), g.assignment)) return `assignment is not JSON: ${show(g.assignment)}`;
  return undefined;
}

async function checkTestAnswers(h: Harness, v: Violations): Promise<void> {
  const specs = await samples(h, v);
  const hooks = await resourceHooks(h, v);
  try {
    if (!hooks.test) return;
    await v.call('discover', () => hooks.discover());
    for (const spec of specs) {
      for (const kind of ['claim', 'resize'] as const) {
        const request: ClaimRequest = claimRequest(spec, { kind });
        const answer = await v.call('test', () => hooks.test!(request));
        const problem = grantProblem(answer);
        if (problem) v.fail(`test(${kind} of ${show(requestedResources(spec))}) answered ${problem}`);
        try {
          structuredClone(answer);
        } catch (err) {
          v.fail(`test's answer is not plain data (${messageOf(err)})`);
        }
      }
    }
  } finally {
    await closeQuietly(hooks);
  }
}

async function checkAddRemoveSymmetric(h: Harness, v: Violations): Promise<void> {
  const specs = await samples(h, v);
  const all = await watched(h, v);
  const hooks = await resourceHooks(h, v);
  try {
    const d = await v.call('discover', () => hooks.discover());
    if (!d.available) v.fail(`the fixture's root leaves the plugin unavailable (${d.reason ?? 'no reason'}): give a root it can read`);
    const start = await fingerprint(v, hooks, all);
    const accepted = await firstAccepted(v, hooks, specs);
    if (!accepted) v.fail(`a fresh view refused every sample request (${show(start.answers)}): give fixture requests that fit an empty host`);
    const uuid = testUuid(42);
    const instance = claimedInstance(accepted.spec, { uuid, grant: accepted.answer, discovery: d, hostName: h.hostName });
    const add = () => (hooks.addInstance ? v.call('addInstance', () => hooks.addInstance!(structuredClone(instance))) : undefined);
    const remove = (id: string) => (hooks.removeInstance ? v.call('removeInstance', () => hooks.removeInstance!(id)) : undefined);

    await add();
    const held = await fingerprint(v, hooks, all);
    await add();
    v.equal(await fingerprint(v, hooks, all), held, 'addInstance twice for one uuid is not the same as once (must be idempotent)');
    await remove(uuid);
    v.equal(await fingerprint(v, hooks, all), start, 'after addInstance and removeInstance the view is not back at the start');
    await remove(uuid);
    await remove(testUuid(4242));
    v.equal(await fingerprint(v, hooks, all), start, 'removeInstance of a removed or unknown uuid changed the view (must be ignored)');
    if (hooks.reset) {
      await add();
      await v.call('reset', () => hooks.reset!());
      v.equal(await fingerprint(v, hooks, all), start, 'after addInstance and reset the view is not back at the start');
      await add();
      v.equal(await fingerprint(v, hooks, all), held, 're-adding the instance after reset does not give the view it had');
    }
  } finally {
    await closeQuietly(hooks);
  }
}

/** Every file and directory below `root` with its type, size and modification time. */
async function snapshot(root: string): Promise<Map<string, string>> {
  const out = new Map<string, string>();
  const entries = await readdir(root, { recursive: true }).catch(() => [] as string[]);
  for (const entry of entries) {
    const s = await lstat(path.join(root, entry)).catch(() => undefined);
    if (s) out.set(entry, `${s.isDirectory() ? 'dir' : s.isSymbolicLink() ? 'link' : 'file'}:${s.isDirectory() ? 0 : s.size}:${s.mtimeMs}`);
  }
  return out;
}

async function checkHostUntouched(h: Harness, v: Violations): Promise<void> {
  const specs = await samples(h, v);
  const before = await snapshot(h.fixture.root);
  const hooks = await resourceHooks(h, v);
  try {
    const d = await v.call('discover', () => hooks.discover());
    if (hooks.stats && d.available) await v.call('stats', () => hooks.stats!());
    const accepted = await firstAccepted(v, hooks, specs);
    if (accepted) {
      const instance = claimedInstance(accepted.spec, { grant: accepted.answer, discovery: d, hostName: h.hostName });
      if (hooks.addInstance) await v.call('addInstance', () => hooks.addInstance!(instance));
      if (hooks.stats && d.available) await v.call('stats', () => hooks.stats!());
      if (hooks.removeInstance) await v.call('removeInstance', () => hooks.removeInstance!(instance.uuid));
    }
    if (hooks.reset) await v.call('reset', () => hooks.reset!());
  } finally {
    await closeQuietly(hooks);
  }
  const after = await snapshot(h.fixture.root);
  const changed = [...new Set([...before.keys(), ...after.keys()])].filter((p) => before.get(p) !== after.get(p)).sort();
  if (changed.length > 0) v.fail(`files below the root changed (only enforce may write): ${changed.slice(0, 10).join(', ')}${changed.length > 10 ? ', ...' : ''}`, { changed });
}

/** Run a hook on an unavailable plugin: a throw must be a named ErtError. */
async function namedOnly<T>(v: Violations, hook: string, fn: () => T | Promise<T>): Promise<{ value?: T; threw: boolean }> {
  try {
    return { value: await fn(), threw: false };
  } catch (err) {
    if (isErtError(err) && err.code !== '') return { threw: true };
    const kind = err instanceof Error ? err.name : typeof err;
    return v.fail(`${hook} threw ${kind} "${messageOf(err)}" on an unreadable root: failures must be ErtErrors with a code (or a reason, for discover)`, { hook });
  }
}

async function checkUnavailable(h: Harness, v: Violations): Promise<void> {
  const specs = await samples(h, v);
  const roots = h.fixture.unreadableRoot !== undefined ? [h.fixture.unreadableRoot] : [path.join(os.tmpdir(), `ert-testkit-missing-${process.pid}-${Date.now()}`), await emptyDir()];
  try {
    for (const root of roots) {
      const ctx = resourceContext(h.plugin, root, { options: h.fixture.options, hostName: h.hostName });
      let hooks: ResourceHooks;
      try {
        hooks = await h.plugin.resource!(ctx);
      } catch (err) {
        return v.fail(`the factory threw on the unreadable root ${root}: ${messageOf(err)} (read the hardware in discover, and report what is missing there)`);
      }
      try {
        let d: Discovery;
        try {
          d = await hooks.discover();
        } catch (err) {
          return v.fail(`discover threw on the unreadable root ${root} (${messageOf(err)}) instead of returning { available: false, reason }`);
        }
        if (h.fixture.readsRoot !== false) {
          if (d?.available !== false) v.fail(`discover on the unreadable root ${root} reported available: ${show(d?.available)}`);
          if (typeof d.reason !== 'string' || d.reason.trim() === '') v.fail(`discover on the unreadable root ${root} gave no reason`);
        }
        if (hooks.stats) {
          const s = await namedOnly(v, 'stats', () => hooks.stats!());
          if (!s.threw) validateStatsOrFail(h, v, s.value, 'on an unreadable root');
        }
        for (const spec of specs) {
          const answer = await namedOnly(v, 'test', () => hooks.test?.(claimRequest(spec)));
          if (!answer.threw) {
            const problem = grantProblem(answer.value);
            if (problem) v.fail(`test on an unreadable root answered ${problem}`);
          }
          const instance = claimedInstance(spec, { hostName: h.hostName });
          await namedOnly(v, 'addInstance', () => hooks.addInstance?.(instance));
          await namedOnly(v, 'removeInstance', () => hooks.removeInstance?.(instance.uuid));
        }
        await namedOnly(v, 'reset', () => hooks.reset?.());
      } finally {
        await closeQuietly(hooks);
      }
    }
  } finally {
    if (h.fixture.unreadableRoot === undefined) await rm(roots[1]!, { recursive: true, force: true });
  }
}

async function emptyDir(): Promise<string> {
  return mkdtemp(path.join(os.tmpdir(), 'ert-testkit-empty-'));
}

/** The scheduler side as the scheduler builds it, and what its hooks are fed. */
interface SchedulerSide {
  consumer?: ConsumerHooks<any, any>;
  filter?: FilterHooks;
  weigher?: WeigherHooks;
  stats: unknown;
  host: HostState;
  specs: RequestSpec[];
}

async function schedulerSide(h: Harness, v: Violations): Promise<SchedulerSide> {
  const p = h.plugin;
  const ctx = () => pluginContext(p, { options: h.fixture.options });
  const consumer = p.consumer ? await v.call('consumer (the factory)', () => p.consumer!(ctx())) : undefined;
  const filter = p.filter ? await v.call('filter (the factory)', () => p.filter!(ctx())) : undefined;
  const weigher = p.weigher ? await v.call('weigher (the factory)', () => p.weigher!(ctx())) : undefined;
  const producer = p.resource ? p : h.fixture.compute;
  let stats = h.fixture.stats;
  const base: HostStateInit = { name: h.hostName, ...h.fixture.host };
  let discovery: Discovery | undefined;
  if (producer?.resource) {
    const hooks = await resourceHooks(h, v, h.fixture.root, producer);
    try {
      discovery = await v.call('discover', () => hooks.discover());
      if (discovery.available && hooks.stats) {
        const produced = await v.call('stats', () => hooks.stats!());
        // Stats that fail the schema are refused at the writer: the scheduler never reads them.
        stats = statsProblems(producer, produced).length === 0 ? produced : undefined;
      }
    } finally {
      await closeQuietly(hooks);
    }
  }
  const build = (pluginData: Record<string, unknown>) => (discovery ? hostStateFromDiscovery(discovery, { ...base, pluginData }) : hostState({ ...base, pluginData }));
  let host = build({});
  if (consumer) {
    const data = consumer.consume(structuredClone(stats), host);
    if (!isThenable(data) && exclusionReason(data) === undefined) host = build({ [p.name]: data });
    else if (isThenable(data)) Promise.resolve(data).catch(() => undefined);
  }
  const specs = await samples(h, v);
  return { consumer, filter, weigher, stats, host, specs };
}

/** Call a synchronous hook: a promise (or any thenable) is a violation; its rejection is swallowed. */
function syncCall<T>(v: Violations, hook: string, fn: () => T): T {
  let result: T;
  try {
    result = fn();
  } catch (err) {
    return v.fail(`${hook} threw: ${messageOf(err)}`, { hook });
  }
  if (isThenable(result)) {
    Promise.resolve(result).catch(() => undefined);
    v.fail(`${hook} returned a promise: scheduler hooks are synchronous (the scheduler refuses the host)`, { hook });
  }
  return result;
}

function placementOf(spec: RequestSpec, host: HostState): Placement {
  return {
    host: host.name,
    instance: claimRequest(spec, { uuid: testUuid(7) }).instance,
    spec,
    allocations: Object.entries(requestedResources(spec)).map(([resourceClass, amount]) => ({
      providerUuid: host.providers.find((p) => p.inventories[resourceClass] !== undefined)?.uuid ?? host.rootUuid,
      resourceClass,
      amount,
    })),
  };
}

async function checkSchedulerSync(h: Harness, v: Violations): Promise<void> {
  const side = await schedulerSide(h, v);
  const { consumer, filter, weigher, host, specs } = side;
  if (consumer) {
    const reads = consumer.reads as unknown;
    if (!Array.isArray(reads) || reads.length === 0 || reads.some((r) => !Number.isSafeInteger(r) || r < 1)) v.fail(`consumer.reads must list stats versions (positive integers), got ${show(reads)}`);
    if (h.plugin.stats && !(reads as number[]).includes(h.plugin.stats.version)) v.fail(`consumer.reads ${show(reads)} does not include the declared stats version ${h.plugin.stats.version}`);
    const data = syncCall(v, 'consume', () => consumer.consume(structuredClone(side.stats), host));
    syncCall(v, 'consume (no stats: the plugin is unavailable on the host)', () => consumer.consume(undefined, host));
    if (consumer.placed && exclusionReason(data) === undefined) {
      for (const spec of specs) syncCall(v, 'placed', () => consumer.placed!(structuredClone(data), placementOf(spec, host), host));
    }
  }
  for (const [kind, hooks] of [['filter', filter], ['weigher', weigher]] as const) {
    if (!hooks) continue;
    for (const spec of specs) {
      if (hooks.appliesTo) {
        const applies = syncCall(v, `${kind}.appliesTo`, () => hooks.appliesTo!(spec));
        if (typeof applies !== 'boolean') v.fail(`${kind}.appliesTo returned ${show(applies)}, not a boolean`);
        if (!applies) continue;
      }
      if (kind === 'filter') {
        const answer = syncCall(v, 'filter', () => (hooks as FilterHooks).filter(host, spec));
        if (answer !== undefined && typeof answer !== 'string') v.fail(`filter returned ${show(answer)}: nothing (pass) or a reason string`);
      } else {
        const score = syncCall(v, 'weigh', () => (hooks as WeigherHooks).weigh(host, spec));
        if (typeof score !== 'number' || !Number.isFinite(score)) v.fail(`weigh returned ${show(score)}, not a finite number`);
      }
    }
  }
}

async function checkSchedulerPure(h: Harness, v: Violations): Promise<void> {
  const side = await schedulerSide(h, v);
  const { consumer, filter, weigher, host, specs } = side;
  // Throws and promises are scheduler-sync's to report: here they only end the comparison.
  const attempt = <T>(fn: () => T): { ok: true; value: T } | { ok: false } => {
    try {
      const value = fn();
      if (!isThenable(value)) return { ok: true, value };
      Promise.resolve(value).catch(() => undefined);
    } catch {
      // reported by scheduler-sync
    }
    return { ok: false };
  };
  const twice = <T>(hook: string, fn: () => T, inputs: unknown[]): T | undefined => {
    const before = structuredClone(inputs);
    const first = attempt(fn);
    const second = attempt(fn);
    if (!isDeepStrictEqual(inputs, before)) v.fail(`${hook} modified its arguments: ${show(inputs)} instead of ${show(before)}`);
    if (!first.ok || !second.ok) return undefined;
    v.equal(second.value, first.value, `${hook} answered differently for the same inputs`);
    return first.value;
  };
  if (consumer) {
    const stats = structuredClone(side.stats);
    const data = twice('consume', () => consumer.consume(stats, host), [stats]);
    if (consumer.placed && exclusionReason(data) === undefined && !isThenable(data)) {
      for (const spec of specs) {
        const placement = placementOf(spec, host);
        twice('placed', () => consumer.placed!(data, placement, host), [data, placement]);
      }
    }
  }
  const slot = structuredClone(host.pluginData(h.plugin.name));
  for (const [kind, hooks] of [['filter', filter], ['weigher', weigher]] as const) {
    if (!hooks) continue;
    for (const spec of specs) {
      if (hooks.appliesTo && !twice(`${kind}.appliesTo`, () => hooks.appliesTo!(spec), [spec])) continue;
      if (kind === 'filter') twice('filter', () => (hooks as FilterHooks).filter(host, spec), [spec]);
      else twice('weigh', () => (hooks as WeigherHooks).weigh(host, spec), [spec]);
      v.equal(host.pluginData(h.plugin.name), slot, `${kind} changed the host state's plugin data`);
    }
  }
}

const RUNS: Record<ContractCheckId, (h: Harness, v: Violations) => Promise<void>> = {
  definition: checkDefinition,
  'discover-idempotent': checkDiscoverIdempotent,
  'discovery-well-formed': checkDiscoveryWellFormed,
  'stats-valid': checkStatsValid,
  'test-read-only': checkTestReadOnly,
  'test-answers-well-formed': checkTestAnswers,
  'add-remove-symmetric': checkAddRemoveSymmetric,
  'host-untouched': checkHostUntouched,
  'unavailable-not-thrown': checkUnavailable,
  'scheduler-sync': checkSchedulerSync,
  'scheduler-pure': checkSchedulerPure,
};

function applies(id: ContractCheckId, plugin: AnyPlugin, fixture: ContractFixture<any>): boolean {
  const resource = typeof plugin.resource === 'function';
  const scheduler = typeof plugin.consumer === 'function' || typeof plugin.filter === 'function' || typeof plugin.weigher === 'function';
  switch (id) {
    case 'definition':
      return true;
    case 'host-untouched':
      return resource && fixture.watchHostFiles !== false;
    case 'scheduler-sync':
    case 'scheduler-pure':
      return scheduler;
    default:
      return resource;
  }
}

/**
 * The checks that apply to `plugin` (resource checks for a compute entry, scheduler checks
 * for a scheduler entry, both for a plugin that is both), each runnable on its own.
 * A resource plugin without a `stats` or `test` hook is checked as the host treats it
 * (no stats written; every claim accepted).
 */
export function pluginContractChecks<O>(plugin: PluginDefinition<O, any, any>, fixture: ContractFixture<O>): ContractCheck[] {
  const h: Harness = { plugin, fixture, hostName: fixture.hostName ?? 'compute-1' };
  return (Object.keys(CONTRACT_CHECKS) as ContractCheckId[])
    .filter((id) => applies(id, plugin, fixture))
    .map((id) => ({
      id,
      title: `${id}: ${CONTRACT_CHECKS[id]}`,
      run: () => RUNS[id](h, new Violations(h, id)),
    }));
}

/** Run every check that applies and report each (problem undefined when it passed). Never throws for a violation. */
export async function verifyPluginContract<O>(plugin: PluginDefinition<O, any, any>, fixture: ContractFixture<O>): Promise<ContractResult[]> {
  const results: ContractResult[] = [];
  for (const check of pluginContractChecks(plugin, fixture)) {
    try {
      await check.run();
      results.push({ id: check.id, title: check.title });
    } catch (error) {
      results.push({ id: check.id, title: check.title, problem: messageOf(error), error });
    }
  }
  return results;
}

/**
 * Register the contract as a test suite with the caller's runner: `describe('plugin <name>
 * honours the plugin contract')` with one `it` per check that applies. The runner is passed
 * in (`{ describe, it }` from vitest, jest's globals or `node:test`), so the kit depends on
 * no test framework.
 */
export function describePluginContract<O>(plugin: PluginDefinition<O, any, any>, fixture: ContractFixture<O>, runner: ContractRunner): void {
  const checks = pluginContractChecks(plugin, fixture);
  runner.describe(`plugin ${plugin.name} honours the plugin contract`, () => {
    for (const check of checks) runner.it(check.title, () => check.run());
  });
}
