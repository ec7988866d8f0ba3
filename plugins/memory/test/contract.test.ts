// The plugin contract (@ert/plugin-testkit's describePluginContract) on both entries of the
// memory plugin, on the xeon-4s-numa host profile: a huge-page flavor first (the profile has 2 MB and 1 GB pools), so the claim takes pages.
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, it } from 'vitest';
import { describePluginContract, flavor, type ContractFixture } from '@ert/plugin-testkit';
import compute from '../src/compute.js';
import scheduler from '../src/scheduler.js';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../../config/hosts/xeon-4s-numa');
const fixture: ContractFixture<any> = {
  root,
  requests: [flavor({ memoryMb: 2048, extraSpecs: { 'hw:mem_page_size': 'large' } }), flavor({ memoryMb: 1024 })],
};

describePluginContract(compute, fixture, { describe, it });
describePluginContract(scheduler, { ...fixture, compute }, { describe, it });
