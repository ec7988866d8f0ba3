#!/usr/bin/env node
/* global fetch, AbortSignal, URLSearchParams */
// Records what the real OpenStack Placement 8.0.0 answers to GET /allocation_candidates
// on seeded random worlds (and on a few hand-made repro worlds), for
// packages/placement/test/placement-recorded.test.ts to compare ert against.
//
//   node scripts/placement-compare.mjs [--out FILE] [--seeds 1,2] [--queries 160]
//                                      [--max-candidates 120] [--only NAME,...]
//   node scripts/placement-compare.mjs --serve NAME   # load one world, keep serving (to try queries)
//
// Needs Debian's placement-api 8.0.0 (placement-api, placement-manage; see
// ../shared/PLACEMENT-API.md section 7). For each world it starts its own Placement on
// 127.0.0.1 (temp dir, sqlite, noauth2, randomize_allocation_candidates = False), loads
// the world through the REST API, sends the queries at microversion 1.39, and kills the
// server by pid (also on error or Ctrl-C). Output format: see FORMAT below.
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync, readFileSync, existsSync } from 'node:fs';
import { createHash } from 'node:crypto';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
// Built output of the workspace (npm run build): the project's one seeded PRNG (mulberry32).
import { seededRandom } from '@ert/core';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const MICROVERSION = '1.39';

const FORMAT = [
  'worlds[].providers: every provider (uuid, name, parentUuid or null, inventories in Placement\'s snake_case, usages per class as GET /resource_providers/{u}/usages says, traits, aggregates).',
  'Every root has a trait CUSTOM_ROOT_<NAME> and every provider but the sharing ones is in aggregate allAggregate: they are there to work around Placement\'s bugs (correctedAnswer() in the script) and no recorded query names them.',
  'worlds[].queries[]: query (the query string sent), status, and: for 400, code and message (the text after webob\'s first line) and kind (query: the parser\'s business; unknown-trait / unknown-class: found in the database);',
  'for 200, allocationRequests (Placement\'s allocations and mappings with every provider uuid replaced by its name and the "resources" level dropped: {allocations: {name: {RC: n}}, mappings: {suffix: [name]}}) and summaries (the names of the providers in provider_summaries).',
  'Each summary\'s content was checked when recording to equal the world\'s: resources = every inventory class with capacity int((total - reserved) * allocation_ratio) and used = usages, traits, parent and root; one that differed would be in summaryExceptions (name -> Placement\'s summary, uuids as names).',
  'A 200 with more than maxCandidates allocation requests has digest (sha256 of the canonical requests: keys sorted, mapping names sorted, JSON.stringify each, sort the strings with JavaScript\'s default order, join with newlines) instead of allocationRequests.',
  'invalid lists problems found in Placement\'s answer against the world (a class\'s amounts not adding up to what was asked, an amount over free capacity or max_unit).',
  'bugs names the Placement 8.0.0 bugs the query is exposed to (uncopied-amounts, resourceless-without-positive-filter, sharing-anchor-dedup: see placementBugs() in the script); corrected is then Placement\'s answer with them worked around (corrections and query say how; see correctedAnswer()), absent where they cannot be.',
  'limitOf names the query that is the same without limit.',
].join(' ');

// ---------------------------------------------------------------------------------------------
// Arguments

function parseArgs(argv) {
  const opts = { out: path.join(root, 'packages/placement/test/fixtures/placement-8.0.0-candidates.json'), seeds: [1, 2], queries: 160, maxCandidates: 120, only: undefined };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    const next = () => {
      const v = argv[++i];
      if (v === undefined) throw new Error(`${arg} needs a value`);
      return v;
    };
    if (arg === '--out') opts.out = path.resolve(next());
    else if (arg === '--seeds') opts.seeds = next().split(',').map(Number);
    else if (arg === '--queries') opts.queries = Number(next());
    else if (arg === '--max-candidates') opts.maxCandidates = Number(next());
    else if (arg === '--only') opts.only = next().split(',');
    else if (arg === '--serve') opts.serve = next();
    else if (arg === '--help' || arg === '-h') {
      console.log('usage: node scripts/placement-compare.mjs [--out FILE] [--seeds 1,2] [--queries N] [--max-candidates N] [--only world,...]');
      console.log('       node scripts/placement-compare.mjs --serve WORLD [--seeds ...]   (load one world, keep Placement running until Ctrl-C)');
      process.exit(0);
    } else throw new Error(`unknown argument ${arg}`);
  }
  return opts;
}

// ---------------------------------------------------------------------------------------------
// Seeded PRNG (core's seededRandom) and helpers

