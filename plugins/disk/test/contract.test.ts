// The plugin contract (@ert/plugin-testkit's describePluginContract) on both entries of the
// disk plugin, on the epyc-1s host profile: /var/lib/nova/instances on its own filesystem (the profile's .ert/statfs.json).
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, it } from 'vitest';
import { describePluginContract, flavor, type ContractFixture } from '@ert/plugin-testkit';
import compute from '../src/compute.js';
import scheduler from '../src/scheduler.js';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../../config/hosts/epyc-1s');
const fixture: ContractFixture<any> = { root, requests: [flavor({ diskGb: 20 })] };

describePluginContract(compute, fixture, { describe, it });
describePluginContract(scheduler, { ...fixture, compute }, { describe, it });
