import type { Inventory, ResourceClass } from '@ert/plugin-api';
import type { Allocation, ConsumerRecord, ProviderRecord, Store } from '@ert/store';
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

/** A consumer: its allocations, generation, project, user and type. */
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
   * Every provider with inventories, usages, traits and aggregates, hosts' or not, in one
   * snapshot read of a fixed number of queries (`loadProviders`).
   */
  async providers(): Promise<ProviderView[]> {
    return this.store.loadProviders();
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

  /** Instance records, each consumer uuid (instance and migration) to its type: INSTANCE, or MIGRATION. */
  private async typeIndex(): Promise<Map<string, string>> {
    const index = new Map<string, string>();
    for (const instance of await this.store.listInstances()) {
      index.set(instance.uuid, 'INSTANCE');
      if (instance.migrationUuid !== undefined) index.set(instance.migrationUuid, 'MIGRATION');
    }
    return index;
  }

  private view(record: ConsumerRecord, derivedType: string | undefined): ConsumerView {
    return {
      uuid: record.uuid,
      generation: record.generation,
      projectId: record.projectId,
      userId: record.userId,
      consumerType: record.consumerType ?? derivedType ?? 'unknown',
      allocations: record.allocations,
    };
  }

  /**
   * One consumer, or undefined when it holds nothing: the store's consumer record (project
   * and user as written). Its type is the one written (1.38's `consumer_type`); for a consumer
   * written without one (the tracker's and scheduler's), INSTANCE or MIGRATION from the
   * instance record that names it, else `unknown`.
   */
  async consumer(uuid: string): Promise<ConsumerView | undefined> {
    const record = await this.store.getConsumer(uuid);
    if (!record) return undefined;
    if (record.consumerType !== null) return this.view(record, undefined);
    const direct = await this.store.getInstance(uuid);
    return this.view(record, direct ? 'INSTANCE' : (await this.typeIndex()).get(uuid));
  }

  /** Every consumer holding allocations (only those on `providerUuid`, or of a project and user, when given). */
  async consumers(filter?: { providerUuid?: string; projectId?: string; userId?: string }): Promise<ConsumerView[]> {
    const [records, index] = await Promise.all([this.store.listConsumers(filter), this.typeIndex()]);
    return records.map((r) => this.view(r, index.get(r.uuid)));
  }
}
