// The plugin contract (@ert/plugin-testkit's describePluginContract) on both entries of the
// llc plugin, on the xeon-2s-cat host profile: the profile has CAT, so the default request (one CUSTOM_LLC_WAYS) is granted ways and a CLOSID.
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, it } from 'vitest';
import { describePluginContract, type ContractFixture } from '@ert/plugin-testkit';
import compute from '../src/compute.js';
import scheduler from '../src/scheduler.js';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../../config/hosts/xeon-2s-cat');
const fixture: ContractFixture<any> = { root };

describePluginContract(compute, fixture, { describe, it });
describePluginContract(scheduler, { ...fixture, compute }, { describe, it });
