#!/usr/bin/env node
/* global URLSearchParams */
// Records how OpenStack Placement 8.0.0's own code parses generated GET
// /allocation_candidates query strings, for packages/placement/test/query-oracle.test.ts.
//
//   node scripts/placement-query-oracle.mjs [--out FILE] [--seed 1] [--count 1200]
//
// It runs Placement's parsing path (placement/handlers/allocation_candidate.py
// list_allocation_candidates up to the database: the microversion's schema,
// RequestWideParams.from_request, RequestGroup.dict_from_request, the group_policy check)
// in the system Python (/usr/bin/python3, Debian's placement-api 8.0.0), with no server and
// no database. Each case keeps the query string, the microversion and either the refusal
// (status, code, the message's first line) or the parsed groups and request-wide values.
import { spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { createInterface } from 'node:readline';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
// Built output of the workspace (npm run build): the project's one seeded PRNG (mulberry32).
import { seededRandom } from '@ert/core';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

const ORACLE = `
import json, sys
import webob
import microversion_parse
from placement import lib, microversion, util
from placement.handlers import allocation_candidate as ac

def run(qs, mv):
    req = webob.Request.blank('/allocation_candidates?' + qs)
    major, minor = mv.split('.')
    v = microversion_parse.Version(int(major), int(minor))
    v.max_version = microversion_parse.Version(1, 39)
    v.min_version = microversion_parse.Version(1, 0)
    req.environ[microversion.MICROVERSION_ENVIRON] = v
    try:
        util.validate_query_params(req, ac._get_schema(v))
        rq = lib.RequestWideParams.from_request(req)
        groups = lib.RequestGroup.dict_from_request(req, rq)
        if not rq.group_policy:
            if len([g for g in groups.values() if g.use_same_provider]) > 1:
                raise webob.exc.HTTPBadRequest(
                    'The "group_policy" parameter is required when specifying '
                    'more than one "resources{N}" parameter.')
    except webob.exc.HTTPException as e:
        return {'status': e.code, 'code': e.comment or 'placement.undefined_code',
                'message': str(e.detail).split('\\n')[0]}
    except Exception as e:
        return {'status': 500, 'error': '%s: %s' % (type(e).__name__, e)}
    return {'status': 200,
            'limit': rq.limit if rq.limit else None,
            'groupPolicy': rq.group_policy,
            'rootRequired': sorted(rq.anchor_required_traits or []),
            'rootForbidden': sorted(rq.anchor_forbidden_traits or []),
            'sameSubtree': [sorted(s) for s in rq.same_subtrees],
            'groups': [{'suffix': s, 'resources': g.resources,
                        'required': [sorted(t) for t in g.required_traits],
                        'forbidden': sorted(g.forbidden_traits),
                        'memberOf': [sorted(a) for a in g.member_of],
                        'forbiddenAggregates': sorted(g.forbidden_aggs),
                        'inTree': g.in_tree} for s, g in groups.items()]}

for line in sys.stdin:
    q = json.loads(line)
    print(json.dumps(run(q['qs'], q['mv'])), flush=True)
`;

function parseArgs(argv) {
  const opts = { out: path.join(root, 'packages/placement/test/fixtures/placement-8.0.0-query-oracle.json'), seed: 1, count: 1200 };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    if (arg === '--out') opts.out = path.resolve(argv[++i]);
    else if (arg === '--seed') opts.seed = Number(argv[++i]);
    else if (arg === '--count') opts.count = Number(argv[++i]);
    else throw new Error(`unknown argument ${arg}`);
  }
  return opts;
}

function prng(seed) {
  const next = seededRandom(seed);
  return { next, pick: (list) => list[Math.floor(next() * list.length)] };
}

