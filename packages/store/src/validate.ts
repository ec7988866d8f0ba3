/** Input checks of the store's public methods: each throws ERT_STORE_INVALID (or NOT_FOUND, CAPACITY_EXCEEDED) naming the value at fault. */
import { amountProblem, capacityOf, inventoryProblem, isValidResourceClass, isValidTraitName, type Inventory, type ResourceClass } from '@ert/plugin-api';
import type { Allocation, AllocationWrite, HostImport, InstanceRecord } from './api.js';
import { CapacityExceededError, StoreConflictError, StoreError } from './errors.js';
import { checkHolds } from './holds.js';
import { HOST_STATUSES, INSTANCE_STATES } from './rows.js';

export function invalid(message: string, details: Record<string, unknown> = {}): StoreError {
  return new StoreError('ERT_STORE_INVALID', message, details);
}

export function notFound(what: string, key: string, details: Record<string, unknown> = {}): StoreError {
  return new StoreError('ERT_STORE_NOT_FOUND', `${what} ${key} not found`, details);
}

export function checkName(kind: string, value: unknown, max = 255): asserts value is string {
  if (typeof value !== 'string' || value.length === 0 || value.length > max) {
    throw invalid(`${kind} must be a non-empty string of at most ${max} characters, got ${JSON.stringify(value)}`, { [kind]: value });
  }
}

export function checkInventories(providerName: string, inventories: Record<ResourceClass, Inventory>): void {
  if (typeof inventories !== 'object' || inventories === null) throw invalid(`provider ${providerName}: inventories must be an object`);
  for (const [resourceClass, inv] of Object.entries(inventories)) {
    if (!isValidResourceClass(resourceClass)) {
      throw invalid(`provider ${providerName}: ${JSON.stringify(resourceClass)} is not a standard or CUSTOM_ resource class`, {
        provider: providerName,
        resourceClass,
      });
    }
    // A ratio of 0 (capacity 0) is Placement's to store: `PUT .../inventories` accepts it from 1.26.
    const problem = inventoryProblem(inv, { zeroRatio: true });
    if (problem) throw invalid(`provider ${providerName}: ${resourceClass} inventory: ${problem}`, { provider: providerName, resourceClass });
  }
}

export function checkTraits(providerName: string, traits: string[]): void {
  for (const trait of traits) {
    if (typeof trait !== 'string' || !isValidTraitName(trait)) {
      throw invalid(`provider ${providerName}: ${JSON.stringify(trait)} is not a valid trait name`, { provider: providerName, trait });
    }
  }
}

export function validateWrites(writes: AllocationWrite[]): void {
  if (!Array.isArray(writes)) throw invalid('writeAllocations expects an array of writes');
  const consumers = new Set<string>();
  for (const write of writes) {
    const uuid = write.consumer?.uuid;
    checkName('consumer', uuid, 36);
    if (consumers.has(uuid)) throw invalid(`consumer ${uuid} appears twice in one writeAllocations call`, { consumer: uuid });
    consumers.add(uuid);
    if (write.allocations.length > 0) {
      checkName('projectId', write.consumer.projectId);
      checkName('userId', write.consumer.userId);
    }
    // The column holds 255 characters: PostgreSQL refuses more, SQLite would keep them.
    if (write.consumer.consumerType !== undefined && write.consumer.consumerType !== null) checkName('consumerType', write.consumer.consumerType);
    const seen = new Set<string>();
    for (const a of write.allocations) {
      checkName('provider', a.providerUuid, 36);
      if (!isValidResourceClass(a.resourceClass)) {
        throw invalid(`consumer ${uuid}: ${JSON.stringify(a.resourceClass)} is not a standard or CUSTOM_ resource class`, { consumer: uuid, resourceClass: a.resourceClass });
      }
      if (!Number.isSafeInteger(a.amount) || a.amount < 1) {
        throw invalid(`consumer ${uuid}: ${a.resourceClass} on provider ${a.providerUuid}: amount must be a positive integer, got ${String(a.amount)}`, {
          consumer: uuid,
          provider: a.providerUuid,
          resourceClass: a.resourceClass,
          amount: a.amount,
        });
      }
      const key = `${a.providerUuid}\u0000${a.resourceClass}`;
      if (seen.has(key)) throw invalid(`consumer ${uuid}: ${a.resourceClass} on provider ${a.providerUuid} is listed twice`, { consumer: uuid, provider: a.providerUuid });
      seen.add(key);
    }
    if (write.instance) checkInstance(write.instance);
    if (write.removeInstance !== undefined && typeof write.removeInstance !== 'boolean') throw invalid(`consumer ${uuid}: removeInstance must be a boolean`, { consumer: uuid });
    if (write.removeInstance && (write.instance || write.allocations.length > 0)) {
      throw invalid(`consumer ${uuid}: removeInstance removes the instance record with its allocations; it takes no allocations and no instance`, { consumer: uuid });
    }
  }
}

