import { describe, expect, it } from 'vitest';
import type { Store, StoreOptions } from '@ert/store';
import { NoValidHostError } from '../src/index.js';
import type { Explanation, Scheduler } from '../src/index.js';
import { freeVcpu } from './fixtures.js';
import { BACKENDS, flavor, useFleets, uuidFor } from './helpers.js';
import type { HostSpec } from './helpers.js';

/*
 * Issue 20, point 2: request filters (docs/request-filters.md) narrow the hosts by aggregate
 * membership before any filter runs. Every fleet below makes the aggregate's host the best one
 * by weight (free-vcpu), or the worst, so that a request filter that did nothing, or too much,
 * puts the instance on the wrong side of the aggregate.
 *
 * Mutations seen caught (each applied alone to request-filters.ts, then undone):
 * - `availability-zone` returning undefined (no narrowing): the az1 request landed on `free`
 *   (the best host), not `a1`; the unknown zone was placed; explain had no availability-zone.
 * - `HostNarrowing.decide` reading `memberOf.some` as `every`: zone az2, made of two aggregates,
 *   lost both its hosts.
 * - `tenant-isolation` reading only the `filter_tenant_id` key (not `filter_tenant_id_<suffix>`):
 *   proj-b, named under `filter_tenant_id_2`, was kept out of its own aggregate.
 * - `tenant-isolation` judging only the first project of a batch: the proj-a + proj-c batch put
 *   proj-c's instance on t1.
 * - `isolated-aggregates` forbidding every trait aggregate (ignoring the request's traits): the
 *   CUSTOM_GOLD request went to `plain`, out of its aggregate.
 * - `isolated-aggregates` returning undefined: the plain request landed on `gold`.
 * - `forbidden-aggregates` resolving only uuids, not names: the request forbidding
 *   "maintenance" by name landed on `m`.
 * - `aggregatesMoved` answering false (aggregates read only at start): the zone made after the
 *   scheduler started was unknown to it (NoValidHost, "no aggregate has availability_zone=late").
 */

const AZ1 = uuidFor('agg-az1');
const AZ2 = uuidFor('agg-az2');
const AZ2B = uuidFor('agg-az2b');
const TENANT = uuidFor('agg-tenant');
const GOLD = uuidFor('agg-gold');
const MAINT = uuidFor('agg-maint');

const small = flavor('small', 1, 512);
const gold = flavor('gold', 1, 512, { 'trait:CUSTOM_GOLD': 'required' });

const host = (name: string, vcpus: number, aggregates: string[] = [], traits: string[] = []): HostSpec => ({
  name,
  inventories: { VCPU: vcpus, MEMORY_MB: 65536 },
  aggregates,
  traits,
});

let counter = 0;
const one = (projectId = 'proj-a') => ({ uuid: `00000000-0000-4000-8000-${String(++counter).padStart(12, '0')}`, projectId, userId: 'u1' });

const weighers = [{ name: 'free-vcpu', plugin: freeVcpu, multiplier: 1 }];

/** The explanation's entry of a request filter. */
function requestFilter(explanation: Explanation, name: string) {
  return explanation.filters.find((f) => f.filter === name && f.stage === 'request-filter');
}

