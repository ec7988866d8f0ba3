#!/usr/bin/env node
// Writes the CPU topology, NUMA, huge page and /proc files of the host profiles under
// config/hosts/<profile>/ (the cache, cpufreq, intel_pstate and resctrl files of the same
// trees are written by scripts of the llc and pstate plugins). Run once; the output is
// committed. CPU numbering is binding for both scripts: logical CPU
//   cpu = thread * (sockets * coresPerSocket) + socket * coresPerSocket + core
// and NUMA node s holds socket s's CPUs (one node per socket).
import path from 'node:path';
import { cpuList, cpuMask, writeKernelFile } from './lib/kernel-files.mjs';
import { fileURLToPath } from 'node:url';

const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const GiB_KB = 1024 * 1024;

const COMMON_X86 =
  'fpu vme de pse tsc msr pae mce cx8 apic sep mtrr pge mca cmov pat pse36 clflush';
const CASCADE_LAKE_FLAGS = `${COMMON_X86} dts acpi mmx fxsr sse sse2 ss ht tm pbe syscall nx pdpe1gb rdtscp lm constant_tsc art arch_perfmon pebs bts rep_good nopl xtopology nonstop_tsc cpuid aperfmperf pni pclmulqdq dtes64 monitor ds_cpl vmx smx est tm2 ssse3 sdbg fma cx16 xtpr pdcm pcid dca sse4_1 sse4_2 x2apic movbe popcnt tsc_deadline_timer aes xsave avx f16c rdrand lahf_lm abm 3dnowprefetch cpuid_fault epb cat_l3 cdp_l3 invpcid_single intel_ppin ssbd mba ibrs ibpb stibp ibrs_enhanced tpr_shadow vnmi flexpriority ept vpid ept_ad fsgsbase tsc_adjust bmi1 hle avx2 smep bmi2 erms invpcid rtm cqm mpx rdt_a avx512f avx512dq rdseed adx smap clflushopt clwb intel_pt avx512cd avx512bw avx512vl xsaveopt xsavec xgetbv1 xsaves cqm_llc cqm_occup_llc cqm_mbm_total cqm_mbm_local dtherm ida arat pln pts hwp hwp_act_window hwp_epp hwp_pkg_req pku ospke avx512_vnni md_clear flush_l1d arch_capabilities`;
const SKYLAKE_FLAGS = `${COMMON_X86} dts acpi mmx fxsr sse sse2 ss ht tm pbe syscall nx pdpe1gb rdtscp lm constant_tsc art arch_perfmon pebs bts rep_good nopl xtopology nonstop_tsc cpuid aperfmperf pni pclmulqdq dtes64 monitor ds_cpl vmx smx est tm2 ssse3 sdbg fma cx16 xtpr pdcm pcid dca sse4_1 sse4_2 x2apic movbe popcnt tsc_deadline_timer aes xsave avx f16c rdrand lahf_lm abm 3dnowprefetch cpuid_fault epb cat_l3 cdp_l3 invpcid_single pti intel_ppin ssbd mba ibrs ibpb stibp tpr_shadow vnmi flexpriority ept vpid ept_ad fsgsbase tsc_adjust bmi1 hle avx2 smep bmi2 erms invpcid rtm cqm mpx rdt_a avx512f avx512dq rdseed adx smap clflushopt clwb intel_pt avx512cd avx512bw avx512vl xsaveopt xsavec xgetbv1 xsaves cqm_llc cqm_occup_llc cqm_mbm_total cqm_mbm_local dtherm ida arat pln pts hwp hwp_act_window hwp_epp hwp_pkg_req pku ospke md_clear flush_l1d`;
const CLOUD_FLAGS = `${COMMON_X86} mmx fxsr sse sse2 ss ht syscall nx pdpe1gb rdtscp lm constant_tsc rep_good nopl xtopology nonstop_tsc cpuid aperfmperf tsc_known_freq pni pclmulqdq ssse3 fma cx16 pcid sse4_1 sse4_2 x2apic movbe popcnt tsc_deadline_timer aes xsave avx f16c rdrand hypervisor lahf_lm abm 3dnowprefetch invpcid_single pti fsgsbase tsc_adjust bmi1 avx2 smep bmi2 erms invpcid mpx avx512f avx512dq rdseed adx smap clflushopt clwb avx512cd avx512bw avx512vl xsaveopt xsavec xgetbv1 xsaves ida arat pku ospke avx512_vnni`;
const ZEN3_FLAGS = `${COMMON_X86} mmx fxsr sse sse2 ht syscall nx mmxext fxsr_opt pdpe1gb rdtscp lm constant_tsc rep_good nopl nonstop_tsc cpuid extd_apicid aperfmperf rapl pni pclmulqdq monitor ssse3 fma cx16 pcid sse4_1 sse4_2 x2apic movbe popcnt aes xsave avx f16c rdrand lahf_lm cmp_legacy svm extapic cr8_legacy abm sse4a misalignsse 3dnowprefetch osvw ibs skinit wdt tce topoext perfctr_core perfctr_nb bpext perfctr_llc mwaitx cpb cat_l3 cdp_l3 invpcid_single hw_pstate ssbd mba ibrs ibpb stibp vmmcall fsgsbase bmi1 avx2 smep bmi2 invpcid cqm rdt_a rdseed adx smap clflushopt clwb sha_ni xsaveopt xsavec xgetbv1 xsaves cqm_llc cqm_occup_llc cqm_mbm_total cqm_mbm_local clzero irperf xsaveerptr rdpru wbnoinvd amd_ppin arat npt lbrv svm_lock nrip_save tsc_scale vmcb_clean flushbyasid decodeassists pausefilter pfthreshold v_vmsave_vmload vgif v_spec_ctrl umip pku ospke vaes vpclmulqdq rdpid overflow_recov succor smca fsrm`;