/** The caller's consumer generation against the current one (null: no such consumer). */
export function checkConsumerGeneration(write: AllocationWrite, current: { generation: number } | null): void {
  const expected = write.consumer.generation;
  const actual = current ? current.generation : null;
  if (expected === undefined || expected === actual) return;
  throw new StoreConflictError(
    'ERT_STORE_CONSUMER_GENERATION_CONFLICT',
    `consumer ${write.consumer.uuid} changed: generation ${String(actual)}, caller read ${String(expected)}`,
    { consumer: write.consumer.uuid, expected, actual },
  );
}

/** Throws when `alloc` does not fit: capacity (ERT_STORE_CAPACITY_EXCEEDED) or units (ERT_STORE_INVALID). */
export function checkFits(provider: { uuid: string; name: string }, alloc: Allocation, entry: { inv: Inventory; used: number } | undefined): void {
  const details = { provider: provider.uuid, providerName: provider.name, resourceClass: alloc.resourceClass, requested: alloc.amount };
  if (!entry) throw new CapacityExceededError({ ...details, used: 0, free: 0, reason: `has no inventory (needs ${alloc.amount})` });
  const { inv, used } = entry;
  const problem = amountProblem(inv, used, alloc.amount);
  if (problem === undefined) return;
  const capacity = capacityOf(inv);
  if (used + alloc.amount > capacity) throw new CapacityExceededError({ ...details, used, free: Math.max(capacity - used, 0), reason: problem });
  throw invalid(`provider ${provider.name} (${provider.uuid}): ${alloc.resourceClass} ${problem}`, details);
}

export function checkInstance(instance: InstanceRecord): void {
  checkName('instance', instance.uuid, 36);
  checkName('host', instance.host);
  checkName('projectId', instance.projectId);
  checkName('userId', instance.userId);
  if (!INSTANCE_STATES.has(instance.state)) throw invalid(`instance ${instance.uuid}: unknown state ${JSON.stringify(instance.state)}`, { instance: instance.uuid });
  if (typeof instance.flavor !== 'object' || instance.flavor === null) throw invalid(`instance ${instance.uuid}: flavor must be an object`, { instance: instance.uuid });
  checkHolds(instance);
}

export function validateImport(hosts: HostImport[]): void {
  const hostNames = new Set<string>();
  const uuids = new Set<string>();
  const names = new Set<string>();
  for (const { host, providers, stats } of hosts) {
    checkName('host', host.name);
    if (hostNames.has(host.name)) throw invalid(`importHosts: host ${host.name} is listed twice`, { host: host.name });
    hostNames.add(host.name);
    if (host.status !== undefined && !HOST_STATUSES.has(host.status)) throw invalid(`host ${host.name}: unknown status ${JSON.stringify(host.status)}`, { host: host.name });
    if (providers.length === 0 || providers[0]!.parentUuid !== undefined) {
      throw invalid(`importHosts: host ${host.name} must list its root provider (no parentUuid) first`, { host: host.name });
    }
    const tree = new Set<string>();
    for (const p of providers) {
      checkName('uuid', p.uuid, 36);
      checkName('name', p.name, 200);
      if (p.owner !== undefined) checkName('owner', p.owner, 64);
      if (uuids.has(p.uuid) || names.has(p.name)) throw invalid(`importHosts: provider ${p.name} (${p.uuid}) is listed twice`, { host: host.name, provider: p.uuid });
      if (p !== providers[0] && (p.parentUuid === undefined || !tree.has(p.parentUuid))) {
        throw invalid(`importHosts: host ${host.name}: provider ${p.name} must name a parent listed before it in the same tree`, { host: host.name, provider: p.uuid });
      }
      uuids.add(p.uuid);
      names.add(p.name);
      tree.add(p.uuid);
      checkInventories(p.name, p.inventories);
      checkTraits(p.name, p.traits);
      for (const agg of p.aggregates) checkName('aggregate', agg, 36);
    }
    for (const [plugin, s] of Object.entries(stats ?? {})) {
      if (!Number.isSafeInteger(s.schemaVersion) || s.schemaVersion < 0) throw invalid(`host ${host.name}: plugin ${plugin} stats schemaVersion must be a non-negative integer`, { host: host.name, plugin });
    }
  }
}
