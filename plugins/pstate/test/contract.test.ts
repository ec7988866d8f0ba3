// The plugin contract (@ert/plugin-testkit's describePluginContract) on both entries of the
// pstate plugin, on the xeon-2s-cat host profile: intel_pstate with EPP, so the flavor's governor and EPP are granted.
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, it } from 'vitest';
import { describePluginContract, flavor, type ContractFixture } from '@ert/plugin-testkit';
import compute from '../src/compute.js';
import scheduler from '../src/scheduler.js';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../../config/hosts/xeon-2s-cat');
const fixture: ContractFixture<any> = {
  root,
  requests: [flavor({ extraSpecs: { 'pstate:governor': 'performance', 'pstate:epp': 'performance' } }), flavor()],
};

describePluginContract(compute, fixture, { describe, it });
describePluginContract(scheduler, { ...fixture, compute }, { describe, it });
