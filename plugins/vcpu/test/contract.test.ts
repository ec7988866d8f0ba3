// The plugin contract (@ert/plugin-testkit's describePluginContract) on both entries of the
// vcpu plugin, on the xeon-2s-cat host profile: a dedicated flavor first, so the claim the contract adds and removes pins CPUs.
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, it } from 'vitest';
import { describePluginContract, flavor, type ContractFixture } from '@ert/plugin-testkit';
import compute from '../src/compute.js';
import scheduler from '../src/scheduler.js';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../../config/hosts/xeon-2s-cat');
const fixture: ContractFixture<any> = {
  root,
  options: { dedicatedCpus: '0-3,40-43' },
  requests: [flavor({ vcpus: 2, extraSpecs: { 'hw:cpu_policy': 'dedicated' } }), flavor({ vcpus: 2 })],
};

describePluginContract(compute, fixture, { describe, it });
describePluginContract(scheduler, { ...fixture, compute }, { describe, it });
