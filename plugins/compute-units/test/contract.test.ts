// The plugin contract (@ert/plugin-testkit's describePluginContract) on both entries of the
// compute-units plugin, on the epyc-1s host profile: a flavor asking for compute units.
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, it } from 'vitest';
import { describePluginContract, flavor, type ContractFixture } from '@ert/plugin-testkit';
import compute from '../src/compute.js';
import scheduler from '../src/scheduler.js';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../../config/hosts/epyc-1s');
const fixture: ContractFixture<any> = { root, requests: [flavor({ vcpus: 2, extraSpecs: { 'cu:units': '8' } })] };

describePluginContract(compute, fixture, { describe, it });
describePluginContract(scheduler, { ...fixture, compute }, { describe, it });