function prng(seed) {
  const next = seededRandom(seed);
  return {
    next,
    chance: (p) => next() < p,
    int: (lo, hi) => lo + Math.floor(next() * (hi - lo + 1)),
    pick: (list) => list[Math.floor(next() * list.length)],
    sample: (list, n) => {
      const copy = [...list];
      const out = [];
      while (out.length < n && copy.length > 0) out.push(copy.splice(Math.floor(next() * copy.length), 1)[0]);
      return out;
    },
    uuid: () => {
      let hex = '';
      for (let i = 0; i < 32; i++) hex += Math.floor(next() * 16).toString(16);
      return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-4${hex.slice(13, 16)}-a${hex.slice(17, 20)}-${hex.slice(20, 32)}`;
    },
  };
}

// ---------------------------------------------------------------------------------------------
// Worlds

const HUGE = 'CUSTOM_HUGEPAGES_1G';
const LLC = 'CUSTOM_LLC_WAYS';
const BW = 'NET_BW_EGR_KILOBIT_PER_SEC';
const VF = 'SRIOV_NET_VF';
const SHARES = 'MISC_SHARES_VIA_AGGREGATE';

function inventory(total, o = {}) {
  return { total, reserved: o.reserved ?? 0, min_unit: o.min_unit ?? 1, max_unit: o.max_unit ?? total, step_size: o.step_size ?? 1, allocation_ratio: o.allocation_ratio ?? 1.0 };
}

class World {
  constructor(name, seed) {
    this.name = name;
    this.seed = seed;
    this.providers = [];
    this.byName = new Map();
    this.allocations = []; // { consumer, allocations: { uuid: { RC: n } } }
    this.rand = prng(seed ?? 0);
  }

  add(name, parent, inventories = {}, traits = [], aggregates = []) {
    const p = { uuid: this.rand.uuid(), name, parentUuid: parent ? parent.uuid : null, inventories, usages: {}, traits: [...new Set(traits)].sort(), aggregates: [...new Set(aggregates)].sort() };
    this.providers.push(p);
    this.byName.set(name, p);
    return p;
  }

  rootOf(p) {
    let cur = p;
    while (cur.parentUuid) cur = this.providers.find((q) => q.uuid === cur.parentUuid);
    return cur;
  }

  /** Capacity left on `p` for `rc` as the write path sees it (by the allocations made here). */
  free(p, rc) {
    const inv = p.inventories[rc];
    const used = this.allocations.reduce((sum, a) => sum + (a.allocations[p.uuid]?.[rc] ?? 0), 0);
    return Math.floor((inv.total - inv.reserved) * inv.allocation_ratio) - used;
  }
}

function randomInventory(r, rc) {
  switch (rc) {
    case 'VCPU': {
      const total = r.pick([2, 4, 8, 16, 32]);
      const ratio = r.pick([1.0, 1.0, 2.0, 4.0, 16.0, 1.5]);
      return inventory(total, { reserved: r.pick([0, 0, 1]), max_unit: r.pick([total, total, Math.max(1, Math.ceil(total / 2)), total * 2]), step_size: r.pick([1, 1, 1, 2]), allocation_ratio: ratio });
    }
    case 'MEMORY_MB': {
      const total = r.pick([2048, 4096, 8192, 16384, 65536]);
      return inventory(total, { reserved: r.pick([0, 512]), min_unit: r.pick([1, 1, 256]), max_unit: r.pick([total, total / 2]), step_size: r.pick([1, 1, 256, 512]), allocation_ratio: r.pick([1.0, 1.0, 1.5]) });
    }
    case 'DISK_GB': {
      const total = r.pick([100, 200, 500, 1000]);
      return inventory(total, { reserved: r.pick([0, 10]), min_unit: r.pick([1, 5]), step_size: r.pick([1, 5, 10]), allocation_ratio: r.pick([1.0, 1.0, 1.5]) });
    }
    case HUGE:
      return inventory(r.pick([2, 4, 8]));
    case LLC: {
      const total = r.pick([11, 12, 20]);
      return inventory(total, { reserved: r.pick([0, 1]), max_unit: r.pick([total, 8]) });
    }
    case BW: {
      const total = r.pick([10000, 25000, 100000]);
      return inventory(total, { reserved: r.pick([0, 1000]), step_size: r.pick([1, 1000]) });
    }
    case VF:
      return inventory(r.pick([4, 8, 16]));
    default:
      throw new Error(rc);
  }
}

function randomWorld(seed) {
  const w = new World(`random-${seed}`, seed);
  const r = w.rand;
  const agg = { rackA: r.uuid(), rackB: r.uuid(), ssd: r.uuid(), hdd: r.uuid(), empty: r.uuid() };
  w.aggregates = agg;
  const hostCount = 40;
  for (let i = 0; i < hostCount; i++) {
    const name = `h${String(i).padStart(2, '0')}`;
    const kind = r.pick(['flat', 'flat', 'flat', 'flat', 'numa', 'numa', 'numa-llc', 'nic', 'numa-nic', 'bare']);
    const numa = kind.startsWith('numa');
    const rootInv = {};
    if (!numa || r.chance(0.2)) {
      rootInv.VCPU = randomInventory(r, 'VCPU');
      rootInv.MEMORY_MB = randomInventory(r, 'MEMORY_MB');
    }
    if (kind === 'bare') delete rootInv.MEMORY_MB;
    if (r.chance(0.6)) rootInv.DISK_GB = randomInventory(r, 'DISK_GB');
    const traits = [];
    if (r.chance(0.5)) traits.push('HW_CPU_X86_AVX2');
    if (r.chance(0.2)) traits.push('HW_CPU_X86_AVX512F');
    if (r.chance(0.15)) traits.push('CUSTOM_GOLD');
    if (r.chance(0.06)) traits.push('COMPUTE_STATUS_DISABLED');
    if (rootInv.DISK_GB && r.chance(0.4)) traits.push('STORAGE_DISK_SSD');
    const aggs = [r.chance(0.5) ? agg.rackA : agg.rackB];
    if (r.chance(0.25)) aggs.push(agg.ssd);
    if (r.chance(0.2)) aggs.push(agg.hdd);
    const host = w.add(name, null, rootInv, traits, aggs);
    if (numa) {
      const nodes = r.pick([2, 2, 2, 4]);
      for (let n = 0; n < nodes; n++) {
        const inv = { VCPU: randomInventory(r, 'VCPU'), MEMORY_MB: randomInventory(r, 'MEMORY_MB') };
        if (r.chance(0.4)) inv[HUGE] = randomInventory(r, HUGE);
        const nt = [];
        if (r.chance(0.5)) nt.push('HW_NUMA_ROOT');
        if (r.chance(0.3)) nt.push('CUSTOM_NUMA_FAST');
        const na = [];
        if (r.chance(0.1)) na.push(agg.ssd); // a child in a sharing aggregate
        const node = w.add(`${name}.n${n}`, host, inv, nt, na);
        if (kind === 'numa-llc') w.add(`${name}.n${n}.llc`, node, { [LLC]: randomInventory(r, LLC) }, r.chance(0.7) ? ['CUSTOM_RDT_CAT'] : []);
      }
    }
    if (kind.endsWith('nic')) {
      const agent = w.add(`${name}.nic`, host, {}, r.chance(0.3) ? ['CUSTOM_NIC_AGENT'] : []);
      const pfs = r.pick([1, 2, 2]);
      for (let p = 0; p < pfs; p++) {
        const inv = { [BW]: randomInventory(r, BW) };
        if (p === 0 || r.chance(0.5)) inv[VF] = randomInventory(r, VF);
        const pt = [r.pick(['CUSTOM_PHYSNET_A', 'CUSTOM_PHYSNET_B'])];
        if (inv[VF]) pt.push('HW_NIC_SRIOV');
        w.add(`${name}.nic.pf${p}`, agent, inv, pt, r.chance(0.1) ? [agg.hdd] : []);
      }
    }
  }
  // Sharing providers, and one provider in a sharing aggregate that does not share.
  w.add('ss-ssd', null, { DISK_GB: inventory(2000, { reserved: 100, min_unit: 10, max_unit: 1000, step_size: 10 }) }, [SHARES, 'STORAGE_DISK_SSD', 'CUSTOM_SSD'], [agg.ssd]);
  w.add('ss-hdd', null, { DISK_GB: inventory(5000, { max_unit: 2000, allocation_ratio: 1.5 }) }, [SHARES, 'STORAGE_DISK_HDD'], [agg.hdd]);
  if (r.chance(0.7)) w.add('ss-ip', null, { IPV4_ADDRESS: inventory(64, { reserved: 4 }) }, [SHARES], [agg.rackA, agg.ssd]);
  w.add('lone-disk', null, { DISK_GB: inventory(300) }, ['STORAGE_DISK_SSD'], [agg.ssd]);

  // Existing allocations: some providers nearly full.
  for (let c = 0; c < 45; c++) {
    const withInv = w.providers.filter((p) => Object.keys(p.inventories).length > 0);
    const allocs = {};
    const parts = r.pick([1, 1, 2, 3]);
    for (const p of r.sample(withInv, parts)) {
      const rc = r.pick(Object.keys(p.inventories));
      const inv = p.inventories[rc];
      const free = w.free(p, rc);
      const cap = Math.min(free, inv.max_unit);
      const want = r.chance(0.35) ? cap - r.int(0, Math.max(1, Math.floor(cap / 8))) : r.int(1, Math.max(1, Math.floor(cap / 3)));
      let amount = Math.floor(want / inv.step_size) * inv.step_size;
      if (amount < inv.min_unit) amount = Math.ceil(inv.min_unit / inv.step_size) * inv.step_size;
      if (amount < 1 || amount > cap || amount > inv.max_unit) continue;
      allocs[p.uuid] = { [rc]: amount };
    }
    if (Object.keys(allocs).length > 0) w.allocations.push({ consumer: r.uuid(), allocations: allocs });
  }
  return w;
}

/**
 * For working around Placement's bugs (correctedAnswer): a trait naming each root, and an
 * aggregate every provider but the sharing ones is in. Queries never name either.
 */
function decorate(w) {
  w.allAggregate = w.rand.uuid();
  for (const p of w.providers) {
    if (!p.parentUuid) p.traits = [...p.traits, rootTrait(p)].sort();
    if (!p.traits.includes(SHARES)) p.aggregates = [...p.aggregates, w.allAggregate].sort();
  }
  return w;
}

/** The known ert bugs' shapes, each in a world of its own. */
function reproWorlds() {
  const worlds = [];
  {
    const w = new World('repro-one-host', 101);
    w.add('host', null, { VCPU: inventory(4), MEMORY_MB: inventory(4096) });
    w.queries = ['resources1=VCPU:4,MEMORY_MB:2048', 'resources=VCPU:4,MEMORY_MB:2048', 'resources1=VCPU:4,MEMORY_MB:4097', 'resources1=VCPU:2&resources2=MEMORY_MB:2048&group_policy=isolate'];
    worlds.push(w);
  }
  {
    const w = new World('repro-max-unit', 102);
    w.add('host', null, { VCPU: inventory(4, { max_unit: 4, allocation_ratio: 4.0 }) });
    w.queries = [
      'resources1=VCPU:4&resources2=VCPU:4&group_policy=none',
      'resources1=VCPU:4&resources2=VCPU:4&group_policy=isolate',
      'resources1=VCPU:2&resources2=VCPU:2&group_policy=none',
      'resources=VCPU:4&resources1=VCPU:4',
      'resources=VCPU:3&resources1=VCPU:1',
      'resources=VCPU:5',
    ];
    worlds.push(w);
  }
  {
    const w = new World('repro-sharing-trait', 103);
    const a = w.rand.uuid();
    w.add('host', null, { VCPU: inventory(8), MEMORY_MB: inventory(8192) }, [], [a]);
    w.add('shared-disk', null, { DISK_GB: inventory(1000) }, [SHARES, 'CUSTOM_SSD'], [a]);
    w.queries = [
      'resources1=DISK_GB:10&required1=CUSTOM_SSD',
      'resources=VCPU:1&resources1=DISK_GB:10&required1=CUSTOM_SSD',
      'resources=DISK_GB:10&required=CUSTOM_SSD',
      'resources=VCPU:1,DISK_GB:10&required=CUSTOM_SSD',
      'resources=VCPU:1,DISK_GB:10&required=!CUSTOM_SSD',
      `resources=VCPU:1,DISK_GB:10&member_of=${a}`,
      `resources1=DISK_GB:10&member_of1=${a}`,
    ];
    worlds.push(w);
  }
  {
    const w = new World('repro-forbidden-sharing', 104);
    const a = w.rand.uuid();
    w.add('host', null, { VCPU: inventory(8), MEMORY_MB: inventory(8192) }, ['CUSTOM_GOLD'], [a]);
    w.add('shared-disk', null, { DISK_GB: inventory(1000) }, [SHARES], [a]);
    w.queries = [
      'resources=DISK_GB:10&required=!CUSTOM_GOLD&resources1=VCPU:1',
      'resources=DISK_GB:10,VCPU:1&required=!CUSTOM_GOLD',
      'resources=DISK_GB:10&required=CUSTOM_GOLD&resources1=VCPU:1',
      'resources=DISK_GB:10&resources1=VCPU:1&required1=!CUSTOM_GOLD',
      'resources=DISK_GB:10&resources1=VCPU:1&root_required=!CUSTOM_GOLD',
    ];
    worlds.push(w);
  }
  {
    const w = new World('repro-wide-isolate', 105);
    const host = w.add('host', null, {});
    for (let i = 0; i < 8; i++) w.add(`host.c${i}`, host, { VCPU: inventory(1) });
    w.queries = [];
    for (let k = 1; k <= 5; k++) {
      const groups = Array.from({ length: k }, (_, i) => `resources${i + 1}=VCPU:1`).join('&');
      w.queries.push(`${groups}&group_policy=isolate`);
    }
    w.queries.push('resources1=VCPU:1&resources2=VCPU:1&group_policy=none', 'resources=VCPU:2', 'resources=VCPU:1&resources1=VCPU:1&group_policy=isolate');
    worlds.push(w);
  }
  return worlds;
}

// ---------------------------------------------------------------------------------------------
// Queries for random worlds

const AMOUNTS = {
  VCPU: [1, 1, 2, 2, 4, 8],
  MEMORY_MB: [256, 512, 1024, 2048, 4096, 8192],
  DISK_GB: [5, 10, 20, 100, 600],
  [HUGE]: [1, 2],
  [LLC]: [1, 2, 4],
  [BW]: [1000, 5000, 20000],
  [VF]: [1, 2],
  IPV4_ADDRESS: [1],
};

// What one suffixed group asks for: classes that live together on one provider.
const PROFILES = [['VCPU'], ['VCPU', 'MEMORY_MB'], ['VCPU', 'MEMORY_MB'], ['MEMORY_MB'], ['DISK_GB'], ['DISK_GB'], [HUGE], ['VCPU', HUGE], [LLC], [BW], [BW, VF], [VF], ['IPV4_ADDRESS']];

function queryGenerator(w) {
  const r = prng((w.seed ?? 0) * 7919 + 17);
  const named = (t) => t !== SHARES && !t.startsWith('CUSTOM_ROOT_');
  const allTraits = [...new Set(w.providers.flatMap((p) => p.traits))].filter(named).sort();
  const rootTraits = [...new Set(w.providers.filter((p) => !p.parentUuid).flatMap((p) => p.traits))].filter(named).sort();
  const aggs = Object.values(w.aggregates);
  // Traits of the providers that could serve these classes (so that filters often match).
  const traitsFor = (classes) => {
    const t = [...new Set(w.providers.filter((p) => classes.some((c) => p.inventories[c])).flatMap((p) => [...p.traits, ...w.rootOf(p).traits]))].filter(named);
    return t.length > 0 && r.chance(0.8) ? t.sort() : allTraits;
  };
  const resourcesOf = (classes) => classes.map((rc) => `${rc}:${r.pick(AMOUNTS[rc])}`).join(',');
  const traitValue = (traits) => {
    const roll = r.next();
    if (roll < 0.15 && traits.length > 1) return `in:${r.sample(traits, 2).join(',')}`;
    const picked = r.sample(traits, r.pick([1, 1, 1, 2]));
    return picked.map((t) => (r.chance(0.35) ? `!${t}` : t)).join(',');
  };
  const memberOfValue = () => {
    const roll = r.next();
    if (roll < 0.4) return r.pick(aggs);
    if (roll < 0.6) return `in:${r.sample(aggs, 2).join(',')}`;
    if (roll < 0.8) return `!${r.pick(aggs)}`;
    return `!in:${r.sample(aggs, 2).join(',')}`;
  };
  const groupParams = (suffix, classes, { resources = true } = {}) => {
    const parts = [];
    const traits = traitsFor(classes);
    if (resources) parts.push(`resources${suffix}=${resourcesOf(classes)}`);
    if (r.chance(0.3) || !resources) parts.push(`required${suffix}=${traitValue(traits)}`);
    if (r.chance(0.06)) parts.push(`required${suffix}=${traitValue(traits)}`);
    if (r.chance(0.15)) parts.push(`member_of${suffix}=${memberOfValue()}`);
    if (r.chance(0.06)) parts.push(`in_tree${suffix}=${r.pick(w.providers).uuid}`);
    return parts;
  };
  const unsuffixedClasses = () => {
    const roll = r.next();
    if (roll < 0.35) return r.sample(['VCPU', 'MEMORY_MB', 'DISK_GB'], r.pick([1, 2, 3]));
    if (roll < 0.6) return ['VCPU', 'MEMORY_MB', 'DISK_GB'];
    if (roll < 0.8) return ['VCPU', 'MEMORY_MB'];
    return [...r.sample(['VCPU', 'MEMORY_MB', 'DISK_GB'], 2), r.pick([HUGE, LLC, BW, VF, 'IPV4_ADDRESS'])];
  };
  const names = ['_NUMA', '_NIC', '_LLC', '_X', '-a'];
  return () => {
    const parts = [];
    const shape = r.next();
    let suffixed = 0;
    if (shape < 0.4) {
      parts.push(...groupParams('', unsuffixedClasses()));
    } else if (shape < 0.7) {
      parts.push(...groupParams('', unsuffixedClasses()));
      suffixed = r.pick([1, 1, 2]);
    } else if (shape < 0.88) {
      suffixed = r.pick([1, 2, 2, 3]);
    } else {
      // same_subtree shapes on the NUMA / NIC / LLC trees
      const variant = r.pick(['cpu-llc', 'nic', 'numa-huge', 'resourceless']);
      if (variant === 'cpu-llc') parts.push(`resources_CPU=VCPU:${r.pick([1, 2])}`, `resources_LLC=${LLC}:${r.pick([1, 2, 4])}`, 'same_subtree=_CPU,_LLC');
      else if (variant === 'nic') parts.push(`resources_BW=${BW}:${r.pick(AMOUNTS[BW])}`, `resources_VF=${VF}:1`, 'same_subtree=_BW,_VF');
      else if (variant === 'numa-huge') parts.push(`resources_CPU=VCPU:1,MEMORY_MB:${r.pick([512, 1024])}`, `resources_HP=${HUGE}:1`, 'same_subtree=_CPU,_HP');
      else parts.push('resources_CPU=VCPU:1', `required_NUMA=${r.pick(['HW_NUMA_ROOT', 'CUSTOM_NUMA_FAST', '!CUSTOM_NUMA_FAST'])}`, 'same_subtree=_CPU,_NUMA');
      if (r.chance(0.4)) parts.push(`resources=${resourcesOf(r.sample(['VCPU', 'MEMORY_MB', 'DISK_GB'], 1))}`);
      parts.push(`group_policy=${r.pick(['none', 'isolate'])}`);
    }
    const suffixes = r.chance(0.5) ? ['1', '2', '3'] : r.sample(names, 3);
    for (let i = 0; i < suffixed; i++) parts.push(...groupParams(suffixes[i], r.pick(PROFILES)));
    if (suffixed > 1 || (suffixed === 1 && r.chance(0.3))) parts.push(`group_policy=${r.pick(['none', 'none', 'isolate'])}`);
    if (r.chance(0.08)) {
      const picked = r.sample(rootTraits, r.pick([1, 2])).map((t) => (r.chance(0.4) ? `!${t}` : t));
      parts.push(`root_required=${picked.join(',')}`);
    }
    return parts.join('&');
  };
}

/** Queries whose answer is a 400 (parser or database) or an edge case, on a random world. */
function edgeQueries(w) {
  const someRoot = w.providers.find((p) => !p.parentUuid && p.inventories.VCPU);
  const aChild = w.providers.find((p) => p.parentUuid && p.inventories.VCPU) ?? someRoot;
  return [
    'resources=VCPU:1&required=CUSTOM_NOPE',
    'resources=VCPU:1&required=!CUSTOM_NOPE',
    'resources=VCPU:1&required=in:CUSTOM_NOPE,HW_CPU_X86_AVX2',
    'resources=VCPU:1&root_required=CUSTOM_NOPE',
    'resources=CUSTOM_NOPE_RC:1',
    'resources=vcpu:1',
    'resources=VCPU:0',
    'resources=VCPU:1&resources1=VCPU:1&resources2=VCPU:1',
    'resources=VCPU:1&required=HW_CPU_X86_AVX2,!HW_CPU_X86_AVX2',
    'resources=VCPU:1&root_required=CUSTOM_GOLD&root_required=!CUSTOM_GOLD',
    'resources=VCPU:1&root_required=CUSTOM_GOLD,!CUSTOM_GOLD',
    'resources_A=VCPU:1&same_subtree=_A,_B',
    'resources_A=VCPU:1&required_B=HW_NUMA_ROOT',
    'required=HW_CPU_X86_AVX2',
    'resources=VCPU:1&limit=0',
    'resources=VCPU:1&foo=bar',
    `resources=VCPU:1&member_of=${w.aggregates.empty}`,
    `resources=VCPU:1&in_tree=${w.rand.uuid()}`,
    `resources=VCPU:1&in_tree=${someRoot.uuid.toUpperCase()}`,
    `resources=VCPU:1&in_tree=${aChild.uuid}`,
    `resources=VCPU:1&member_of=${w.aggregates.rackA.toUpperCase()}`,
    'resources=VCPU:1&required=!!!HW_CPU_X86_AVX2',
    'resources=VCPU:1&required=in:HW_CPU_X86_AVX2&required=in:CUSTOM_GOLD,HW_CPU_X86_AVX512F',
  ];
}

// ---------------------------------------------------------------------------------------------
// Placement server

async function freePort() {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address();
      srv.close(() => resolve(port));
    });
  });
}

// Servers started here (child process -> temp dir), stopped by pid on exit, error or signal.
const running = new Map();
function stopServer(child) {
  const dir = running.get(child);
  if (dir === undefined) return;
  running.delete(child);
  try {
    process.kill(child.pid, 'SIGTERM');
  } catch {
    /* already gone */
  }
  rmSync(dir, { recursive: true, force: true });
}
function killAll() {
  for (const child of [...running.keys()]) stopServer(child);
}
process.on('exit', killAll);
for (const sig of ['SIGINT', 'SIGTERM']) {
  process.on(sig, () => {
    killAll();
    process.exit(130);
  });
}

async function startPlacement() {
  const dir = mkdtempSync(path.join(tmpdir(), 'placement-compare-'));
  writeFileSync(
    path.join(dir, 'placement.conf'),
    [
      '[DEFAULT]',
      `log_file = ${dir}/placement-api.log`,
      '[api]',
      'auth_strategy = noauth2',
      '[placement_database]',
      `connection = sqlite:///${dir}/placement.sqlite`,
      '[placement]',
      'randomize_allocation_candidates = False',
      '',
    ].join('\n'),
  );
  const sync = spawnSync('placement-manage', ['--config-file', path.join(dir, 'placement.conf'), 'db', 'sync'], { encoding: 'utf8' });
  if (sync.status !== 0) throw new Error(`placement-manage db sync failed: ${sync.stderr}`);
  const port = await freePort();
  const child = spawn('placement-api', ['--host', '127.0.0.1', '--port', String(port)], {
    env: { ...process.env, OS_PLACEMENT_CONFIG_DIR: dir },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  running.set(child, dir);
  let stderr = '';
  child.stderr.on('data', (d) => (stderr = (stderr + d).slice(-4000)));
  const base = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + 60_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`placement-api exited (${child.exitCode}): ${stderr}`);
    try {
      const res = await fetch(`${base}/`);
      if (res.ok) break;
    } catch {
      /* not up yet */
    }
    if (Date.now() > deadline) throw new Error(`placement-api did not answer on ${base}: ${stderr}`);
    await new Promise((r) => setTimeout(r, 200));
  }
  const stop = () => stopServer(child);
  return { base, stop, pid: child.pid };
}

