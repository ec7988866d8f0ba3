import { describe, expect, it } from 'vitest';
import {
  amountProblem,
  capacityOf,
  definePlugin,
  exclude,
  exclusionReason,
  inventoryProblem,
  isPlugin,
  isValidResourceClass,
  kindsOf,
  normalizeInventory,
  PLUGIN_API_VERSION,
} from '@ert/plugin-api';

describe('inventory arithmetic (Placement semantics)', () => {
  it('applies Placement defaults', () => {
    expect(normalizeInventory({ total: 8 })).toEqual({ total: 8, reserved: 0, minUnit: 1, maxUnit: 8, stepSize: 1, allocationRatio: 1 });
  });

  it('computes capacity as floor((total - reserved) * ratio)', () => {
    expect(capacityOf(normalizeInventory({ total: 10, reserved: 1, allocationRatio: 1.5 }))).toBe(13);
    expect(capacityOf(normalizeInventory({ total: 3, allocationRatio: 0.5 }))).toBe(1);
  });

  it('checks min_unit, max_unit, step_size and capacity, naming the rule', () => {
    const inv = normalizeInventory({ total: 16, minUnit: 2, maxUnit: 8, stepSize: 2 });
    expect(amountProblem(inv, 0, 4)).toBeUndefined();
    expect(amountProblem(inv, 0, 1)).toMatch(/min_unit 2/);
    expect(amountProblem(inv, 0, 10)).toMatch(/max_unit 8/);
    expect(amountProblem(inv, 0, 3)).toMatch(/step_size 2/);
    expect(amountProblem(inv, 12, 6)).toMatch(/needs 6, 4 free of capacity 16/);
    expect(amountProblem(inv, 12, 4)).toBeUndefined();
  });

  it('rejects invalid inventories with the field named', () => {
    expect(inventoryProblem(normalizeInventory({ total: 4, reserved: 5 }))).toMatch(/reserved/);
    expect(inventoryProblem({ ...normalizeInventory({ total: 4 }), allocationRatio: 0 })).toMatch(/allocationRatio/);
    expect(inventoryProblem({ ...normalizeInventory({ total: 4 }), stepSize: 0 })).toMatch(/stepSize/);
    expect(inventoryProblem(normalizeInventory({ total: 4 }))).toBeUndefined();
  });

  it('accepts standard and CUSTOM_ classes only', () => {
    expect(isValidResourceClass('VCPU')).toBe(true);
    expect(isValidResourceClass('CUSTOM_LLC_WAYS')).toBe(true);
    expect(isValidResourceClass('CUSTOM_llc')).toBe(false);
    expect(isValidResourceClass('GPU')).toBe(false);
  });
});

describe('plugin definitions', () => {
  it('brands plugins with the API version and lists their kinds', () => {
    const plugin = definePlugin({ name: 'x', resource: () => ({ discover: () => ({ available: true }) }), filter: () => ({ filter: () => undefined }) });
    expect(isPlugin(plugin)).toBe(true);
    expect(isPlugin({ name: 'x' })).toBe(false);
    expect(plugin.apiVersion).toBe(PLUGIN_API_VERSION);
    expect(kindsOf(plugin)).toEqual(['resource', 'filter']);
  });

  it('marks exclusions so they cannot be confused with host data', () => {
    expect(exclusionReason(exclude('stats v3 not read'))).toBe('stats v3 not read');
    expect(exclusionReason({ exclude: 'x' })).toBeUndefined();
  });
});
