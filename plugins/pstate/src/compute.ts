/**
 * Compute entry of the pstate plugin: reports P-state control as traits (no inventory:
 * frequencies are capabilities, not counted), refuses requests the host cannot honour,
 * and (with enforcement) sets governor, EPP and minimum frequency on an instance's CPUs'
 * policies, restoring the previous values when it goes.
 */
import { writeFile } from 'node:fs/promises';
import {
  definePlugin,
  type ClaimedInstance,
  type ClaimRequest,
  type Discovery,
  type InstanceEvent,
  type JsonValue,
  type ResourceContext,
  type ResourceHooks,
  type TestResult,
} from '@ert/plugin-api';
import { HostFs, formatCpuList, parseCpuList } from '@ert/sysfs';
import { PstateEnforcementError, PstateErrorCode } from './errors.js';
import { readCpufreq, type CpufreqFacts, type Policy } from './hardware.js';
import {
  PLUGIN_NAME,
  TRAIT_CONTROL,
  TRAIT_EPP,
  TRAIT_TURBO,
  asksForPstate,
  extraSpecs,
  governorTrait,
  optionsSchema,
  pstateProblem,
  pstateRequestOf,
  statsSchema,
  type PolicyGroup,
  type PstateOptions,
  type PstateRequest,
  type PstateStats,
} from './shared.js';

/** A policy's values before an instance changed them (kHz for the frequency). */
export interface PreviousSettings {
  cpus: string;
  governor: string;
  scalingMinKhz: number;
  epp: string | null;
}

/** What `test` grants: the requested settings and the policies' values to restore. */
export interface PstateAssignment extends PstateRequest {
  previous: PreviousSettings[];
}

const mhz = (khz: number): number => Math.round(khz / 1000);

/** Summarise cpufreq facts as stats v1 (also the capabilities both sides check requests against). */
export function statsOf(facts: CpufreqFacts): PstateStats {
  const { policies } = facts;
  const governors = policies[0]!.governors.filter((g) => policies.every((p) => p.governors.includes(g)));
  const withEpp = policies.every((p) => p.eppValues !== undefined);
  const intelActive = facts.intelPstate?.status === 'active';
  const turbo = facts.intelPstate?.noTurbo !== undefined ? !facts.intelPstate.noTurbo : (facts.boost ?? null);
  return {
    available: true,
    driver: [...new Set(policies.map((p) => p.driver))].join(','),
    intelPstate: facts.intelPstate ? { status: facts.intelPstate.status, noTurbo: facts.intelPstate.noTurbo ?? null } : null,
    control: intelActive || policies.some((p) => p.writable && p.governors.length > 1),
    governors,
    minFreqMhz: mhz(Math.max(...policies.map((p) => p.cpuinfoMinKhz))),
    maxFreqMhz: mhz(Math.min(...policies.map((p) => p.cpuinfoMaxKhz))),
    baseFreqMhz: policies.every((p) => p.baseKhz !== undefined) ? mhz(Math.min(...policies.map((p) => p.baseKhz!))) : null,
    epp: withEpp
      ? {
          available: policies[0]!.eppValues!.filter((v) => policies.every((p) => p.eppValues!.includes(v))),
          current: [...new Set(policies.map((p) => p.epp!))],
        }
      : null,
    turbo,
    policies: groupPolicies(policies),
  };
}

/** Policies whose `valueOf` is identical, as one entry each with their CPUs. */
function groupByValue<T extends object>(policies: Policy[], valueOf: (p: Policy) => T): Array<{ cpus: string } & T> {
  const groups = new Map<string, { value: T; cpus: number[] }>();
  for (const p of policies) {
    const value = valueOf(p);
    const key = JSON.stringify(value);
    const entry = groups.get(key) ?? { value, cpus: [] };
    entry.cpus.push(...p.cpus);
    groups.set(key, entry);
  }
  return [...groups.values()].map(({ value, cpus }) => ({ cpus: formatCpuList(cpus), ...value }));
}

function groupPolicies(policies: Policy[]): PolicyGroup[] {
  return groupByValue(policies, (p) => ({
    driver: p.driver,
    governor: p.governor,
    minFreqMhz: mhz(p.cpuinfoMinKhz),
    maxFreqMhz: mhz(p.cpuinfoMaxKhz),
    scalingMinMhz: mhz(p.scalingMinKhz),
    scalingMaxMhz: mhz(p.scalingMaxKhz),
    epp: p.epp ?? null,
  }));
}

function unavailableStats(reason: string): PstateStats {
  return {
    available: false,
    reason,
    driver: null,
    intelPstate: null,
    control: false,
    governors: [],
    minFreqMhz: null,
    maxFreqMhz: null,
    baseFreqMhz: null,
    epp: null,
    turbo: null,
    policies: [],
  };
}