function client(base) {
  return async function call(method, url, body, mv = MICROVERSION, timeoutMs = 600_000) {
    const headers = { 'x-auth-token': 'admin', 'openstack-api-version': `placement ${mv}` };
    if (body !== undefined) headers['content-type'] = 'application/json';
    const res = await fetch(base + url, { method, headers, body: body === undefined ? undefined : JSON.stringify(body), signal: AbortSignal.timeout(timeoutMs) });
    const text = await res.text();
    return { status: res.status, body: text ? JSON.parse(text) : undefined };
  };
}

async function expectOk(promise, what) {
  const res = await promise;
  if (res.status >= 300) throw new Error(`${what}: ${res.status} ${JSON.stringify(res.body)}`);
  return res;
}

async function loadWorld(call, w) {
  const customTraits = [...new Set(w.providers.flatMap((p) => p.traits).filter((t) => t.startsWith('CUSTOM_')))];
  for (const t of customTraits) await expectOk(call('PUT', `/traits/${t}`), `trait ${t}`);
  const customClasses = [...new Set(w.providers.flatMap((p) => Object.keys(p.inventories)).filter((c) => c.startsWith('CUSTOM_')))];
  for (const c of customClasses) await expectOk(call('PUT', `/resource_classes/${c}`), `class ${c}`);
  for (const p of w.providers) {
    const body = { name: p.name, uuid: p.uuid };
    if (p.parentUuid) body.parent_provider_uuid = p.parentUuid;
    let gen = (await expectOk(call('POST', '/resource_providers', body), `provider ${p.name}`)).body.generation;
    if (Object.keys(p.inventories).length > 0) {
      gen = (await expectOk(call('PUT', `/resource_providers/${p.uuid}/inventories`, { resource_provider_generation: gen, inventories: p.inventories }), `inventories ${p.name}`)).body.resource_provider_generation;
    }
    if (p.traits.length > 0) {
      gen = (await expectOk(call('PUT', `/resource_providers/${p.uuid}/traits`, { resource_provider_generation: gen, traits: p.traits }), `traits ${p.name}`)).body.resource_provider_generation;
    }
    if (p.aggregates.length > 0) {
      await expectOk(call('PUT', `/resource_providers/${p.uuid}/aggregates`, { resource_provider_generation: gen, aggregates: p.aggregates }, '1.19'), `aggregates ${p.name}`);
    }
  }
  let written = 0;
  for (const a of w.allocations) {
    const allocations = Object.fromEntries(Object.entries(a.allocations).map(([u, res]) => [u, { resources: res }]));
    const res = await call('PUT', `/allocations/${a.consumer}`, { allocations, project_id: 'p', user_id: 'u', consumer_generation: null, consumer_type: 'INSTANCE' });
    if (res.status === 204) written++;
    else console.warn(`  allocation ${a.consumer} refused (${res.status}): ${JSON.stringify(res.body).slice(0, 200)}`);
  }
  for (const p of w.providers) {
    p.usages = Object.fromEntries(Object.entries((await expectOk(call('GET', `/resource_providers/${p.uuid}/usages`), `usages ${p.name}`)).body.usages).filter(([, n]) => n > 0));
  }
  return written;
}

