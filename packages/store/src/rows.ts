/** The store's table rows and their conversion to the records of the store contract (api.ts). */
import type { Flavor, HostStatus, Inventory, JsonValue } from '@ert/plugin-api';
import type { HostRecord, InstanceRecord, InstanceState, ProviderRecord, StatsRecord } from './api.js';

export const HOST_STATUSES: ReadonlySet<string> = new Set<HostStatus>(['up', 'stale', 'disabled']);
export const INSTANCE_STATES: ReadonlySet<string> = new Set<InstanceState>(['scheduled', 'active', 'resizing', 'error', 'refused', 'expired']);
/** Outcomes of a reservation that hold nothing: not instances of their host for the scheduler. */
export const ENDED_STATES: InstanceState[] = ['refused', 'expired'];

/** A provider row with its parent's and root's uuids (`StoreContext.providerQuery`) as a record. */
export function providerRecordFromRow(row: { uuid: string; name: string; generation: number; parent_uuid: string | null; root_uuid: string | null; owner?: string | null }): ProviderRecord {
  const record: ProviderRecord = { uuid: row.uuid, name: row.name, rootUuid: row.root_uuid ?? row.uuid, generation: row.generation };
  if (row.parent_uuid !== null) record.parentUuid = row.parent_uuid;
  if (row.owner !== undefined && row.owner !== null) record.owner = row.owner;
  return record;
}

/** A host row with its root provider's uuid (`StoreContext.hostQuery`) as a record. */
export function hostRecordFromRow(row: HostRow & { root_uuid: string }): HostRecord {
  return hostFromRow(row, row.root_uuid);
}

export interface ProviderRow {
  id: number;
  uuid: string;
  name: string;
  parent_id: number | null;
  root_id: number | null;
  generation: number;
}

export interface InventoryRow {
  provider_id: number;
  resource_class_id: number;
  total: number;
  reserved: number;
  min_unit: number;
  max_unit: number;
  step_size: number;
  allocation_ratio: number;
  /** Migration 0009: the writer owning the row (`tracker`), null for others. */
  owner?: string | null;
}

export interface HostRow {
  id: number;
  name: string;
  root_provider_id: number;
  status: string;
  last_update: number | string;
  generation: number;
  machine?: string | null;
  status_reason?: string | null;
}

export interface InstanceRow {
  uuid: string;
  host: string;
  project_id: string;
  user_id: string;
  flavor: string;
  previous_flavor: string | null;
  migration_uuid: string | null;
  assignments: string;
  cpus: string | null;
  units: string | null;
  pools: string | null;
  reason: string | null;
  state: string;
  created_at: number | string;
  updated_at: number | string;
}

export interface StatsRow {
  host_id: number;
  plugin: string;
  schema_version: number;
  data: string;
  updated_at: number | string;
}

export function inventoryFromRow(row: InventoryRow): Inventory {
  return {
    total: row.total,
    reserved: row.reserved,
    minUnit: row.min_unit,
    maxUnit: row.max_unit,
    stepSize: row.step_size,
    allocationRatio: Number(row.allocation_ratio),
  };
}

export function inventoryToRow(providerId: number, classId: number, inv: Inventory, owner: string | null = null): InventoryRow {
  return {
    provider_id: providerId,
    resource_class_id: classId,
    total: inv.total,
    reserved: inv.reserved,
    min_unit: inv.minUnit,
    max_unit: inv.maxUnit,
    step_size: inv.stepSize,
    allocation_ratio: inv.allocationRatio,
    owner,
  };
}

export function hostFromRow(row: HostRow, rootProviderUuid: string): HostRecord {
  return {
    name: row.name,
    rootProviderUuid,
    status: row.status as HostStatus,
    lastUpdate: Number(row.last_update),
    generation: row.generation,
    ...(row.machine ? { machine: row.machine } : {}),
    ...(row.status_reason ? { statusReason: row.status_reason } : {}),
  };
}

export function instanceFromRow(row: InstanceRow): InstanceRecord {
  const record: InstanceRecord = {
    uuid: row.uuid,
    host: row.host,
    projectId: row.project_id,
    userId: row.user_id,
    flavor: JSON.parse(row.flavor) as Flavor,
    state: row.state as InstanceState,
    assignments: JSON.parse(row.assignments) as Record<string, JsonValue>,
    createdAt: Number(row.created_at),
    updatedAt: Number(row.updated_at),
  };
  if (row.previous_flavor !== null) record.previousFlavor = JSON.parse(row.previous_flavor) as Flavor;
  if (row.migration_uuid !== null) record.migrationUuid = row.migration_uuid;
  if (row.cpus !== null) record.cpus = JSON.parse(row.cpus) as number[];
  if (row.units !== null && row.units !== undefined) record.units = JSON.parse(row.units) as string[];
  if (row.pools !== null && row.pools !== undefined) record.pools = JSON.parse(row.pools) as NonNullable<InstanceRecord['pools']>;
  if (row.reason !== null && row.reason !== undefined) record.reason = row.reason;
  return record;
}

export function statsRecords(rows: StatsRow[]): Record<string, StatsRecord> {
  const out: Record<string, StatsRecord> = {};
  for (const r of rows) out[r.plugin] = { plugin: r.plugin, schemaVersion: r.schema_version, data: JSON.parse(r.data) as JsonValue, updatedAt: Number(r.updated_at) };
  return out;
}