const U1 = '11111111-1111-1111-1111-111111111111';
const U2 = '22222222-2222-2222-2222-222222222222';
const SUFFIXES_ODD = ['', '', '1', '2', '10', '01', '_A', '_B', 'x', '-', `_${'a'.repeat(64)}`, '%0A', '1%0A', '!'];
const SUFFIXES_GOOD = ['', '', '1', '2', '_A', '_B'];
const RESOURCES = ['VCPU:1', 'VCPU:2,MEMORY_MB:512', 'VCPU:0', 'VCPU:-1', 'VCPU:abc', 'VCPU', '', '%20', 'VCPU:1,', 'VCPU:1:2', 'VCPU:%201_0', 'VCPU:%D9%A3', 'VCPU:1,VCPU:3', 'DISK_GB:+5', 'VCPU:1__0', 'VCPU:_1', 'x:1', 'VCPU:007'];
const REQUIRED = ['A', 'A,B', '!A', '!!A', 'A,!A', '!', '', 'in:A,B', 'in:A', 'in:', 'in:A,!B', 'in:A,', '%20A%20,%20B%20', '!A,B', 'in:A,A', 'A,,B', '!in:A', 'in:!A', '%21A%2CB'];
const MEMBER_OF = [U1, `in:${U1},${U2}`, `!${U1}`, `!in:${U1},${U2}`, `${U1},${U2}`, 'xyz', 'in:', `in:${U1},x`, `{${U1.replaceAll('-', '')}}`, U1.toUpperCase(), `urn:uuid:${U1}`, '!', `!!${U1}`, `in:${U1}`];
const IN_TREE = [U1, `%20${U1}%20`, 'abc', '', U2.replaceAll('-', ''), `{${U1}}`];
const MICROVERSIONS = [10, 16, 17, 21, 22, 23, 24, 25, 29, 30, 31, 32, 33, 34, 35, 36, 38, 39];

function generator(seed) {
  const r = prng(seed);
  // Mostly well-formed requests at the microversions that matter, with one oddity at most.
  const clean = () => {
    const minor = r.pick([25, 29, 31, 33, 35, 36, 38, 39, 39, 39]);
    const names = minor >= 33 ? ['1', '2', '_A', '_B', '-x'] : ['1', '2', '3'];
    const parts = [];
    if (r.next() < 0.8) parts.push(`resources=${r.pick(RESOURCES.slice(0, 2))}`);
    const suffixed = r.pick([0, 1, 1, 2, 3]);
    const used = [];
    for (let i = 0; i < suffixed; i++) {
      const s = names[i];
      used.push(s);
      if (minor < 36 || r.next() < 0.8) parts.push(`resources${s}=${r.pick(RESOURCES.slice(0, 2))}`);
      if (r.next() < 0.4) parts.push(`required${s}=${r.pick(['A', 'A,B', '!A', 'in:A,B', 'B,!C'])}`);
      if (r.next() < 0.2) parts.push(`member_of${s}=${r.pick(MEMBER_OF.slice(0, 4))}`);
      if (minor >= 31 && r.next() < 0.1) parts.push(`in_tree${s}=${U2}`);
    }
    if (r.next() < 0.3) parts.push(`required=${r.pick(['A', '!B', 'A,!B', 'in:A,B'])}`);
    if (r.next() < 0.2) parts.push(`member_of=${r.pick(MEMBER_OF.slice(0, 4))}`);
    if (minor >= 31 && r.next() < 0.15) parts.push(`in_tree=${U1}`);
    if (suffixed > 1 || r.next() < 0.2) parts.push(`group_policy=${r.pick(['none', 'isolate'])}`);
    if (r.next() < 0.2) parts.push(`limit=${r.pick(['1', '3', '10'])}`);
    if (minor >= 35 && r.next() < 0.2) parts.push(`root_required=${r.pick(['A', '!A', 'A,!B'])}`);
    if (minor >= 36 && used.length > 1 && r.next() < 0.4) parts.push(`same_subtree=${used.slice(0, 2).join(',')}`);
    if (r.next() < 0.25) parts.push(r.pick(['resources=VCPU:0', 'required=', 'member_of=nope', 'in_tree=nope', 'root_required=A&root_required=B', 'same_subtree=_Z', 'required=A,!A', 'limit=0', 'foo=1']));
    for (let i = parts.length - 1; i > 0; i--) {
      const j = Math.floor(r.next() * (i + 1));
      [parts[i], parts[j]] = [parts[j], parts[i]];
    }
    return { qs: parts.join('&'), mv: `1.${minor}` };
  };
  return () => {
    if (r.next() < 0.5) return clean();
    const good = r.next() < 0.5 ? 0.95 : 0.5;
    const minor = r.next() < 0.5 ? r.pick([36, 39]) : r.pick(MICROVERSIONS);
    const parts = [];
    const n = 1 + Math.floor(r.next() * 5);
    for (let i = 0; i < n; i++) {
      if (r.next() < 0.2) {
        const roll = r.next();
        if (roll < 0.2) parts.push(`limit=${r.pick(['1', '5', '0', '-1', 'abc', '', '10%0A', '1.5', '%201'])}`);
        else if (roll < 0.45) parts.push(`group_policy=${good > 0.9 ? r.pick(['none', 'isolate']) : r.pick(['none', 'isolate', 'x', '', 'ISOLATE'])}`);
        else if (roll < 0.65) parts.push(`root_required=${r.pick(['A', '!A', 'A,!B', 'A,!A', 'in:A,B', '', '!', 'A,', '!!A,A'])}`);
        else if (roll < 0.85) parts.push(`same_subtree=${r.pick(['_A', '_A,_B', '_A,', ',_A', '1,2', '_C', '%20_A%20,%20_B', 'x,_A'])}`);
        else parts.push(r.pick(['foo=1', 'limit%0A=1', 'resources_=VCPU:1', 'Resources=VCPU:1', 'resources=VCPU:1;required=A']));
        continue;
      }
      const prefix = r.pick(['resources', 'resources', 'required', 'member_of', 'in_tree']);
      const suffix = r.pick(good > 0.9 ? SUFFIXES_GOOD : SUFFIXES_ODD);
      const fine = r.next() < good;
      const value =
        prefix === 'resources'
          ? r.pick(fine ? RESOURCES.slice(0, 2) : RESOURCES)
          : prefix === 'required'
            ? r.pick(fine ? REQUIRED.slice(0, 3) : REQUIRED)
            : prefix === 'member_of'
              ? r.pick(fine ? MEMBER_OF.slice(0, 4) : MEMBER_OF)
              : r.pick(fine ? [U1] : IN_TREE);
      parts.push(`${prefix}${suffix}=${value}`);
    }
    return { qs: parts.join('&'), mv: `1.${minor}` };
  };
}

