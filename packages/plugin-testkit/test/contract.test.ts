/**
 * The contract's checks, each seen red: the widgets plugin (./widgets.ts) passes every
 * check, and each variant below breaks one rule and is caught by the check that holds it
 * (the `failing` lists are exact, so a check that stopped catching its fault, or started
 * catching faults that are not its own, turns this file red).
 */
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ErtError, type ResourceContext } from '@ert/plugin-api';
import {
  CONTRACT_CHECKS,
  ContractViolation,
  describePluginContract,
  pluginContractChecks,
  verifyPluginContract,
  writeHostTree,
  type ContractCheckId,
  type ContractFixture,
  type HostTree,
} from '../src/index.js';
import { widgetConsumer, widgetFilter, widgetHooks, widgetWeigher, widgets, type WidgetOptions } from './widgets.js';

let tree: HostTree;
let fixture: ContractFixture<WidgetOptions>;
beforeAll(async () => {
  tree = await writeHostTree({ files: { '/etc/widgets/count': '8' } });
  fixture = { root: tree.root };
});
afterAll(() => tree.cleanup());

async function failing(plugin: ReturnType<typeof widgets>, f: ContractFixture<WidgetOptions> = fixture): Promise<ContractCheckId[]> {
  return (await verifyPluginContract(plugin, f)).filter((r) => r.problem !== undefined).map((r) => r.id);
}

/** The good hooks with some replaced. */
const hooksWith = (override: (ctx: ResourceContext<WidgetOptions>, good: ReturnType<typeof widgetHooks>) => Partial<ReturnType<typeof widgetHooks>>) => (ctx: ResourceContext<WidgetOptions>) => {
  const good = widgetHooks(ctx);
  return { ...good, ...override(ctx, good) };
};

describe('the contract on a plugin that honours it', () => {
  it('passes every check, resource and scheduler side', async () => {
    const results = await verifyPluginContract(widgets(), fixture);
    expect(results.map((r) => [r.id, r.problem])).toEqual(Object.keys(CONTRACT_CHECKS).map((id) => [id, undefined]));
  });

  it('a scheduler entry alone gets the definition and scheduler checks, fed by its compute entry', () => {
    const scheduler = widgets({ resource: undefined });
    expect(pluginContractChecks(scheduler, { ...fixture, compute: widgets() }).map((c) => c.id)).toEqual(['definition', 'scheduler-sync', 'scheduler-pure']);
    expect(pluginContractChecks(widgets({ consumer: undefined, filter: undefined, weigher: undefined }), fixture).map((c) => c.id)).not.toContain('scheduler-sync');
  });
});