// ---------------------------------------------------------------------------------------------
// Recording

function expectedSummary(w, p) {
  const resources = {};
  for (const [rc, inv] of Object.entries(p.inventories)) {
    resources[rc] = { capacity: Math.trunc((inv.total - inv.reserved) * inv.allocation_ratio), used: p.usages[rc] ?? 0 };
  }
  return { resources, traits: [...p.traits].sort(), parent_provider_uuid: p.parentUuid, root_provider_uuid: w.rootOf(p).uuid };
}

function canonical(value) {
  if (Array.isArray(value)) return value.map(canonical);
  if (value && typeof value === 'object') return Object.fromEntries(Object.keys(value).sort().map((k) => [k, canonical(value[k])]));
  return value;
}

/** Amount requested per class over all groups, and the suffixes, of a query string. */
function requested(query) {
  const params = new URLSearchParams(query);
  const total = {};
  const groupsByClass = {};
  const suffixes = new Set();
  for (const [key, value] of params) {
    const m = /^resources(.*)$/.exec(key);
    if (!m) continue;
    suffixes.add(m[1]);
    for (const part of value.split(',')) {
      const [rc, n] = part.split(':');
      total[rc] = (total[rc] ?? 0) + Number(n);
      (groupsByClass[rc] ??= new Set()).add(m[1]);
    }
  }
  for (const key of params.keys()) {
    const m = /^(?:required|member_of|in_tree)(.+)$/.exec(key);
    if (m) suffixes.add(m[1]);
  }
  return { total, groupsByClass, suffixes, groupPolicy: params.get('group_policy') };
}