/** The query as webob sees it: pairs split on & and ;. */
function webobPairs(qs) {
  return qs.split(/[&;]/).filter(Boolean);
}

async function main() {
  const opts = parseArgs(process.argv.slice(2));
  const py = spawn('/usr/bin/python3', ['-c', ORACLE], { stdio: ['pipe', 'pipe', 'inherit'] });
  const lines = createInterface({ input: py.stdout })[Symbol.asyncIterator]();
  const ask = async (q) => {
    py.stdin.write(`${JSON.stringify(q)}\n`);
    const { value, done } = await lines.next();
    if (done) throw new Error('the Python oracle stopped');
    return JSON.parse(value);
  };
  try {
    const next = generator(opts.seed);
    const seen = new Set();
    const cases = [];
    const stats = {};
    while (cases.length < opts.count) {
      const q = next();
      if (seen.has(`${q.mv} ${q.qs}`)) continue;
      seen.add(`${q.mv} ${q.qs}`);
      // ert refuses every bad or repeated value of these two on purpose (see query.ts).
      const params = new URLSearchParams(webobPairs(q.qs).join('&'));
      if (params.getAll('limit').length > 1 || params.getAll('group_policy').length > 1) continue;
      const result = await ask(q);
      if (result.status === 500) continue;
      stats[result.status] = (stats[result.status] ?? 0) + 1;
      cases.push({ ...q, ...result });
    }
    const doc = {
      placementVersion: '8.0.0',
      generatedAt: new Date().toISOString(),
      generator: 'scripts/placement-query-oracle.mjs',
      seed: opts.seed,
      format:
        'qs: the raw query string (webob splits pairs on & and ;); mv: the microversion; status 400: code and message (first line of the detail); status 200: limit, groupPolicy, rootRequired, rootForbidden, sameSubtree, groups (suffix, resources, required as any-of lists, forbidden, memberOf, forbiddenAggregates, inTree) in the order Placement built them. Sets are sorted lists.',
      cases,
    };
    writeFileSync(opts.out, `{\n${Object.entries(doc).filter(([k]) => k !== 'cases').map(([k, v]) => `  ${JSON.stringify(k)}: ${JSON.stringify(v)},`).join('\n')}\n  "cases": [\n${cases.map((c) => `    ${JSON.stringify(c)}`).join(',\n')}\n  ]\n}\n`);
    console.log(`wrote ${path.relative(process.cwd(), opts.out)}: ${cases.length} cases ${JSON.stringify(stats)}`);
  } finally {
    py.stdin.end();
    py.kill();
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