const PROFILES = [
  {
    name: 'xeon-2s-cat',
    sockets: 2, coresPerSocket: 20, threads: 2,
    cpu: { vendor: 'GenuineIntel', family: 6, model: 85, stepping: 7, modelName: 'Intel(R) Xeon(R) Gold 6248 CPU @ 2.50GHz', mhz: '2500.000', cacheSize: '28160 KB', bogomips: '5000.00', flags: CASCADE_LAKE_FLAGS, microcode: '0x5003604', cpuidLevel: 22 },
    memTotalKb: 384 * GiB_KB,
    hugePagesPerNode: [],
  },
  {
    name: 'epyc-1s',
    sockets: 1, coresPerSocket: 32, threads: 2,
    cpu: { vendor: 'AuthenticAMD', family: 25, model: 1, stepping: 1, modelName: 'AMD EPYC 7543P 32-Core Processor', mhz: '2800.000', cacheSize: '512 KB', bogomips: '5589.72', flags: ZEN3_FLAGS, microcode: '0xa0011d1', cpuidLevel: 16 },
    memTotalKb: 256 * GiB_KB,
    hugePagesPerNode: [],
  },
  {
    name: 'cloud-vm',
    sockets: 1, coresPerSocket: 2, threads: 2,
    cpu: { vendor: 'GenuineIntel', family: 6, model: 85, stepping: 7, modelName: 'Intel(R) Xeon(R) Platinum 8259CL CPU @ 2.50GHz', mhz: '2499.998', cacheSize: '36608 KB', bogomips: '4999.99', flags: CLOUD_FLAGS, microcode: '0x5003604', cpuidLevel: 13 },
    memTotalKb: 16003328,
    hugePagesPerNode: [],
  },
  {
    name: 'xeon-4s-numa',
    sockets: 4, coresPerSocket: 8, threads: 2,
    cpu: { vendor: 'GenuineIntel', family: 6, model: 85, stepping: 4, modelName: 'Intel(R) Xeon(R) Gold 6144 CPU @ 3.50GHz', mhz: '3500.000', cacheSize: '25344 KB', bogomips: '7000.00', flags: SKYLAKE_FLAGS, microcode: '0x2006e05', cpuidLevel: 22 },
    memTotalKb: 768 * GiB_KB,
    // Per node: 8192 x 2 MiB (6144 free) and 32 x 1 GiB (all free).
    hugePagesPerNode: [{ sizeKb: 2048, total: 8192, free: 6144 }, { sizeKb: 1048576, total: 32, free: 32 }],
  },
];
// Page sizes the kernel offers on every profile (all CPUs have pdpe1gb); pools without
// configured pages are present with zero counts, as on real machines.
const PAGE_SIZES_KB = [2048, 1048576];