/**
 * The Placement 8.0.0 bugs a query's answer is exposed to (empty: none):
 *
 * - `uncopied-amounts`: the groups of a candidate are consolidated into shared
 *   AllocationRequestResource objects, copied only when group_policy is exactly `none`
 *   (placement/objects/research_context.py copy_arr_if_needed, line 337), so with
 *   `isolate` or no group_policy, a class asked for by several groups that lands twice on
 *   one provider has its amount added into an object other candidates hold too: inflated
 *   amounts (over capacity) and lost candidates.
 * - `resourceless-without-positive-filter`: a resourceless group (1.36) with no required
 *   trait and no member_of (only forbidden traits or aggregates, or in_tree) matches no
 *   provider at all (research_context.py get_provider_ids_matching, lines 600-611: the
 *   empty "no filter" set is used as the allowed set).
 * - `sharing-anchor-dedup`: an unsuffixed group served by sharing providers alone yields
 *   the same AllocationRequest for every tree the sharing provider serves, and
 *   allocation_candidate.py _alloc_candidates_multiple_providers keeps them in a set whose
 *   equality ignores the anchor (lines 216-227, 404-407): one arbitrary tree keeps it, so
 *   only that tree's candidates combine it with the other groups.
 */
function placementBugs(w, query) {
  const q = requested(query);
  const params = new URLSearchParams(query);
  const bugs = [];
  if (q.groupPolicy !== 'none' && Object.values(q.groupsByClass).some((s) => s.size > 1)) bugs.push('uncopied-amounts');
  if (resourcelessWithoutPositiveFilter(params).length > 0) bugs.push('resourceless-without-positive-filter');
  const sharingClasses = new Set(w.providers.filter((p) => p.traits.includes(SHARES)).flatMap((p) => Object.keys(p.inventories)));
  const unsuffixed = Object.entries(q.groupsByClass).filter(([, s]) => s.has('')).map(([rc]) => rc);
  if (unsuffixed.length > 0 && unsuffixed.every((rc) => sharingClasses.has(rc)) && [...q.suffixes].some((s) => s !== '') && !params.has('in_tree')) {
    bugs.push('sharing-anchor-dedup');
  }
  return bugs;
}

