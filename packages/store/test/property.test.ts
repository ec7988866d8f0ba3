import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { normalizeInventory, type Inventory } from '@ert/plugin-api';
import type { AllocationWrite, Store } from '@ert/store';
import { claimPaths, openStore } from './backends.js';

/*
 * Random sequences of inventory and allocation operations, applied to the store and to a
 * small in-memory model of Placement's rules. After every step the store must agree with
 * the model: the same outcome (success or error code), the same inventories, allocations,
 * usages and generations. Usage never exceeds capacity; failed operations change nothing;
 * generations move only on change.
 *
 * The model's arithmetic is Placement's, written out here (capacity, unit rules), not the
 * contract's `capacityOf` / `amountProblem` that the store itself uses: a wrong rule there
 * would otherwise be wrong in the model too. Mutation seen caught: `capacityOf` in
 * plugin-api ignoring `reserved` (the store accepted claims the model refused).
 */

/** Placement's capacity: floor((total - reserved) x allocation_ratio). */
function capacity(inv: Inventory): number {
  return Math.floor((inv.total - inv.reserved) * inv.allocationRatio);
}

/** Placement's unit rules: min_unit <= amount <= max_unit and amount a multiple of step_size. */
function unitsFit(inv: Inventory, amount: number): boolean {
  return amount >= inv.minUnit && amount <= inv.maxUnit && amount % inv.stepSize === 0;
}

const PROVIDERS = 2;
const CONSUMERS = 3;
const CLASSES = ['VCPU', 'MEMORY_MB'] as const;

type GenChoice = 'current' | 'stale' | 'skip' | 'new';

type Op =
  | { kind: 'inventory'; provider: number; gen: GenChoice; inventories: Record<string, Inventory> }
  | { kind: 'write'; writes: Array<{ consumer: number; gen: GenChoice; allocations: Array<{ provider: number; rc: string; amount: number }> }> }
  | { kind: 'delete'; consumer: number };

const inventoryArb = fc
  .record({ total: fc.integer({ min: 1, max: 10 }), reserved: fc.integer({ min: 0, max: 2 }), ratio: fc.constantFrom(1, 1.5, 2), step: fc.constantFrom(1, 1, 2), maxUnit: fc.integer({ min: 1, max: 8 }) })
  .map(({ total, reserved, ratio, step, maxUnit }) =>
    normalizeInventory({ total, reserved: Math.min(reserved, total), allocationRatio: ratio, stepSize: step, maxUnit: Math.max(maxUnit, step) }),
  );
/** Inventory of every class, roomy enough that claims both succeed and collide. */
const fullInventoriesArb = fc.record({ VCPU: inventoryArb, MEMORY_MB: inventoryArb });
const genArb = fc.constantFrom<GenChoice>('current', 'current', 'current', 'stale', 'skip', 'new');
const allocationsArb = fc
  .uniqueArray(fc.record({ provider: fc.nat(PROVIDERS - 1), rc: fc.constantFrom(...CLASSES), amount: fc.integer({ min: 1, max: 6 }) }), {
    selector: (a) => `${a.provider}/${a.rc}`,
    maxLength: 3,
  });
const opArb: fc.Arbitrary<Op> = fc.oneof(
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('inventory' as const), provider: fc.nat(PROVIDERS - 1), gen: genArb, inventories: fc.dictionary(fc.constantFrom(...CLASSES), inventoryArb) }) },
  {
    weight: 5,
    arbitrary: fc.record({
      kind: fc.constant('write' as const),
      writes: fc.uniqueArray(fc.record({ consumer: fc.nat(CONSUMERS - 1), gen: genArb, allocations: allocationsArb }), { selector: (w) => w.consumer, minLength: 1, maxLength: 2 }),
    }),
  },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('delete' as const), consumer: fc.nat(CONSUMERS - 1) }) },
);

class ModelError extends Error {
  constructor(readonly code: string) {
    super(code);
  }
}

interface Model {
  providers: Array<{ generation: number; inventories: Record<string, Inventory> }>;
  consumers: Map<number, { generation: number; allocations: Array<{ provider: number; rc: string; amount: number }> }>;
}

function usageOf(model: Model, provider: number, rc: string, except?: number): number {
  let used = 0;
  for (const [id, c] of model.consumers) if (id !== except) for (const a of c.allocations) if (a.provider === provider && a.rc === rc) used += a.amount;
  return used;
}

/** Applies `op` to a copy of the model; returns the new model, or throws ModelError with the expected code. */
function applyModel(model: Model, op: Op, generationArg: (choice: GenChoice, actual: number | null) => number | null | undefined): Model {
  const next: Model = { providers: model.providers.map((p) => ({ ...p })), consumers: new Map(model.consumers) };
  if (op.kind === 'inventory') {
    const p = next.providers[op.provider]!;
    const gen = providerGenerationArg(op.gen, p.generation);
    if (gen !== undefined && gen !== p.generation) throw new ModelError('ERT_STORE_PROVIDER_GENERATION_CONFLICT');
    for (const rc of CLASSES) {
      const inv = op.inventories[rc];
      if (usageOf(next, op.provider, rc) > (inv ? capacity(inv) : 0)) throw new ModelError('ERT_STORE_INVENTORY_IN_USE');
    }
    next.providers[op.provider] = { generation: p.generation + 1, inventories: { ...op.inventories } };
    return next;
  }
  const writes = op.kind === 'delete' ? [{ consumer: op.consumer, gen: 'skip' as GenChoice, allocations: [] }] : op.writes;
  const touched = new Set<number>();
  for (const write of writes) {
    const current = next.consumers.get(write.consumer);
    const gen = generationArg(write.gen, current ? current.generation : null);
    if (gen !== undefined && gen !== (current ? current.generation : null)) throw new ModelError('ERT_STORE_CONSUMER_GENERATION_CONFLICT');
    for (const a of current?.allocations ?? []) touched.add(a.provider);
    for (const a of write.allocations) {
      const inv = next.providers[a.provider]!.inventories[a.rc];
      if (!inv) throw new ModelError('ERT_STORE_CAPACITY_EXCEEDED');
      const used = usageOf(next, a.provider, a.rc, write.consumer);
      // Over capacity wins over a unit rule (the store reports the capacity problem).
      if (used + a.amount > capacity(inv)) throw new ModelError('ERT_STORE_CAPACITY_EXCEEDED');
      if (!unitsFit(inv, a.amount)) throw new ModelError('ERT_STORE_INVALID');
      touched.add(a.provider);
    }
    if (write.allocations.length === 0) next.consumers.delete(write.consumer);
    else next.consumers.set(write.consumer, { generation: current ? current.generation + 1 : 1, allocations: write.allocations });
  }
  for (const p of touched) next.providers[p] = { ...next.providers[p]!, generation: next.providers[p]!.generation + 1 };
  return next;
}

