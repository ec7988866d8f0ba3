import type { Inventory, ResourceClass } from '@ert/plugin-api';
import type { Allocation, InstanceRecord, ProviderRecord, Store } from '@ert/store';
import { STANDARD_CLASSES, STANDARD_CLASS_SET, STANDARD_TRAITS, STANDARD_TRAIT_SET } from './standards.js';

/**
 * What the API reads, composed from the store contract only (`Store`, packages/store/src/api.ts):
 * handlers never write SQL. Each function is one read of the API's model. Where the contract
 * has no read of its own (all providers with their inventories, the consumers of a provider,
 * a consumer's project), the read is composed from several store calls; docs/api.md lists
 * the store reads that would make each one a single call.
 */

/** A provider with everything the list filters, summaries and candidates need. */
export interface ProviderView extends ProviderRecord {
  inventories: Record<ResourceClass, Inventory>;
  usages: Record<ResourceClass, number>;
  traits: string[];
  aggregates: string[];
}

/** Placement's `[placement] incomplete_consumer_project_id` / `_user_id` default. */
export const INCOMPLETE_CONSUMER_ID = '00000000-0000-0000-0000-000000000000';

/** A consumer: its allocations, generation and what the store knows of it. */
export interface ConsumerView {
  uuid: string;
  generation: number;
  projectId: string;
  userId: string;
  /** INSTANCE, MIGRATION (a resize or migration's held allocations), or `unknown`. */
  consumerType: string;
  allocations: Allocation[];
}

export class Reads {
  constructor(readonly store: Store) {}

  /**
   * Every provider with inventories, usages, traits and aggregates: the hosts' trees from
   * `loadHosts` (a fixed number of queries), then any provider outside them one by one.
   */
  async providers(): Promise<ProviderView[]> {
    const [hosts, records] = await Promise.all([this.store.loadHosts(), this.store.listProviders()]);
    const seen = new Map<string, ProviderView>();
    for (const host of hosts) {
      for (const p of [...host.providers, ...host.sharingProviders]) {
        if (!seen.has(p.uuid)) seen.set(p.uuid, { ...p, traits: [...p.traits], aggregates: [...p.aggregates] });
      }
    }
    const out: ProviderView[] = [];
    for (const record of records) {
      const known = seen.get(record.uuid);
      // The record from listProviders carries the newest generation.
      out.push(known ? { ...known, generation: record.generation } : await this.providerView(record));
    }
    return out;
  }

  /** One provider with its inventories, usages, traits and aggregates. */
  async providerView(record: ProviderRecord): Promise<ProviderView> {
    const [inv, usages, traits, aggregates] = await Promise.all([
      this.store.getInventories(record.uuid),
      this.store.getUsages(record.uuid),
      this.store.getTraits(record.uuid),
      this.store.getAggregates(record.uuid),
    ]);
    return { ...record, generation: inv.generation, inventories: inv.inventories, usages, traits, aggregates };
  }

  provider(uuid: string): Promise<ProviderRecord | undefined> {
    return this.store.getProvider(uuid);
  }

  /** The 21 standard classes (os-resource-classes order), then the store's others (its custom classes). */
  async resourceClasses(): Promise<string[]> {
    const stored = await this.store.listResourceClasses();
    return [...STANDARD_CLASSES, ...stored.filter((c) => !STANDARD_CLASS_SET.has(c)).sort()];
  }

  /**
   * Every trait: the 345 standard ones and those the store records (custom traits created
   * through the API, and traits providers were given), with the set of those a provider has.
   */
  async traits(): Promise<{ all: string[]; associated: Set<string> }> {
    const recorded = await this.store.listTraits();
    const associated = new Set(recorded.filter((t) => t.associated).map((t) => t.name));
    const others = recorded.map((t) => t.name).filter((t) => !STANDARD_TRAIT_SET.has(t)).sort();
    return { all: [...STANDARD_TRAITS, ...others], associated };
  }

  /** Instance records, each consumer uuid (instance and migration) to its instance and type. */
  private async consumerIndex(): Promise<Map<string, { instance: InstanceRecord; type: string }>> {
    const index = new Map<string, { instance: InstanceRecord; type: string }>();
    for (const instance of await this.store.listInstances()) {
      index.set(instance.uuid, { instance, type: 'INSTANCE' });
      if (instance.migrationUuid !== undefined) index.set(instance.migrationUuid, { instance, type: 'MIGRATION' });
    }
    return index;
  }

  private async consumerOf(uuid: string, known: { instance: InstanceRecord; type: string } | undefined): Promise<ConsumerView | undefined> {
    const { generation, allocations } = await this.store.getAllocations(uuid);
    if (generation === null || allocations.length === 0) return undefined;
    return {
      uuid,
      generation,
      projectId: known?.instance.projectId ?? INCOMPLETE_CONSUMER_ID,
      userId: known?.instance.userId ?? INCOMPLETE_CONSUMER_ID,
      consumerType: known?.type ?? 'unknown',
      allocations,
    };
  }

  /**
   * One consumer, or undefined when it holds nothing. Project, user and type come from the
   * instance record that names it (as instance or migration); a consumer no instance names
   * is shown as Placement shows an incomplete consumer (all-zero project and user, type
   * `unknown`).
   */
  async consumer(uuid: string): Promise<ConsumerView | undefined> {
    const direct = await this.store.getInstance(uuid);
    const known = direct ? { instance: direct, type: 'INSTANCE' } : (await this.consumerIndex()).get(uuid);
    return this.consumerOf(uuid, known);
  }

  /**
   * Every consumer the store's instance records name (instances and their migrations), with
   * their allocations. The contract has no list of consumers: allocations written for a
   * consumer that no instance names are not found here (`providerAllocations` detects it).
   */
  async consumers(): Promise<ConsumerView[]> {
    const index = await this.consumerIndex();
    const out: ConsumerView[] = [];
    for (const [uuid, known] of index) {
      const consumer = await this.consumerOf(uuid, known);
      if (consumer) out.push(consumer);
    }
    return out;
  }
}