/** Suffixes of resourceless groups that have neither a required trait nor member_of. */
function resourcelessWithoutPositiveFilter(params) {
  const suffixes = new Set();
  for (const key of params.keys()) {
    const m = /^(?:resources|required|member_of|in_tree)(.+)$/.exec(key);
    if (m) suffixes.add(m[1]);
  }
  return [...suffixes].filter((s) => {
    if (params.has(`resources${s}`) || params.getAll(`member_of${s}`).some((v) => !v.startsWith('!'))) return false;
    return !params.getAll(`required${s}`).some((v) => v.startsWith('in:') || v.split(',').some((t) => !t.trim().startsWith('!')));
  });
}

/**
 * Placement's own answer to `query` with the bugs it is exposed to worked around, where the
 * world allows it (random worlds: every root has trait CUSTOM_ROOT_<NAME>, every provider but
 * the sharing ones is in aggregate w.allAggregate, which no query names otherwise):
 * - uncopied-amounts: ask with group_policy=none, which means the same with at most one
 *   suffixed group; with several and isolate, keep the candidates whose suffixed groups use
 *   distinct providers (what _satisfies_group_policy does before consolidating) and the
 *   summaries of the trees they still use (_merge_candidates);
 * - resourceless-without-positive-filter: add member_of<S>=<all> to those groups (every
 *   provider but the sharing ones; none of the generated queries can put such a group on a
 *   sharing provider, whose classes no group of its same_subtree asks for);
 * - sharing-anchor-dedup: ask once per tree with root_required=CUSTOM_ROOT_<tree> (the
 *   anchor filter), and take the union of the answers and of their summaries.
 */