function resource(ctx: ResourceContext<PstateOptions>): ResourceHooks<PstateStats> {
  const fs = new HostFs(ctx.root);
  let facts: CpufreqFacts | undefined;
  let current: PstateStats = unavailableStats('not discovered yet');

  async function discover(): Promise<Discovery> {
    const read = await readCpufreq(fs);
    facts = read.value;
    current = read.value ? statsOf(read.value) : unavailableStats(read.problem);
    if (!current.available) {
      ctx.logger.info({ reason: current.reason }, 'pstate: no P-state control');
      return { available: false, reason: current.reason! };
    }
    const traits: string[] = [];
    if (current.control) traits.push(TRAIT_CONTROL, ...current.governors.map(governorTrait));
    if (current.turbo) traits.push(TRAIT_TURBO);
    if (current.epp) traits.push(TRAIT_EPP);
    return { available: true, host: { traits } };
  }

  function test(request: ClaimRequest): TestResult {
    const wanted = pstateRequestOf(request.spec);
    if (!asksForPstate(wanted)) return undefined;
    const problem = pstateProblem(current, wanted);
    if (problem !== undefined) return problem;
    // The values as the policies hold them now (exact kHz), to write back at release.
    const previous: PreviousSettings[] = groupByValue(facts!.policies, (p) => ({
      governor: p.governor,
      scalingMinKhz: p.scalingMinKhz,
      epp: p.epp ?? null,
    }));
    const assignment: PstateAssignment = { ...wanted, previous };
    return { assignment: assignment as unknown as JsonValue };
  }

  /**
   * The cpufreq policies covering an instance's pinned CPUs. Throws for an instance that is
   * not pinned (`ClaimedInstance.cpus` unset): its vCPUs float over shared CPUs, and changing
   * their governor would change it for every other tenant on them.
   */
  function policiesOf(instance: ClaimedInstance): Policy[] {
    const cpus = instance.cpus;
    if (!cpus || cpus.length === 0) {
      throw new PstateEnforcementError(
        PstateErrorCode.cpusUnknown,
        `pstate: instance ${instance.uuid} is not pinned to host CPUs (e.g. hw:cpu_policy=dedicated); its vCPUs share CPUs with other instances, whose governor it must not change; no policy set`,
        { instance: instance.uuid },
      );
    }
    return (facts?.policies ?? []).filter((p) => p.cpus.some((cpu) => cpus.includes(cpu)));
  }

  async function write(file: string, value: string, uuid: string): Promise<void> {
    try {
      await writeFile(fs.resolve(file), `${value}\n`);
    } catch (err) {
      throw new PstateEnforcementError(PstateErrorCode.enforceFailed, `pstate: writing "${value}" to ${file} failed: ${(err as Error).message}`, { instance: uuid, file }, err);
    }
  }

  /** Set the instance's settings; governor first (intel_pstate refuses some EPP values under another governor). */
  async function apply(instance: ClaimedInstance): Promise<void> {
    const settings = assignmentOf(instance);
    if (!settings) return;
    for (const policy of policiesOf(instance)) {
      if (settings.governor !== undefined) await write(`${policy.dir}/scaling_governor`, settings.governor, instance.uuid);
      if (settings.epp !== undefined) await write(`${policy.dir}/energy_performance_preference`, settings.epp, instance.uuid);
      if (settings.minFreqMhz !== undefined) await write(`${policy.dir}/scaling_min_freq`, String(settings.minFreqMhz * 1000), instance.uuid);
    }
  }

  /** Write back the values recorded in the assignment, for the settings the instance changed. */
  async function restore(instance: ClaimedInstance): Promise<void> {
    const settings = assignmentOf(instance);
    if (!settings) return;
    for (const policy of policiesOf(instance)) {
      const prev = settings.previous.find((p) => parseCpuList(p.cpus).includes(policy.cpus[0]!));
      if (!prev) {
        ctx.logger.warn({ instance: instance.uuid, policy: policy.dir }, 'pstate: no recorded value to restore');
        continue;
      }
      if (settings.governor !== undefined) await write(`${policy.dir}/scaling_governor`, prev.governor, instance.uuid);
      if (settings.epp !== undefined && prev.epp !== null) await write(`${policy.dir}/energy_performance_preference`, prev.epp, instance.uuid);
      if (settings.minFreqMhz !== undefined) await write(`${policy.dir}/scaling_min_freq`, String(prev.scalingMinKhz), instance.uuid);
    }
  }

  async function enforce(event: InstanceEvent): Promise<void> {
    // The tracker calls this only with enforcement on; checking again keeps a host that
    // did not opt in from ever being written to, whoever calls.
    if (!ctx.enforce) return;
    switch (event.type) {
      case 'claimed':
      case 'updated':
        return apply(event.instance);
      case 'resized':
        if (event.previous) await restore(event.previous);
        return apply(event.instance);
      case 'released':
        return restore(event.instance);
    }
  }

  return { discover, test, stats: () => current, enforce };
}

/** The settings recorded for an instance, or undefined when it asked for none. */
function assignmentOf(instance: ClaimedInstance): PstateAssignment | undefined {
  const a = instance.assignment as Partial<PstateAssignment> | null | undefined;
  if (!a || typeof a !== 'object' || !Array.isArray(a.previous)) return undefined;
  return asksForPstate(a) ? (a as PstateAssignment) : undefined;
}

/** The pstate plugin's compute entry. */
export default definePlugin<PstateOptions, PstateStats>({
  name: PLUGIN_NAME,
  optionsSchema,
  stats: statsSchema,
  extraSpecs,
  resource,
});
