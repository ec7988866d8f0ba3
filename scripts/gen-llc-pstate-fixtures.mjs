#!/usr/bin/env node
// Writes the llc/pstate-owned files of the host-profile fixture trees under config/hosts/:
// per-CPU cache descriptions (sys/devices/system/cpu/cpuN/cache/), cpufreq policies,
// intel_pstate and resctrl. The CPU numbering follows the profiles' binding description;
// the topology/proc/node files of the same trees are written by another generator.
// Run once from the repository root: node scripts/gen-llc-pstate-fixtures.mjs
import { rmSync } from 'node:fs';
import path from 'node:path';
import { cpuList, cpuMask, writeKernelFile } from './lib/kernel-files.mjs';

const HOSTS = path.resolve('config/hosts');

function write(profile, rel, content) {
  writeKernelFile(path.join(HOSTS, profile, rel), content);
}

/**
 * One profile. `core(cpu)` gives the global core number (siblings share it), `l3(cpu)` the
 * L3 domain id; `l3Cpus(id)` the CPUs of that domain.
 */
function caches(profile, { nrCpus, core, siblings, l1, l2, l3, l3Id, l3Cpus }) {
  const kinds = [
    { index: 0, level: 1, type: 'Data', ...l1, id: core, shared: siblings },
    { index: 1, level: 1, type: 'Instruction', ...l1, id: core, shared: siblings },
    { index: 2, level: 2, type: 'Unified', ...l2, id: core, shared: siblings },
    { index: 3, level: 3, type: 'Unified', ...l3, id: l3Id, shared: (cpu) => l3Cpus(l3Id(cpu)) },
  ];
  for (let cpu = 0; cpu < nrCpus; cpu++) {
    for (const k of kinds) {
      const dir = `sys/devices/system/cpu/cpu${cpu}/cache/index${k.index}`;
      const shared = k.shared(cpu);
      write(profile, `${dir}/level`, `${k.level}`);
      write(profile, `${dir}/type`, k.type);
      write(profile, `${dir}/size`, `${k.sizeK}K`);
      write(profile, `${dir}/ways_of_associativity`, `${k.ways}`);
      write(profile, `${dir}/coherency_line_size`, '64');
      write(profile, `${dir}/physical_line_partition`, '1');
      write(profile, `${dir}/number_of_sets`, `${(k.sizeK * 1024) / (k.ways * 64)}`);
      write(profile, `${dir}/id`, `${k.id(cpu)}`);
      write(profile, `${dir}/shared_cpu_list`, cpuList(shared));
      write(profile, `${dir}/shared_cpu_map`, cpuMask(shared, nrCpus));
    }
  }
}

function policies(profile, nrCpus, attrs) {
  for (let cpu = 0; cpu < nrCpus; cpu++) {
    const dir = `sys/devices/system/cpu/cpufreq/policy${cpu}`;
    write(profile, `${dir}/affected_cpus`, `${cpu}`);
    write(profile, `${dir}/related_cpus`, `${cpu}`);
    for (const [name, value] of Object.entries(attrs)) write(profile, `${dir}/${name}`, value);
  }
}

function resctrl(profile, { nrCpus, resources, domains }) {
  const full = '7ff';
  for (const r of resources) {
    write(profile, `sys/fs/resctrl/info/${r.name}/cbm_mask`, full);
    write(profile, `sys/fs/resctrl/info/${r.name}/num_closids`, `${r.numClosids}`);
    write(profile, `sys/fs/resctrl/info/${r.name}/min_cbm_bits`, '1');
    write(profile, `sys/fs/resctrl/info/${r.name}/shareable_bits`, '0');
  }
  write(profile, 'sys/fs/resctrl/info/last_cmd_status', 'ok');
  const all = Array.from({ length: nrCpus }, (_, i) => i);
  write(profile, 'sys/fs/resctrl/schemata', resources.map((r) => `${r.name}:${domains.map((d) => `${d}=${full}`).join(';')}`).join('\n'));
  write(profile, 'sys/fs/resctrl/cpus', cpuMask(all, nrCpus));
  write(profile, 'sys/fs/resctrl/cpus_list', cpuList(all));
  write(profile, 'sys/fs/resctrl/mode', 'shareable');
  write(profile, 'sys/fs/resctrl/tasks', '1');
}

const range = (from, to) => Array.from({ length: to - from + 1 }, (_, i) => from + i);
const L1 = { sizeK: 32, ways: 8 };

for (const profile of ['xeon-2s-cat', 'epyc-1s', 'cloud-vm', 'xeon-4s-numa']) {
  for (const dir of ['sys/fs/resctrl', 'sys/devices/system/cpu/cpufreq', 'sys/devices/system/cpu/intel_pstate']) {
    rmSync(path.join(HOSTS, profile, dir), { recursive: true, force: true });
  }
}

