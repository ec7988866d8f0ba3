/**
 * Reading cpufreq policies, intel_pstate and boost from sysfs (compute side only).
 * Readers never throw for a missing or garbled file: they return `{ problem }` naming it.
 */
import { access, constants } from 'node:fs/promises';
import type { HostFs } from '@ert/sysfs';

export const CPUFREQ_DIR = '/sys/devices/system/cpu/cpufreq';
export const INTEL_PSTATE_DIR = '/sys/devices/system/cpu/intel_pstate';

export type Read<T> = { value: T; problem?: undefined } | { value?: undefined; problem: string };

/** One cpufreq policy. Frequencies in kHz, as the kernel writes them. */
export interface Policy {
  /** Machine path of the policy directory. */
  dir: string;
  cpus: number[];
  driver: string;
  governor: string;
  governors: string[];
  cpuinfoMinKhz: number;
  cpuinfoMaxKhz: number;
  scalingMinKhz: number;
  scalingMaxKhz: number;
  baseKhz?: number;
  epp?: string;
  eppValues?: string[];
  /** Whether this process may write scaling_governor. */
  writable: boolean;
}

export interface CpufreqFacts {
  policies: Policy[];
  intelPstate?: { status: string; noTurbo?: boolean };
  /** cpufreq/boost (acpi-cpufreq, amd-pstate), when present. */
  boost?: boolean;
}

const NAME = /^[a-z][a-z0-9_-]*$/;

/** Read every policy; a problem when cpufreq is absent or any policy file is missing or garbled. */
export async function readCpufreq(fs: HostFs): Promise<Read<CpufreqFacts>> {
  const entries = await fs.list(CPUFREQ_DIR);
  if (!entries) return { problem: `no cpufreq (no ${CPUFREQ_DIR})` };
  const names = entries.filter((e) => /^policy\d+$/.test(e));
  if (names.length === 0) return { problem: `no cpufreq policies in ${CPUFREQ_DIR}` };

  // Policies are read concurrently; the first problem in policy order is reported.
  const policies: Policy[] = [];
  for (const policy of await Promise.all(names.map((name) => readPolicy(fs, `${CPUFREQ_DIR}/${name}`)))) {
    if (policy.problem !== undefined) return policy;
    policies.push(policy.value);
  }

  const facts: CpufreqFacts = { policies };
  const status = await fs.text(`${INTEL_PSTATE_DIR}/status`);
  if (status !== undefined) {
    const noTurbo = await fs.int(`${INTEL_PSTATE_DIR}/no_turbo`);
    facts.intelPstate = { status: status.trim(), ...(noTurbo === undefined ? {} : { noTurbo: noTurbo !== 0 }) };
  }
  const boost = await fs.int(`${CPUFREQ_DIR}/boost`);
  if (boost !== undefined) facts.boost = boost !== 0;
  return { value: facts };
}

async function readPolicy(fs: HostFs, dir: string): Promise<Read<Policy>> {
  const word = async (file: string): Promise<string | string[]> => {
    const text = (await fs.text(`${dir}/${file}`))?.trim();
    return text !== undefined && NAME.test(text) ? text : [`${dir}/${file} is missing or not a name (got ${JSON.stringify(text)})`];
  };
  const khz = async (file: string): Promise<number | string[]> => {
    const value = await fs.int(`${dir}/${file}`);
    return value !== undefined && value > 0 ? value : [`${dir}/${file} is missing or not a frequency in kHz`];
  };
  const driver = await word('scaling_driver');
  const governor = await word('scaling_governor');
  const cpuinfoMinKhz = await khz('cpuinfo_min_freq');
  const cpuinfoMaxKhz = await khz('cpuinfo_max_freq');
  const scalingMinKhz = await khz('scaling_min_freq');
  const scalingMaxKhz = await khz('scaling_max_freq');
  for (const value of [driver, governor, cpuinfoMinKhz, cpuinfoMaxKhz, scalingMinKhz, scalingMaxKhz]) {
    if (Array.isArray(value)) return { problem: value[0]! };
  }
  const governors = await fs.words(`${dir}/scaling_available_governors`);
  if (!governors || governors.length === 0 || !governors.every((g) => NAME.test(g))) {
    return { problem: `${dir}/scaling_available_governors is missing or not a list of governor names (got ${JSON.stringify(governors?.join(' '))})` };
  }
  const cpus = await fs.cpuList(`${dir}/affected_cpus`);
  if (!cpus || cpus.length === 0) return { problem: `${dir}/affected_cpus is missing or not a CPU list` };

  const policy: Policy = {
    dir,
    cpus,
    driver: driver as string,
    governor: governor as string,
    governors,
    cpuinfoMinKhz: cpuinfoMinKhz as number,
    cpuinfoMaxKhz: cpuinfoMaxKhz as number,
    scalingMinKhz: scalingMinKhz as number,
    scalingMaxKhz: scalingMaxKhz as number,
    writable: await access(fs.resolve(`${dir}/scaling_governor`), constants.W_OK).then(() => true, () => false),
  };
  const base = await fs.int(`${dir}/base_frequency`);
  if (base !== undefined && base > 0) policy.baseKhz = base;
  const epp = (await fs.text(`${dir}/energy_performance_preference`))?.trim();
  if (epp !== undefined) {
    const eppValues = await fs.words(`${dir}/energy_performance_available_preferences`);
    if (!eppValues || eppValues.length === 0 || !eppValues.every((v) => NAME.test(v))) {
      return { problem: `${dir}/energy_performance_available_preferences is missing or garbled (got ${JSON.stringify(eppValues?.join(' '))})` };
    }
    policy.epp = epp;
    policy.eppValues = eppValues;
  }
  return { value: policy };
}
