#!/usr/bin/env node
// Micro-benchmark of fitRequest, run by hand after `npx tsc -b packages/placement`:
//   node packages/placement/bench/fit-bench.mjs [iterations]
// Prints ns per call for the scheduler's common cases. Not part of the test suite.
import { normalizeInventory } from '../../plugin-api/dist/index.js';
import { fitRequest, parseFlavor } from '../dist/index.js';

const iterations = Number(process.argv[2] ?? 2_000_000);

const provider = (name, inv, { parent, traits = [], used = {} } = {}) => ({
  uuid: `uuid-${name}`,
  name,
  parentUuid: parent && `uuid-${parent}`,
  generation: 1,
  inventories: Object.fromEntries(Object.entries(inv).map(([c, total]) => [c, normalizeInventory({ total })])),
  usages: used,
  traits: new Set(traits),
  aggregates: new Set(['agg1']),
});

const flavor = (extraSpecs) => ({ name: 'bench', vcpus: 4, memoryMb: 8192, diskGb: 40, extraSpecs });
const plain = parseFlavor(flavor({}), { keys: [] });
const withTrait = parseFlavor(flavor({ 'trait:HW_CPU_X86_AVX2': 'required' }), { keys: [] });
const llc = parseFlavor(flavor({ 'resources1:CUSTOM_LLC_WAYS': '4', 'trait1:CUSTOM_RDT_CAT': 'required' }), { keys: [] });

const oneProvider = { providers: [provider('host1', { VCPU: 64, MEMORY_MB: 262144, DISK_GB: 2000 }, { traits: ['HW_CPU_X86_AVX2'], used: { VCPU: 20, MEMORY_MB: 40000 } })], sharingProviders: [] };
const threeProviders = {
  providers: [
    provider('host1', { VCPU: 64, MEMORY_MB: 262144, DISK_GB: 2000 }, { traits: ['HW_CPU_X86_AVX2'], used: { VCPU: 20 } }),
    provider('host1_llc_0', { CUSTOM_LLC_WAYS: 11 }, { parent: 'host1', traits: ['CUSTOM_RDT_CAT'], used: { CUSTOM_LLC_WAYS: 9 } }),
    provider('host1_llc_1', { CUSTOM_LLC_WAYS: 11 }, { parent: 'host1', traits: ['CUSTOM_RDT_CAT'] }),
  ],
  sharingProviders: [],
};

function measure(label, spec, tree, shouldFit = true) {
  let sink = 0;
  for (let i = 0; i < 200_000; i++) sink += fitRequest(spec, tree).ok ? 1 : 0; // warm-up
  // CPU time of this process rather than wall time: the machine is shared, and waiting for
  // a core is not fitRequest's cost.
  const start = process.cpuUsage();
  for (let i = 0; i < iterations; i++) sink += fitRequest(spec, tree).ok ? 1 : 0;
  const used = process.cpuUsage(start);
  const ns = ((used.user + used.system) * 1000) / iterations;
  if ((sink > 0) !== shouldFit) throw new Error(`${label}: expected ${shouldFit ? 'a fit' : 'no fit'}`);
  console.log(`${label.padEnd(58)} ${ns.toFixed(0).padStart(6)} ns/call (CPU time)`);
}

console.log(`fitRequest, ${iterations} calls each, node ${process.version}`);
measure('1 provider, VCPU+MEMORY_MB+DISK_GB (fits)', plain, oneProvider);
measure('1 provider, + required trait (fits)', withTrait, oneProvider);
measure('3 providers, VCPU+MEMORY_MB+DISK_GB (fits on root)', plain, threeProviders);
measure('3 providers, + numbered LLC group with trait (2nd child)', llc, threeProviders);
const tooBig = parseFlavor({ ...flavor({}), vcpus: 1000 }, { keys: [] });
measure('1 provider, does not fit (reason built)', tooBig, oneProvider, false);