// xeon-2s-cat: 2 sockets x 20 cores x 2 threads; cpu0-19 s0, cpu20-39 s1, +40 siblings.
{
  const p = 'xeon-2s-cat';
  const thread0 = (cpu) => cpu % 40;
  const socket = (cpu) => Math.floor(thread0(cpu) / 20);
  caches(p, {
    nrCpus: 80,
    core: thread0,
    siblings: (cpu) => [thread0(cpu), thread0(cpu) + 40],
    l1: L1,
    l2: { sizeK: 1024, ways: 16 },
    l3: { sizeK: 28160, ways: 11 },
    l3Id: socket,
    l3Cpus: (s) => [...range(20 * s, 20 * s + 19), ...range(40 + 20 * s, 40 + 20 * s + 19)],
  });
  resctrl(p, { nrCpus: 80, resources: [{ name: 'L3', numClosids: 16 }], domains: [0, 1] });
  write(p, 'sys/devices/system/cpu/intel_pstate/status', 'active');
  write(p, 'sys/devices/system/cpu/intel_pstate/no_turbo', '0');
  write(p, 'sys/devices/system/cpu/intel_pstate/max_perf_pct', '100');
  write(p, 'sys/devices/system/cpu/intel_pstate/min_perf_pct', '25');
  write(p, 'sys/devices/system/cpu/intel_pstate/hwp_dynamic_boost', '0');
  policies(p, 80, {
    scaling_driver: 'intel_pstate',
    scaling_governor: 'powersave',
    scaling_available_governors: 'performance powersave',
    cpuinfo_min_freq: '1000000',
    cpuinfo_max_freq: '3900000',
    cpuinfo_transition_latency: '0',
    scaling_min_freq: '1000000',
    scaling_max_freq: '3900000',
    scaling_cur_freq: '2500000',
    base_frequency: '2500000',
    energy_performance_preference: 'balance_performance',
    energy_performance_available_preferences: 'default performance balance_performance balance_power power',
  });
}

// epyc-1s: 32 cores x 2 threads; cpu0-31 thread 0, +32 siblings; L3 per CCD of 8 cores.
{
  const p = 'epyc-1s';
  const thread0 = (cpu) => cpu % 32;
  caches(p, {
    nrCpus: 64,
    core: thread0,
    siblings: (cpu) => [thread0(cpu), thread0(cpu) + 32],
    l1: L1,
    l2: { sizeK: 512, ways: 8 },
    l3: { sizeK: 32768, ways: 16 },
    l3Id: (cpu) => Math.floor(thread0(cpu) / 8),
    l3Cpus: (k) => [...range(8 * k, 8 * k + 7), ...range(32 + 8 * k, 32 + 8 * k + 7)],
  });
  write(p, 'sys/devices/system/cpu/cpufreq/boost', '1');
  policies(p, 64, {
    scaling_driver: 'acpi-cpufreq',
    scaling_governor: 'schedutil',
    scaling_available_governors: 'conservative ondemand userspace powersave performance schedutil',
    cpuinfo_min_freq: '1500000',
    cpuinfo_max_freq: '2800000',
    cpuinfo_transition_latency: '0',
    scaling_min_freq: '1500000',
    scaling_max_freq: '2800000',
    scaling_cur_freq: '2800000',
    scaling_available_frequencies: '2800000 2200000 1500000',
    scaling_setspeed: '<unsupported>',
  });
}

// cloud-vm: 2 cores x 2 threads, siblings 0,2 and 1,3; no cpufreq, no resctrl.
{
  const p = 'cloud-vm';
  caches(p, {
    nrCpus: 4,
    core: (cpu) => cpu % 2,
    siblings: (cpu) => [cpu % 2, (cpu % 2) + 2],
    l1: L1,
    l2: { sizeK: 1024, ways: 16 },
    l3: { sizeK: 36608, ways: 11 },
    l3Id: () => 0,
    l3Cpus: () => range(0, 3),
  });
}

// xeon-4s-numa: 4 sockets x 8 cores x 2 threads; socket s: 8s..8s+7, siblings +32. CDP.
{
  const p = 'xeon-4s-numa';
  const thread0 = (cpu) => cpu % 32;
  const socket = (cpu) => Math.floor(thread0(cpu) / 8);
  caches(p, {
    nrCpus: 64,
    core: thread0,
    siblings: (cpu) => [thread0(cpu), thread0(cpu) + 32],
    l1: L1,
    l2: { sizeK: 1024, ways: 16 },
    l3: { sizeK: 25344, ways: 11 },
    l3Id: socket,
    l3Cpus: (s) => [...range(8 * s, 8 * s + 7), ...range(32 + 8 * s, 32 + 8 * s + 7)],
  });
  resctrl(p, {
    nrCpus: 64,
    resources: [
      { name: 'L3CODE', numClosids: 8 },
      { name: 'L3DATA', numClosids: 8 },
    ],
    domains: [0, 1, 2, 3],
  });
  write(p, 'sys/devices/system/cpu/intel_pstate/status', 'passive');
  write(p, 'sys/devices/system/cpu/intel_pstate/no_turbo', '1');
  write(p, 'sys/devices/system/cpu/intel_pstate/max_perf_pct', '100');
  write(p, 'sys/devices/system/cpu/intel_pstate/min_perf_pct', '28');
  policies(p, 64, {
    scaling_driver: 'intel_cpufreq',
    scaling_governor: 'performance',
    scaling_available_governors: 'conservative ondemand userspace powersave performance schedutil',
    cpuinfo_min_freq: '1200000',
    cpuinfo_max_freq: '4200000',
    cpuinfo_transition_latency: '20000',
    scaling_min_freq: '1200000',
    scaling_max_freq: '4200000',
    scaling_cur_freq: '4200000',
    scaling_setspeed: '<unsupported>',
  });
}