describe.each(BACKENDS)('request filters on %s', (client) => {
  const { fleet, scheduler } = useFleets(client, 'ert-reqf-');

  async function setup(label: string, hosts: HostSpec[], aggregates: Array<{ uuid: string; name: string; metadata: Record<string, string> }>, requestFilters?: string[]): Promise<{ s: Scheduler; store: Store; options: StoreOptions }> {
    const { store, options } = await fleet(label, hosts);
    for (const a of aggregates) await store.upsertAggregate(a);
    const s = await scheduler(options, store, { filters: ['status', 'traits', 'resources'], weighers, ...(requestFilters ? { requestFilters } : {}) });
    return { s, store, options };
  }

  it('availability-zone: a request naming a zone lands in it, one naming another zone stays out, an unknown zone has no host', async () => {
    const { s } = await setup(
      'az',
      [host('a1', 2, [AZ1]), host('a2', 8, [AZ2]), host('a2b', 4, [AZ2B]), host('free', 16)],
      [
        { uuid: AZ1, name: 'rack-1', metadata: { availability_zone: 'az1' } },
        { uuid: AZ2, name: 'rack-2', metadata: { availability_zone: 'az2' } },
        { uuid: AZ2B, name: 'rack-3', metadata: { availability_zone: 'az2' } },
      ],
    );
    // Without a zone the best host (free, 16 VCPU) wins: the zone is what sends it to a1.
    expect((await s.select({ flavor: small, instances: [one()] }))[0]!.host).toBe('free');
    expect((await s.select({ flavor: small, instances: [one()], availabilityZone: 'az1' }))[0]!.host).toBe('a1');
    // az2 is two aggregates: both hosts are in it, a1 and free are not.
    const az2 = await s.select({ flavor: small, instances: [one(), one()], availabilityZone: 'az2' });
    expect(az2.map((x) => x.host).sort()).toEqual(['a2', 'a2']);
    const explained = await s.explain({ flavor: small, instances: [one()], availabilityZone: 'az2' });
    expect(requestFilter(explained, 'availability-zone')).toMatchObject({ removed: 2, query: `member_of=in:${[AZ2, AZ2B].sort().join(',')}` });
    expect(explained.weighed.map((w) => w.host).sort()).toEqual(['a2', 'a2b']);
    expect(explained.rejected).toContainEqual({ host: 'free', filter: 'availability-zone', reason: expect.stringContaining('not in availability zone az2') });
    // The request filters come first in the explanation, before the host manager and the filters.
    expect(explained.filters[0]!.filter).toBe('availability-zone');

    const error = await s.select({ flavor: small, instances: [one()], availabilityZone: 'az9' }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(NoValidHostError);
    const summary = (error as NoValidHostError).details.summary as Explanation;
    expect(summary.filters[0]).toMatchObject({ filter: 'availability-zone', stage: 'request-filter', removed: 4, query: 'member_of=in:' });
    expect(summary.filters[0]!.examples[0]!.reason).toBe('no aggregate has availability_zone=az9 (zones: az1, az2)');
  });

  it('availability-zone: a zone made after the scheduler started is seen at its next refresh', async () => {
    const late = uuidFor('agg-late');
    const { s, store } = await setup('az-late', [host('l1', 2, [late]), host('l2', 16)], [{ uuid: late, name: 'late', metadata: {} }]);
    expect((await s.select({ flavor: small, instances: [one()] }))[0]!.host).toBe('l2');
    await store.upsertAggregate({ uuid: late, name: 'late', metadata: { availability_zone: 'late' } });
    expect((await s.select({ flavor: small, instances: [one()], availabilityZone: 'late' }))[0]!.host).toBe('l1');
  });

  it('tenant-isolation: an aggregate naming projects takes only their instances; others stay out', async () => {
    const hosts = [host('t1', 16, [TENANT]), host('open', 4)];
    const aggregates = [{ uuid: TENANT, name: 'tenant-ab', metadata: { filter_tenant_id: 'proj-a', filter_tenant_id_2: 'proj-b' } }];
    const { s } = await setup('tenant', hosts, aggregates, ['availability-zone', 'tenant-isolation']);
    expect((await s.select({ flavor: small, instances: [one('proj-a')] }))[0]!.host).toBe('t1');
    expect((await s.select({ flavor: small, instances: [one('proj-b')] }))[0]!.host).toBe('t1');
    expect((await s.select({ flavor: small, instances: [one('proj-c')] }))[0]!.host).toBe('open');
    // A batch is judged by all its projects: one outsider keeps the whole batch out.
    const batch = await s.select({ flavor: small, instances: [one('proj-a'), one('proj-c')] });
    expect(batch.map((x) => x.host)).toEqual(['open', 'open']);
    const explained = await s.explain({ flavor: small, instances: [one('proj-c')] });
    expect(requestFilter(explained, 'tenant-isolation')).toMatchObject({ removed: 1, query: `member_of=!in:${TENANT}` });
    expect(explained.rejected).toEqual([{ host: 't1', filter: 'tenant-isolation', reason: expect.stringContaining('project proj-c is not among the projects of tenant-isolated aggregate(s) tenant-ab') }]);
    expect(requestFilter(await s.explain({ flavor: small, instances: [one('proj-a')] }), 'tenant-isolation')).toBeUndefined();

    // Nova's default: tenant isolation is off until configured.
    const { s: defaults } = await setup('tenant-default', hosts, aggregates);
    expect((await defaults.select({ flavor: small, instances: [one('proj-c')] }))[0]!.host).toBe('t1');
  });

  it('isolated-aggregates: an aggregate requiring a trait takes only requests that require it', async () => {
    const { s } = await setup(
      'isolated',
      [host('gold', 16, [GOLD], ['CUSTOM_GOLD']), host('plain', 4, [], ['CUSTOM_GOLD'])],
      [{ uuid: GOLD, name: 'gold-hosts', metadata: { 'trait:CUSTOM_GOLD': 'required' } }],
      ['isolated-aggregates'],
    );
    expect((await s.select({ flavor: gold, instances: [one()] }))[0]!.host).toBe('gold');
    expect((await s.select({ flavor: small, instances: [one()] }))[0]!.host).toBe('plain');
    const explained = await s.explain({ flavor: small, instances: [one()] });
    expect(requestFilter(explained, 'isolated-aggregates')).toMatchObject({ removed: 1, query: `member_of=!in:${GOLD}` });
    expect(explained.rejected[0]).toMatchObject({ host: 'gold', filter: 'isolated-aggregates' });
    expect(explained.rejected[0]!.reason).toContain('gold-hosts');
    expect(explained.rejected[0]!.reason).toContain('CUSTOM_GOLD');
  });

  it('forbidden-aggregates: a request forbidding an aggregate (by name or uuid) stays out of it; others may land in it', async () => {
    const { s } = await setup('forbidden', [host('m', 16, [MAINT]), host('ok', 4)], [{ uuid: MAINT, name: 'maintenance', metadata: {} }]);
    expect((await s.select({ flavor: small, instances: [one()] }))[0]!.host).toBe('m');
    expect((await s.select({ flavor: small, instances: [one()], forbiddenAggregates: ['maintenance'] }))[0]!.host).toBe('ok');
    expect((await s.select({ flavor: small, instances: [one()], forbiddenAggregates: [MAINT] }))[0]!.host).toBe('ok');
    const explained = await s.explain({ flavor: small, instances: [one()], forbiddenAggregates: ['maintenance'] });
    expect(requestFilter(explained, 'forbidden-aggregates')).toMatchObject({ removed: 1, query: `member_of=!in:${MAINT}` });
  });

  it('refuses a request field that no configured request filter reads', async () => {
    const { s } = await setup('unread', [host('u1', 4)], [], ['tenant-isolation']);
    const zone = await s.select({ flavor: small, instances: [one()], availabilityZone: 'az1' }).catch((e: unknown) => e);
    expect(zone).toMatchObject({ code: 'ERT_SCHEDULER_INVALID_REQUEST', details: { key: 'availabilityZone' } });
    expect((zone as Error).message).toContain('needs the request filter availability-zone');
    const forbidden = await s.explain({ flavor: small, instances: [one()], forbiddenAggregates: ['x'] }).catch((e: unknown) => e);
    expect(forbidden).toMatchObject({ code: 'ERT_SCHEDULER_INVALID_REQUEST', details: { key: 'forbiddenAggregates' } });
  });
});
