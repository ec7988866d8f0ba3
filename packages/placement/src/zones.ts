/** An aggregate as `@ert/store`'s `listAggregates` returns it (the fields read here). */
export interface ZoneAggregate {
  /** The aggregate's uuid. */
  uuid: string;
  /** Its metadata; `availability_zone` names its zone. */
  metadata: Readonly<Record<string, string>>;
  /** Uuids of the providers in it. */
  providers: readonly string[];
}

/** A host as `@ert/store`'s `listHosts` returns it (the fields read here). */
export interface ZoneHost {
  /** The host's name. */
  name: string;
  /** The uuid of its root provider (a host is in an aggregate when its root provider is). */
  rootProviderUuid: string;
}

/**
 * The aggregate metadata key that makes an aggregate an availability zone (Nova's): its value
 * is the zone's name, and the hosts whose root provider is in the aggregate are in the zone.
 */
export const AVAILABILITY_ZONE_KEY = 'availability_zone';

/** One availability zone: the aggregates that carry its name and the hosts in them. */
export interface AvailabilityZone {
  /** The zone's name (the `availability_zone` metadata value). */
  name: string;
  /** The aggregates whose `availability_zone` metadata names this zone, by uuid, sorted. */
  aggregates: string[];
  /** Names of the hosts whose root provider is in one of those aggregates, sorted. */
  hosts: string[];
}

/** Every availability zone of a fleet, and the hosts that are in none. */
export interface AvailabilityZones {
  /** The zones, by name. */
  zones: AvailabilityZone[];
  /** Hosts whose root provider is in no zone's aggregate, sorted (Nova puts them in its default zone). */
  hostsWithoutZone: string[];
}

/**
 * The availability zones of the aggregates and hosts given (`Store.listAggregates` and
 * `Store.listHosts` of `@ert/store`): an aggregate with the metadata `availability_zone=NAME` puts its
 * hosts (a host is in an aggregate when its root provider is) in zone NAME. Several
 * aggregates may name one zone; a host in aggregates of two zones is listed in both.
 */
export function availabilityZonesOf(aggregates: readonly ZoneAggregate[], hosts: readonly ZoneHost[]): AvailabilityZones {
  const hostOfRoot = new Map(hosts.map((h) => [h.rootProviderUuid, h.name]));
  const byName = new Map<string, { aggregates: Set<string>; hosts: Set<string> }>();
  const zoned = new Set<string>();
  for (const aggregate of aggregates) {
    const name = aggregate.metadata[AVAILABILITY_ZONE_KEY];
    if (name === undefined || name === '') continue;
    let zone = byName.get(name);
    if (!zone) {
      zone = { aggregates: new Set(), hosts: new Set() };
      byName.set(name, zone);
    }
    zone.aggregates.add(aggregate.uuid);
    for (const provider of aggregate.providers) {
      const host = hostOfRoot.get(provider);
      if (host === undefined) continue;
      zone.hosts.add(host);
      zoned.add(host);
    }
  }
  const zones = [...byName.entries()]
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    .map(([name, z]) => ({ name, aggregates: [...z.aggregates].sort(), hosts: [...z.hosts].sort() }));
  const hostsWithoutZone = hosts
    .map((h) => h.name)
    .filter((h) => !zoned.has(h))
    .sort();
  return { zones, hostsWithoutZone };
}
