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
    expect(inventoryProblem({ ...normalizeInventory({ total: 4 }), allocationRatio: 0 })).toMatch(/allocationRatio must be a positive number, got 0/);
    expect(inventoryProblem({ ...normalizeInventory({ total: 4 }), stepSize: 0 })).toMatch(/stepSize/);
    expect(inventoryProblem(normalizeInventory({ total: 4 }))).toBeUndefined();
  });

  it('with zeroRatio (the store, as Placement), a ratio of 0 is valid and leaves no capacity; a negative one is not', () => {
    // Catches the store refusing what Placement stores (PUT .../inventories at 1.26+ with
    // allocation_ratio 0), and a ratio of 0 that would leave room. Seen red without the option.
    const zero = normalizeInventory({ total: 4, allocationRatio: 0 });
    expect(inventoryProblem(zero, { zeroRatio: true })).toBeUndefined();
    expect(capacityOf(zero)).toBe(0);
    expect(amountProblem(zero, 0, 1)).toBe('needs 1, 0 free of capacity 0');
    expect(inventoryProblem({ ...zero, allocationRatio: -1 }, { zeroRatio: true })).toBe('allocationRatio must be a non-negative number, got -1');
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