async function correctedAnswer(w, query, bugs, get) {
  let parts = query.split('&');
  const how = { corrections: [] };
  let isolate;
  if (bugs.includes('resourceless-without-positive-filter')) {
    if (!w.allAggregate) return undefined;
    for (const s of resourcelessWithoutPositiveFilter(new URLSearchParams(query))) parts.push(`member_of${s}=${w.allAggregate}`);
    how.corrections.push('member_of<S>=<every non-sharing provider> on resourceless groups');
  }
  if (bugs.includes('uncopied-amounts')) {
    const { suffixes, groupPolicy } = requested(query);
    const granular = [...suffixes].filter((s) => s !== '');
    if (granular.length > 1 && groupPolicy !== 'isolate') return undefined;
    if (granular.length > 1) isolate = granular;
    parts = [...parts.filter((p) => !p.startsWith('group_policy=')), 'group_policy=none'];
    how.corrections.push(isolate ? 'group_policy=none, then the isolate filter' : 'group_policy=none');
  }
  let queries = [parts.join('&')];
  if (bugs.includes('sharing-anchor-dedup')) {
    if (!w.allAggregate) return undefined;
    const roots = w.providers.filter((p) => !p.parentUuid);
    const existing = parts.find((p) => p.startsWith('root_required='));
    const rest = parts.filter((p) => p !== existing);
    queries = roots.map((r) => [...rest, `root_required=${existing ? `${existing.slice('root_required='.length)},` : ''}${rootTrait(r)}`].join('&'));
    how.corrections.push('union over trees of root_required=CUSTOM_ROOT_<tree>');
  }
  const requests = new Map();
  const summaries = {};
  for (const q of queries) {
    const { res } = await get(q);
    if (res.status !== 200) throw new Error(`corrected query refused (${res.status}): ${q} ${JSON.stringify(res.body)}`);
    for (const ar of res.body.allocation_requests) requests.set(JSON.stringify(canonical(ar)), ar);
    Object.assign(summaries, res.body.provider_summaries);
  }
  let kept = [...requests.values()];
  let keptSummaries = summaries;
  if (isolate) kept = kept.filter((ar) => new Set(isolate.flatMap((g) => ar.mappings[g] ?? [])).size === isolate.length);
  if (isolate || queries.length > 1) {
    const roots = new Set(kept.flatMap((ar) => Object.keys(ar.allocations).map((u) => w.rootOf(w.providers.find((p) => p.uuid === u)).uuid)));
    keptSummaries = Object.fromEntries(Object.entries(summaries).filter(([, ps]) => roots.has(ps.root_provider_uuid)));
  }
  how.query = queries.length === 1 ? queries[0] : `${queries[0]} (and ${queries.length - 1} more, one per tree)`;
  return { how, res: { status: 200, body: { allocation_requests: kept, provider_summaries: keptSummaries } } };
}

function rootTrait(p) {
  return `CUSTOM_ROOT_${p.name.toUpperCase().replace(/[^A-Z0-9]/g, '_')}`;
}

/** Problems of an answer against the world: amounts that do not add up or do not fit. */
function answerProblems(w, query, areqs) {
  const { total } = requested(query);
  const problems = [];
  for (const ar of areqs) {
    const sums = {};
    for (const [uuid, { resources }] of Object.entries(ar.allocations)) {
      const p = w.providers.find((q) => q.uuid === uuid);
      for (const [rc, n] of Object.entries(resources)) {
        sums[rc] = (sums[rc] ?? 0) + n;
        const inv = p.inventories[rc];
        const free = Math.trunc((inv.total - inv.reserved) * inv.allocation_ratio) - (p.usages[rc] ?? 0);
        if (n > free || n > inv.max_unit) problems.push(`${p.name} ${rc} ${n} (free ${free}, max_unit ${inv.max_unit})`);
      }
    }
    for (const rc of new Set([...Object.keys(sums), ...Object.keys(total)])) {
      if (sums[rc] !== total[rc]) problems.push(`${rc} allocated ${sums[rc] ?? 0}, requested ${total[rc] ?? 0}`);
    }
  }
  return [...new Set(problems)].slice(0, 5);
}

/** sha256 over the canonical allocation requests (JSON, sorted by JavaScript's default string order, joined by newlines). */
function digestOf(requests) {
  return createHash('sha256')
    .update(requests.map((r) => JSON.stringify(r)).sort().join('\n'))
    .digest('hex');
}

function answer(w, query, res, maxCandidates) {
  const out = {};
  const nameOf = (uuid) => {
    const p = w.providers.find((q) => q.uuid === uuid);
    if (!p) throw new Error(`unknown provider ${uuid} in answer to ${query}`);
    return p.name;
  };
  const areqs = res.body.allocation_requests;
  out.count = areqs.length;
  const requests = areqs.map((ar) =>
    canonical({
      allocations: Object.fromEntries(Object.entries(ar.allocations).map(([u, a]) => [nameOf(u), a.resources])),
      mappings: Object.fromEntries(Object.entries(ar.mappings).map(([s, us]) => [s, us.map(nameOf).sort()])),
    }),
  );
  if (areqs.length > maxCandidates) out.digest = digestOf(requests);
  else out.allocationRequests = requests;
  const summaries = res.body.provider_summaries;
  out.summaries = Object.keys(summaries).map(nameOf).sort();
  for (const [uuid, summary] of Object.entries(summaries)) {
    const p = w.providers.find((q) => q.uuid === uuid);
    const want = expectedSummary(w, p);
    const got = { ...summary, traits: [...summary.traits].sort() };
    if (JSON.stringify(canonical(got)) !== JSON.stringify(canonical(want))) {
      out.summaryExceptions ??= {};
      out.summaryExceptions[p.name] = canonical({
        ...got,
        parent_provider_uuid: got.parent_provider_uuid && nameOf(got.parent_provider_uuid),
        root_provider_uuid: nameOf(got.root_provider_uuid),
      });
      console.warn(`  summary of ${p.name} differs from the world's for ${query}`);
    }
  }
  const problems = answerProblems(w, query, areqs);
  if (problems.length > 0) out.invalid = problems;
  return out;
}

function record(w, query, res, ms, maxCandidates) {
  const out = { query, status: res.status, ms: Math.round(ms) };
  if (res.status !== 200) {
    const err = res.body?.errors?.[0] ?? {};
    const detail = String(err.detail ?? '');
    // webob's detail: "<generic text>\n\n <message>"
    const message = detail.includes('\n\n ') ? detail.slice(detail.indexOf('\n\n ') + 3) : detail;
    out.code = err.code;
    out.message = message.trimEnd();
    out.kind = message.startsWith('No such trait') ? 'unknown-trait' : message.startsWith('Invalid resource class in resources parameter') ? 'unknown-class' : 'query';
    return out;
  }
  return Object.assign(out, answer(w, query, res, maxCandidates));
}

