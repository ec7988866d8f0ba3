import { readdir } from 'node:fs/promises';
import path from 'node:path';
import type { Logger } from '@ert/plugin-api';
import { seededRandom, type ErtConfig } from '@ert/core';
import { TRACKER_OWNER, type HostImport } from '@ert/store';
import { TrackerError, TrackerErrorCodes } from './errors.js';
import { childProviderName, providerUuid } from './ids.js';
import { machineIdentity } from './machine.js';
import { createTracker } from './tracker.js';
import type { DiscoveryReport } from './types.js';

export interface BuildFleetOptions {
  config: ErtConfig;
  /** Directory of host profiles: each subdirectory is a root (`/proc`, `/sys`) of one kind of host. */
  profilesDir: string;
  /** How many hosts to make. */
  hosts: number;
  /**
   * Without a seed, profiles are used round-robin (host i gets profile i mod P); with a
   * seed, each host's profile is drawn from a PRNG seeded with it. Either way the fleet is
   * the same every time for the same inputs.
   */
  seed?: number;
  logger?: Logger;
}

/** A profile's discovered tree, with provider names relative to the host. */
interface Template {
  profile: string;
  report: DiscoveryReport;
  /** The machine identity of the profile's root (machine.ts). */
  machine: string;
}

const TEMPLATE_HOST = 'profile';

/**
 * Run the real discovery (the configured resource plugins and provider configs, stats
 * validated) once per host profile directory, then clone the results into `hosts`
 * uniquely named hosts `sim-<profile>-<i>` (i = 0..hosts-1) with name-derived uuids,
 * ready for `store.importHosts`. Writes nothing. Throws ERT_TRACKER_FLEET when the
 * profiles directory is missing or has no profiles; discovery errors propagate.
 */
export async function buildFleet(options: BuildFleetOptions): Promise<HostImport[]> {
  let profiles: string[];
  try {
    const entries = await readdir(options.profilesDir, { withFileTypes: true });
    profiles = entries.filter((e) => e.isDirectory()).map((e) => e.name).sort();
  } catch (err) {
    throw new TrackerError(TrackerErrorCodes.FLEET, `host profiles directory ${options.profilesDir} cannot be read: ${(err as Error).message}`, { profilesDir: options.profilesDir }, { cause: err });
  }
  if (profiles.length === 0) throw new TrackerError(TrackerErrorCodes.FLEET, `host profiles directory ${options.profilesDir} has no profile subdirectories`, { profilesDir: options.profilesDir });

  const templates: Template[] = [];
  for (const profile of profiles) {
    const tracker = await createTracker({
      config: options.config,
      hostName: TEMPLATE_HOST,
      root: path.join(options.profilesDir, profile),
      ...(options.logger ? { logger: options.logger } : {}),
    });
    try {
      templates.push({ profile, report: await tracker.discover(), machine: await machineIdentity(path.join(options.profilesDir, profile)) });
    } finally {
      await tracker.stop();
    }
  }

  const pick = options.seed === undefined ? (i: number) => templates[i % templates.length]! : ((r) => () => templates[Math.floor(r() * templates.length)]!)(seededRandom(options.seed));
  const fleet: HostImport[] = [];
  for (let i = 0; i < options.hosts; i++) {
    const template = pick(i);
    fleet.push(cloneHost(template, `sim-${template.profile}-${i}`));
  }
  return fleet;
}

/** The template's tree renamed for `hostName`: `<profile host>_<key>` becomes `<hostName>_<key>`. */
function cloneHost(template: Template, hostName: string): HostImport {
  const rename = (name: string): string => (name === TEMPLATE_HOST ? hostName : childProviderName(hostName, name.slice(TEMPLATE_HOST.length + 1)));
  const stats: NonNullable<HostImport['stats']> = {};
  for (const plugin of template.report.plugins) if (plugin.stats) stats[plugin.plugin] = structuredClone(plugin.stats);
  return {
    // The profile it was read from: a claim through a tracker must give that --root.
    host: { name: hostName, status: 'up', machine: template.machine },
    providers: template.report.providers.map((p) => {
      const name = rename(p.name);
      return {
        uuid: providerUuid(name),
        name,
        ...(p.parentName !== undefined ? { parentUuid: providerUuid(rename(p.parentName)) } : {}),
        owner: TRACKER_OWNER,
        inventories: structuredClone(p.inventories),
        traits: [...p.traits],
        aggregates: [...p.aggregates],
      };
    }),
    stats,
  };
}
