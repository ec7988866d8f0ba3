/**
 * The traits and aggregates of every host, for `GET /scheduler/v1/host-facets` (the web view's
 * trait and aggregate filters, docs/ui.md). A host has a trait when any provider of its tree
 * has it (the root's CPU flags, a NUMA node's or an LLC domain's own traits); it is in an
 * aggregate when its root provider is (as Nova's host aggregates and ert's request filters
 * read membership). Hosts are grouped by their distinct (traits, aggregates) pair, so that
 * 10,000 hosts of a few kinds are a few groups of names, not 10,000 lists of 25 traits.
 */
import type { AggregateRecord, HostSnapshot } from '@ert/store';

/** `GET /scheduler/v1/host-facets`. */
export interface HostFacets {
  /** Every trait some host has, sorted; groups refer to them by index. */
  traits: string[];
  /** The aggregates some host's root is in (uuid order), with their name and metadata and how many hosts; groups refer to them by index. */
  aggregates: Array<{ uuid: string; name?: string; metadata: Record<string, string>; hosts: number }>;
  /** Hosts with the same traits and aggregates: indexes into `traits` and `aggregates`, and the hosts' names (sorted). */
  groups: Array<{ traits: number[]; aggregates: number[]; hosts: string[] }>;
}

/** A host's traits and aggregates, kept per snapshot (HostSnapshots keeps one until the host's generation moves). */
const facetsOfSnapshot = new WeakMap<HostSnapshot, { name: string; traits: string[]; aggregates: string[]; key: string }>();

function facetsOf(s: HostSnapshot): { name: string; traits: string[]; aggregates: string[]; key: string } {
  let f = facetsOfSnapshot.get(s);
  if (!f) {
    const traits = [...new Set(s.providers.flatMap((p) => p.traits))].sort();
    const aggregates = [...new Set(s.providers[0]?.aggregates ?? [])].sort();
    f = { name: s.host.name, traits, aggregates, key: `${traits.join(',')}|${aggregates.join(',')}` };
    facetsOfSnapshot.set(s, f);
  }
  return f;
}

/** The facets of `snapshots` (HostSnapshots.all()); `aggregates` names them (Store.listAggregates()). */
export function hostFacets(snapshots: readonly HostSnapshot[], aggregates: readonly AggregateRecord[]): HostFacets {
  const perHost = snapshots.map(facetsOf);
  const groups = new Map<string, { traits: string[]; aggregates: string[]; hosts: string[] }>();
  for (const h of perHost) {
    const group = groups.get(h.key);
    if (group) group.hosts.push(h.name);
    else groups.set(h.key, { traits: h.traits, aggregates: h.aggregates, hosts: [h.name] });
  }
  const traits = [...new Set([...groups.values()].flatMap((g) => g.traits))].sort();
  const aggregateUuids = [...new Set([...groups.values()].flatMap((g) => g.aggregates))].sort();
  const traitIndex = new Map(traits.map((t, i) => [t, i]));
  const aggregateIndex = new Map(aggregateUuids.map((u, i) => [u, i]));
  const known = new Map(aggregates.map((a) => [a.uuid, a]));
  const counts = new Map<string, number>();
  for (const g of groups.values()) for (const a of g.aggregates) counts.set(a, (counts.get(a) ?? 0) + g.hosts.length);
  return {
    traits,
    aggregates: aggregateUuids.map((uuid) => {
      const a = known.get(uuid);
      return { uuid, ...(a?.name !== undefined ? { name: a.name } : {}), metadata: { ...(a?.metadata ?? {}) }, hosts: counts.get(uuid) ?? 0 };
    }),
    groups: [...groups.values()].map((g) => ({ traits: g.traits.map((t) => traitIndex.get(t)!), aggregates: g.aggregates.map((a) => aggregateIndex.get(a)!), hosts: [...g.hosts].sort() })),
  };
}