function write(root, machinePath, content) {
  writeKernelFile(path.join(root, machinePath), content);
}

function kb(key, value) {
  return `${`${key}:`.padEnd(16)}${String(value).padStart(8)} kB`;
}
function count(key, value) {
  return `${`${key}:`.padEnd(19)}${String(value).padStart(5)}`;
}

function generate(profile) {
  const root = path.join(repo, 'config/hosts', profile.name);
  const { sockets, coresPerSocket, threads } = profile;
  const perThread = sockets * coresPerSocket;
  const nrCpus = perThread * threads;
  const place = (cpu) => ({ thread: Math.floor(cpu / perThread), socket: Math.floor((cpu % perThread) / coresPerSocket), core: cpu % coresPerSocket });
  const siblingsOf = (cpu) => { const p = place(cpu); return Array.from({ length: threads }, (_, t) => t * perThread + p.socket * coresPerSocket + p.core); };
  const cpusOfSocket = (s) => Array.from({ length: nrCpus }, (_, c) => c).filter((c) => place(c).socket === s);
  const all = Array.from({ length: nrCpus }, (_, c) => c);

  // /sys/devices/system/cpu
  for (const file of ['online', 'possible', 'present']) write(root, `sys/devices/system/cpu/${file}`, cpuList(all));
  for (const cpu of all) {
    const p = place(cpu);
    const dir = `sys/devices/system/cpu/cpu${cpu}/topology`;
    const siblings = siblingsOf(cpu);
    const pkg = cpusOfSocket(p.socket);
    write(root, `${dir}/physical_package_id`, String(p.socket));
    write(root, `${dir}/core_id`, String(p.core));
    write(root, `${dir}/die_id`, '0');
    for (const [name, set] of [['thread_siblings', siblings], ['core_cpus', siblings], ['core_siblings', pkg], ['package_cpus', pkg], ['die_cpus', pkg]]) {
      write(root, `${dir}/${name}_list`, cpuList(set));
      write(root, `${dir}/${name}`, cpuMask(set, nrCpus));
    }
  }

  // /proc/cpuinfo
  const c = profile.cpu;
  const records = all.map((cpu) => {
    const p = place(cpu);
    const apic = p.socket * 64 + p.core * 2 + p.thread;
    return [
      ['processor', cpu], ['vendor_id', c.vendor], ['cpu family', c.family], ['model', c.model], ['model name', c.modelName],
      ['stepping', c.stepping], ['microcode', c.microcode], ['cpu MHz', c.mhz], ['cache size', c.cacheSize],
      ['physical id', p.socket], ['siblings', coresPerSocket * threads], ['core id', p.core], ['cpu cores', coresPerSocket],
      ['apicid', apic], ['initial apicid', apic], ['fpu', 'yes'], ['fpu_exception', 'yes'], ['cpuid level', c.cpuidLevel],
      ['wp', 'yes'], ['flags', c.flags], ['bugs', 'spectre_v1 spectre_v2 spec_store_bypass swapgs'], ['bogomips', c.bogomips],
      ['clflush size', 64], ['cache_alignment', 64], ['address sizes', '46 bits physical, 48 bits virtual'], ['power management', ''],
    ].map(([k, v]) => `${k.padEnd(16)}: ${v}`.replace(/ $/, '')).join('\n');
  });
  write(root, 'proc/cpuinfo', `${records.join('\n\n')}\n\n`);

  // NUMA nodes: one per socket, memory split evenly, huge pages carved out of each node.
  const nodeTotalKb = profile.memTotalKb / sockets;
  const pools = PAGE_SIZES_KB.map((sizeKb) => profile.hugePagesPerNode.find((p) => p.sizeKb === sizeKb) ?? { sizeKb, total: 0, free: 0 });
  const hugetlbPerNodeKb = pools.reduce((sum, p) => sum + p.total * p.sizeKb, 0);
  const nodeFreeKb = Math.floor((nodeTotalKb - hugetlbPerNodeKb) * 0.9);
  const nodes = Array.from({ length: sockets }, (_, s) => s);
  for (const file of ['online', 'possible', 'has_cpu', 'has_memory', 'has_normal_memory']) write(root, `sys/devices/system/node/${file}`, cpuList(nodes));
  const default2M = pools.find((p) => p.sizeKb === 2048);
  for (const s of nodes) {
    const dir = `sys/devices/system/node/node${s}`;
    write(root, `${dir}/cpulist`, cpuList(cpusOfSocket(s)));
    write(root, `${dir}/cpumap`, cpuMask(cpusOfSocket(s), nrCpus));
    write(root, `${dir}/distance`, nodes.map((o) => (o === s ? 10 : 21)).join(' '));
    const prefix = `Node ${s} `;
    write(root, `${dir}/meminfo`, [
      kb('MemTotal', nodeTotalKb), kb('MemFree', nodeFreeKb), kb('MemUsed', nodeTotalKb - nodeFreeKb),
      kb('Active', 2097152), kb('Inactive', 1048576), kb('FilePages', 1572864), kb('AnonPages', 1048576),
      kb('Shmem', 65536), kb('KernelStack', 16384), kb('PageTables', 32768), kb('Slab', 524288),
      count('HugePages_Total', default2M.total), count('HugePages_Free', default2M.free), count('HugePages_Surp', 0),
    ].map((line) => prefix + line).join('\n'));
    for (const p of pools) {
      const pdir = `${dir}/hugepages/hugepages-${p.sizeKb}kB`;
      write(root, `${pdir}/nr_hugepages`, String(p.total));
      write(root, `${pdir}/free_hugepages`, String(p.free));
      write(root, `${pdir}/surplus_hugepages`, '0');
    }
  }

  // /sys/kernel/mm/hugepages: system-wide pools (sums of the nodes').
  for (const p of pools) {
    const dir = `sys/kernel/mm/hugepages/hugepages-${p.sizeKb}kB`;
    write(root, `${dir}/nr_hugepages`, String(p.total * sockets));
    write(root, `${dir}/nr_hugepages_mempolicy`, String(p.total * sockets));
    write(root, `${dir}/free_hugepages`, String(p.free * sockets));
    write(root, `${dir}/resv_hugepages`, '0');
    write(root, `${dir}/surplus_hugepages`, '0');
    write(root, `${dir}/nr_overcommit_hugepages`, '0');
  }

  // /proc/meminfo: HugePages_* describe the default (2 MiB) size; Hugetlb counts all sizes.
  const memFreeKb = nodeFreeKb * sockets;
  write(root, 'proc/meminfo', [
    kb('MemTotal', profile.memTotalKb), kb('MemFree', memFreeKb), kb('MemAvailable', memFreeKb + 1048576 * sockets),
    kb('Buffers', 262144), kb('Cached', 1572864 * sockets), kb('SwapCached', 0), kb('Active', 2097152 * sockets),
    kb('Inactive', 1048576 * sockets), kb('Active(anon)', 1048576 * sockets), kb('Inactive(anon)', 0),
    kb('Active(file)', 1048576 * sockets), kb('Inactive(file)', 1048576 * sockets), kb('Unevictable', 0), kb('Mlocked', 0),
    kb('SwapTotal', 0), kb('SwapFree', 0), kb('Dirty', 128), kb('Writeback', 0), kb('AnonPages', 1048576 * sockets),
    kb('Mapped', 262144), kb('Shmem', 65536 * sockets), kb('Slab', 524288 * sockets), kb('SReclaimable', 262144 * sockets),
    kb('SUnreclaim', 262144 * sockets), kb('KernelStack', 16384 * sockets), kb('PageTables', 32768 * sockets),
    kb('CommitLimit', Math.floor(profile.memTotalKb / 2)), kb('Committed_AS', 4194304), kb('VmallocTotal', 34359738367),
    kb('VmallocUsed', 131072), kb('VmallocChunk', 0), kb('Percpu', 1024 * nrCpus), kb('HardwareCorrupted', 0),
    kb('AnonHugePages', 0), count('HugePages_Total', default2M.total * sockets), count('HugePages_Free', default2M.free * sockets),
    count('HugePages_Rsvd', 0), count('HugePages_Surp', 0), kb('Hugepagesize', 2048), kb('Hugetlb', hugetlbPerNodeKb * sockets),
    kb('DirectMap4k', 1048576), kb('DirectMap2M', 16777216), kb('DirectMap1G', Math.max(profile.memTotalKb - 17825792, 0)),
  ].join('\n'));
}

for (const profile of PROFILES) generate(profile);
console.log(`wrote ${PROFILES.map((p) => p.name).join(', ')} under config/hosts/`);