describe('each check goes red on a plugin that breaks its rule', () => {
  it('definition: an extra-spec key whose schema the parser does not support', async () => {
    const broken = widgets({ extraSpecs: [{ key: 'widgets:count', description: 'd', schema: { type: 'integer', multipleOf: 2 } }] });
    expect(await failing(broken)).toEqual(['definition']);
  });

  it('discover-idempotent: a discovery that changes every time it runs', async () => {
    const broken = widgets({
      resource: hooksWith((_ctx, good) => {
        let calls = 0;
        return { discover: async () => ({ ...(await good.discover()), ...(calls++ > 0 ? { reason: `run ${calls}` } : {}) }) };
      }),
    });
    expect(await failing(broken)).toEqual(['discover-idempotent']);
  });

  it('discovery-well-formed: a trait that is no trait name, a child key with capitals', async () => {
    const trait = widgets({ resource: hooksWith((_ctx, good) => ({ discover: async () => ({ ...(await good.discover()), children: [{ key: 'Widgets-0', traits: [] }] }) })) });
    expect(await failing(trait)).toEqual(['discovery-well-formed']);
  });

  it('stats-valid: stats that fail the declared schema', async () => {
    const broken = widgets({ resource: hooksWith((_ctx, good) => ({ stats: () => ({ ...good.stats!(), used: 'none' as unknown as number }) })) });
    expect(await failing(broken)).toEqual(['stats-valid']);
  });

  it('test-read-only: a test that books what it accepts (changes the view)', async () => {
    const broken = widgets({
      resource: hooksWith((_ctx, good) => ({
        test(request) {
          const answer = good.test!(request);
          if (answer === undefined) good.held.set(request.instance.uuid, 1);
          return answer;
        },
      })),
    });
    // The booking also leaves instances behind after add and remove: both checks see it.
    expect(await failing(broken)).toEqual(['test-read-only', 'add-remove-symmetric']);
  });

  it('test-answers-well-formed: a grant naming units that are not distinct non-empty strings', async () => {
    const broken = widgets({ resource: hooksWith((_ctx, good) => ({ test: (request) => good.test!(request) ?? { units: ['', 'w/1'] } })) });
    expect(await failing(broken)).toEqual(['test-answers-well-formed']);
  });

  it('add-remove-symmetric: a removeInstance that forgets nothing', async () => {
    const broken = widgets({ resource: hooksWith(() => ({ removeInstance() {} })) });
    expect(await failing(broken)).toEqual(['add-remove-symmetric']);
  });

  it('add-remove-symmetric: an addInstance that counts a uuid twice', async () => {
    const broken = widgets({
      resource: hooksWith((_ctx, good) => ({
        addInstance(instance) {
          good.held.set(instance.uuid, (good.held.get(instance.uuid) ?? 0) + 1);
        },
      })),
    });
    expect(await failing(broken)).toEqual(['add-remove-symmetric']);
  });

  it('host-untouched: a discover that writes below the root', async () => {
    const broken = widgets({
      resource: hooksWith((ctx, good) => ({
        async discover() {
          await writeFile(path.join(ctx.root, 'etc/widgets/seen'), String(Math.random())).catch(() => undefined);
          return good.discover();
        },
      })),
    });
    const own = await writeHostTree({ files: { '/etc/widgets/count': '8' } });
    try {
      expect(await failing(broken, { root: own.root })).toEqual(['host-untouched']);
    } finally {
      await own.cleanup();
    }
  });

  it('unavailable-not-thrown: a discover that throws on a missing file', async () => {
    const broken = widgets({
      resource: hooksWith((ctx, good) => ({
        async discover() {
          await import('node:fs/promises').then((fs) => fs.readFile(path.join(ctx.root, 'etc/widgets/count'), 'utf8'));
          return good.discover();
        },
      })),
    });
    expect(await failing(broken)).toEqual(['unavailable-not-thrown']);
  });

  it('unavailable-not-thrown: stats that fail with a bare TypeError when unavailable', async () => {
    const broken = widgets({
      resource: hooksWith((_ctx, good) => ({
        stats() {
          const s = good.held.size >= 0 ? (undefined as unknown as { total: number }) : { total: 1 };
          try {
            return good.stats!();
          } catch (err) {
            if (err instanceof ErtError) return { total: s.total, used: 0 }; // TypeError: reading total of undefined
            throw err;
          }
        },
      })),
    });
    expect(await failing(broken)).toEqual(['unavailable-not-thrown']);
  });

  it('scheduler-sync: an async filter', async () => {
    const broken = widgets({ filter: () => ({ ...widgetFilter(), filter: async () => undefined }) as never });
    expect(await failing(broken)).toEqual(['scheduler-sync']);
  });

  it('scheduler-sync: a consume that returns a promise, a weigher that returns NaN', async () => {
    expect(await failing(widgets({ consumer: () => ({ ...widgetConsumer(), consume: async () => ({ free: 1 }) }) as never }))).toEqual(['scheduler-sync']);
    expect(await failing(widgets({ weigher: () => ({ weigh: () => Number.NaN }) }))).toEqual(['scheduler-sync']);
  });

  it('scheduler-pure: a weigher that answers differently for the same host', async () => {
    let n = 0;
    expect(await failing(widgets({ weigher: () => ({ ...widgetWeigher(), weigh: () => n++ }) }))).toEqual(['scheduler-pure']);
  });

  it('scheduler-pure: a consumer that modifies the stats it is given', async () => {
    const broken = widgets({
      consumer: () => ({
        ...widgetConsumer(),
        consume(stats) {
          if (stats) stats.used += 1;
          return widgetConsumer().consume(stats, undefined as never);
        },
      }),
    });
    expect(await failing(broken)).toEqual(['scheduler-pure']);
  });
});

describe('describePluginContract', () => {
  it('registers one test per check with the runner it is given; a broken rule fails its test with a ContractViolation', async () => {
    const tests: Array<{ name: string; fn: () => Promise<void> }> = [];
    const suites: string[] = [];
    const runner = { describe: (name: string, fn: () => void) => (suites.push(name), fn()), it: (name: string, fn: () => Promise<void>) => void tests.push({ name, fn }) };
    describePluginContract(widgets({ resource: hooksWith(() => ({ removeInstance() {} })) }), fixture, runner);
    expect(suites).toEqual(['plugin widgets honours the plugin contract']);
    expect(tests.map((t) => t.name.split(':')[0])).toEqual(Object.keys(CONTRACT_CHECKS));
    const outcomes = await Promise.all(tests.map((t) => t.fn().then(() => undefined, (err: unknown) => err)));
    const failed = outcomes.flatMap((err, i) => (err === undefined ? [] : [[tests[i]!.name.split(':')[0], err]] as const));
    expect(failed.map(([id]) => id)).toEqual(['add-remove-symmetric']);
    const [, err] = failed[0]!;
    expect(err).toBeInstanceOf(ContractViolation);
    expect(err).toMatchObject({ code: 'ERT_TESTKIT_CONTRACT_VIOLATION', details: { plugin: 'widgets', check: 'add-remove-symmetric' } });
    expect((err as Error).message).toMatch(/after addInstance and removeInstance the view is not back at the start/);
  });
});
