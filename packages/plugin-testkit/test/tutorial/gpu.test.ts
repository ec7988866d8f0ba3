import { afterAll, describe, expect, it } from 'vitest';
import {
  describePluginContract,
  flavor,
  hostState,
  pluginContext,
  resourceContext,
  specFromFlavor,
  writeHostTree,
} from '@ert/plugin-testkit';
import gpu from './gpu.js';

// A machine with two NVIDIA cards and one virtio card, laid out like /sys.
const tree = await writeHostTree({
  files: {
    '/sys/class/drm/card0/device/vendor': '0x10de',
    '/sys/class/drm/card1/device/vendor': '0x10de',
    '/sys/class/drm/card2/device/vendor': '0x1af4',
  },
});
afterAll(() => tree.cleanup());

// Every rule of the plugin contract, one test each.
describePluginContract(gpu, { root: tree.root, requests: [flavor({ extraSpecs: { 'gpu:count': '1' } })] }, { describe, it });

describe('gpu', () => {
  it('counts the cards of the configured vendors', async () => {
    const hooks = await gpu.resource!(resourceContext(gpu, tree.root));
    expect(await hooks.discover()).toEqual({ available: true, host: { inventories: { CUSTOM_GPU: { total: 2 } } } });
    const other = await gpu.resource!(resourceContext(gpu, tree.root, { options: { vendors: ['0x1af4'] } }));
    expect(await other.discover()).toMatchObject({ host: { inventories: { CUSTOM_GPU: { total: 1 } } } });
  });

  it('refuses a host with fewer free GPUs than the flavor asks for', async () => {
    const filter = await gpu.filter!(pluginContext(gpu));
    const spec = specFromFlavor(flavor({ extraSpecs: { 'gpu:count': '2' } }), gpu);
    const host = hostState({ inventories: { CUSTOM_GPU: { total: 2 } }, usages: { CUSTOM_GPU: 1 } });
    expect(filter.filter(host, spec)).toBe('gpu: needs 2, 1 free');
  });
});