async function runWorld(w, queries, opts) {
  const t0 = Date.now();
  const server = await startPlacement();
  try {
    const call = client(server.base);
    const written = await loadWorld(call, w);
    const loadMs = Date.now() - t0;
    console.log(`${w.name}: ${w.providers.length} providers, ${written} consumers loaded in ${loadMs} ms (placement-api pid ${server.pid})`);
    const recorded = [];
    const seen = new Set();
    let candidatesMs = 0;
    const get = async (query) => {
      const t = performance.now();
      const res = await call('GET', `/allocation_candidates?${query}`);
      const ms = performance.now() - t;
      candidatesMs += ms;
      return { res, ms };
    };
    const ask = async (query) => {
      const { res, ms } = await get(query);
      const rec = record(w, query, res, ms, opts.maxCandidates);
      if (rec.status !== 200) return rec;
      const bugs = placementBugs(w, query);
      if (bugs.length === 0) return rec;
      rec.bugs = bugs;
      if (/(^|&)limit=/.test(query)) return rec; // compared through the query without limit
      const fixed = await correctedAnswer(w, query, bugs, get);
      if (fixed) rec.corrected = { ...fixed.how, ...answer(w, query, fixed.res, opts.maxCandidates) };
      return rec;
    };
    for (const q of queries.fixed) {
      if (seen.has(q)) continue;
      seen.add(q);
      recorded.push(await ask(q));
    }
    if (queries.random) {
      let attempts = 0;
      let kept = 0;
      while (kept < queries.count && attempts < queries.count * 20) {
        attempts++;
        const q = queries.random();
        if (seen.has(q)) continue;
        seen.add(q);
        const rec = await ask(q);
        recorded.push(rec);
        kept++;
        // Sometimes the same query with a limit (the unlimited one is recorded above).
        if (rec.status === 200 && rec.count > 1 && queries.rand.chance(0.15)) {
          const limit = queries.rand.pick([1, 2, Math.max(1, Math.floor(rec.count / 2)), rec.count + 5]);
          const lq = `${q}&limit=${limit}`;
          if (!seen.has(lq)) {
            seen.add(lq);
            recorded.push({ ...(await ask(lq)), limitOf: q });
          }
        }
      }
    }
    return { loadMs, candidatesMs: Math.round(candidatesMs), recorded };
  } finally {
    server.stop();
  }
}

function serialiseWorld(w, result) {
  return {
    name: w.name,
    seed: w.seed ?? null,
    allAggregate: w.allAggregate,
    loadMs: result.loadMs,
    candidatesMs: result.candidatesMs,
    providers: w.providers.map((p) => ({ uuid: p.uuid, name: p.name, parentUuid: p.parentUuid, inventories: p.inventories, usages: p.usages, traits: p.traits, aggregates: p.aggregates })),
    queries: result.recorded,
  };
}

/** JSON with one provider or query per line (diffable, still compact). */
function stringify(doc) {
  const lines = ['{'];
  const top = Object.entries(doc).filter(([k]) => k !== 'worlds');
  for (const [k, v] of top) lines.push(`  ${JSON.stringify(k)}: ${JSON.stringify(v)},`);
  lines.push('  "worlds": [');
  doc.worlds.forEach((w, wi) => {
    lines.push('    {');
    const head = Object.entries(w).filter(([k]) => k !== 'providers' && k !== 'queries');
    for (const [k, v] of head) lines.push(`      ${JSON.stringify(k)}: ${JSON.stringify(v)},`);
    lines.push('      "providers": [');
    w.providers.forEach((p, i) => lines.push(`        ${JSON.stringify(p)}${i < w.providers.length - 1 ? ',' : ''}`));
    lines.push('      ],');
    lines.push('      "queries": [');
    w.queries.forEach((q, i) => lines.push(`        ${JSON.stringify(q)}${i < w.queries.length - 1 ? ',' : ''}`));
    lines.push('      ]');
    lines.push(`    }${wi < doc.worlds.length - 1 ? ',' : ''}`);
  });
  lines.push('  ]', '}');
  return lines.join('\n') + '\n';
}

function placementVersion() {
  const res = spawnSync('/usr/bin/python3', ['-c', 'import importlib.metadata as m; print(m.version("openstack-placement"))'], { encoding: 'utf8' });
  const v = res.stdout.trim();
  return v || 'unknown';
}

async function main() {
  const opts = parseArgs(process.argv.slice(2));
  const started = Date.now();
  const worlds = [];
  const plans = [];
  for (const w of reproWorlds()) plans.push([decorate(w), { fixed: w.queries }]);
  for (const seed of opts.seeds) {
    const w = decorate(randomWorld(seed));
    plans.push([w, { fixed: edgeQueries(w), random: queryGenerator(w), count: opts.queries, rand: prng(seed * 31 + 7) }]);
  }
  if (opts.serve) {
    const plan = plans.find(([w]) => w.name === opts.serve);
    if (!plan) throw new Error(`no world ${opts.serve} (${plans.map(([w]) => w.name).join(', ')})`);
    const server = await startPlacement();
    await loadWorld(client(server.base), plan[0]);
    console.log(`${opts.serve} loaded: ${server.base} (pid ${server.pid}); try e.g.`);
    console.log(`  curl -s -H 'x-auth-token: admin' -H 'openstack-api-version: placement ${MICROVERSION}' '${server.base}/allocation_candidates?resources=VCPU:1'`);
    console.log('Ctrl-C stops it.');
    await new Promise(() => {});
  }
  for (const [w, queries] of plans) {
    if (opts.only && !opts.only.includes(w.name)) continue;
    const result = await runWorld(w, queries, opts);
    const statuses = {};
    for (const q of result.recorded) statuses[q.status] = (statuses[q.status] ?? 0) + 1;
    console.log(`  ${result.recorded.length} queries (${JSON.stringify(statuses)}), candidates took ${result.candidatesMs} ms`);
    worlds.push(serialiseWorld(w, result));
  }
  const doc = {
    placementVersion: placementVersion(),
    microversion: MICROVERSION,
    generatedAt: new Date().toISOString(),
    generator: 'scripts/placement-compare.mjs',
    seeds: opts.seeds,
    maxCandidates: opts.maxCandidates,
    format: FORMAT,
    worlds,
  };
  if (opts.only && existsSync(opts.out)) {
    // Replace only the worlds that were re-run.
    const old = JSON.parse(readFileSync(opts.out, 'utf8'));
    doc.worlds = old.worlds.map((ow) => worlds.find((nw) => nw.name === ow.name) ?? ow);
    for (const nw of worlds) if (!doc.worlds.includes(nw)) doc.worlds.push(nw);
  }
  writeFileSync(opts.out, stringify(doc));
  const total = doc.worlds.reduce((n, w) => n + w.queries.length, 0);
  console.log(`wrote ${path.relative(process.cwd(), opts.out)}: ${doc.worlds.length} worlds, ${total} queries, ${Math.round((Date.now() - started) / 1000)} s`);
}

main().catch((err) => {
  console.error(err);
  killAll();
  process.exit(1);
});
