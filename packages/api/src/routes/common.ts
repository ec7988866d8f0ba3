import type { Inventory } from '@ert/plugin-api';
import { ApiError, notFound } from '../errors.js';
import { atLeast, v, type Version } from '../microversion.js';
import type { ApiRequest } from '../route.js';
import type { ProviderView } from '../reads.js';
import type { ProviderRecord } from '@ert/store';

/** Placement's inventory record (snake_case) from the store's. */
export function inventoryRecord(inv: Inventory): Record<string, number> {
  return {
    total: inv.total,
    reserved: inv.reserved,
    min_unit: inv.minUnit,
    max_unit: inv.maxUnit,
    step_size: inv.stepSize,
    allocation_ratio: inv.allocationRatio,
  };
}

/** `/resource_providers/<u>` below the mount point (Placement's `SCRIPT_NAME` prefix). */
export function providerUrl(prefix: string, uuid: string): string {
  return `${prefix}/resource_providers/${uuid}`;
}

/** A resource provider as Placement serialises it at `version` (links by version, tree from 1.14). */
export function providerBody(p: ProviderRecord | ProviderView, version: Version, prefix: string): Record<string, unknown> {
  const base = providerUrl(prefix, p.uuid);
  const links = [
    { rel: 'self', href: base },
    { rel: 'inventories', href: `${base}/inventories` },
    { rel: 'usages', href: `${base}/usages` },
  ];
  if (atLeast(version, v('1.1'))) links.push({ rel: 'aggregates', href: `${base}/aggregates` });
  if (atLeast(version, v('1.6'))) links.push({ rel: 'traits', href: `${base}/traits` });
  if (atLeast(version, v('1.11'))) links.push({ rel: 'allocations', href: `${base}/allocations` });
  const body: Record<string, unknown> = { generation: p.generation, uuid: p.uuid, name: p.name, links };
  if (atLeast(version, v('1.14'))) {
    body.parent_provider_uuid = p.parentUuid ?? null;
    body.root_provider_uuid = p.rootUuid;
  }
  return body;
}

/**
 * The provider named in the path, or Placement's 404. `message` builds the handler's own
 * text from Placement's base message; `caught` says whether Placement's handler catches the
 * lookup itself (its 404 then carries `vary`) or lets it reach its dispatcher (no `vary`).
 */
export async function providerOr404(
  req: ApiRequest,
  style: 'uncaught' | 'spaced-colon' | 'colon' | 'allocations' = 'uncaught',
): Promise<ProviderRecord> {
  const uuid = req.params.uuid!;
  const provider = await req.reads.provider(uuid);
  if (provider) return provider;
  const base = `No resource provider with uuid ${uuid} found`;
  switch (style) {
    case 'uncaught':
      throw new ApiError(404, base, undefined, {}, { vary: false });
    case 'spaced-colon':
      throw notFound(`${base} : ${base}`);
    case 'colon':
      throw notFound(`${base}: ${base}`);
    case 'allocations':
      throw notFound(`Resource provider '${uuid}' not found: ${base}`);
  }
}

/** Object with sorted keys (stable output). */
export function sortedObject<T>(entries: Iterable<[string, T]>): Record<string, T> {
  return Object.fromEntries([...entries].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)));
}