/** The generation a caller passes: the current one, a wrong one, none, or "new" (null). */
function generationArg(choice: GenChoice, actual: number | null): number | null | undefined {
  if (choice === 'skip') return undefined;
  if (choice === 'new') return null;
  if (choice === 'current') return actual;
  return actual === null ? 7 : actual + 3;
}

/** Providers always exist, so "new" means no check there. */
function providerGenerationArg(choice: GenChoice, actual: number): number | undefined {
  return generationArg(choice === 'new' ? 'skip' : choice, actual) ?? undefined;
}

describe.each(claimPaths)('store against a model on $label', ({ client, extra }) => {
  let store: Store;
  let cleanup: () => Promise<void>;
  let run = 0;

  beforeAll(async () => {
    ({ store, cleanup } = await openStore(client, 'property', extra));
  });
  afterAll(async () => {
    await cleanup();
  });

  it('agrees with the model after every step', { timeout: 600_000 }, async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(opArb, { minLength: 1, maxLength: client === 'pg' ? 12 : 25 }), fc.array(fullInventoriesArb, { minLength: PROVIDERS, maxLength: PROVIDERS }), async (steps, initial) => {
        // Start with inventory on every provider so that most claims can succeed.
        const ops: Op[] = [...initial.map((inventories, provider): Op => ({ kind: 'inventory', provider, gen: 'current', inventories })), ...steps];
        const prefix = `r${++run}`;
        const provider = (i: number) => `${prefix}-p${i}`;
        const consumer = (i: number) => `${prefix}-c${i}`;
        let model: Model = { providers: [], consumers: new Map() };
        for (let i = 0; i < PROVIDERS; i++) {
          const created = await store.createProvider({ uuid: provider(i), name: provider(i) });
          model.providers.push({ generation: created.generation, inventories: {} });
        }
        for (const op of ops) {
          let expected: Model | ModelError;
          try {
            expected = applyModel(model, op, generationArg);
          } catch (err) {
            if (!(err instanceof ModelError)) throw err;
            expected = err;
          }
          let outcome = 'ok';
          try {
            if (op.kind === 'inventory') {
              await store.setInventories(provider(op.provider), providerGenerationArg(op.gen, model.providers[op.provider]!.generation), op.inventories);
            } else if (op.kind === 'delete') {
              await store.deleteAllocations(consumer(op.consumer));
            } else {
              const writes: AllocationWrite[] = op.writes.map((w) => {
                const current = model.consumers.get(w.consumer);
                return {
                  consumer: { uuid: consumer(w.consumer), projectId: 'p', userId: 'u', generation: generationArg(w.gen, current ? current.generation : null) },
                  allocations: w.allocations.map((a) => ({ providerUuid: provider(a.provider), resourceClass: a.rc, amount: a.amount })),
                };
              });
              await store.writeAllocations(writes);
            }
          } catch (err) {
            outcome = (err as { code?: string }).code ?? String(err);
          }
          expect({ op, outcome }).toEqual({ op, outcome: expected instanceof ModelError ? expected.code : 'ok' });
          if (!(expected instanceof ModelError)) model = expected;

          for (let i = 0; i < PROVIDERS; i++) {
            const { generation, inventories } = await store.getInventories(provider(i));
            expect({ provider: i, generation, inventories }).toEqual({ provider: i, ...model.providers[i] });
            const usages = await store.getUsages(provider(i));
            for (const rc of CLASSES) {
              const used = usageOf(model, i, rc);
              expect(usages[rc] ?? 0).toBe(used);
              expect(used).toBeLessThanOrEqual(inventories[rc] ? capacity(inventories[rc]) : 0);
            }
          }
          for (let c = 0; c < CONSUMERS; c++) {
            const stored = await store.getAllocations(consumer(c));
            const m = model.consumers.get(c);
            expect(stored.generation).toBe(m ? m.generation : null);
            const want = (m?.allocations ?? []).map((a) => ({ providerUuid: provider(a.provider), resourceClass: a.rc, amount: a.amount }));
            const key = (a: { providerUuid: string; resourceClass: string }) => `${a.providerUuid}/${a.resourceClass}`;
            expect([...stored.allocations].sort((a, b) => key(a).localeCompare(key(b)))).toEqual(want.sort((a, b) => key(a).localeCompare(key(b))));
          }
        }
      }),
      { numRuns: client === 'pg' ? 15 : 60 },
    );
  });
});
