import { readFile, realpath } from 'node:fs/promises';
import path from 'node:path';
import { parseCpuList } from '@ert/sysfs';

/**
 * The machine a tracker reads: `machine-id:<id>` from `<root>/etc/machine-id` (systemd's
 * stable id of an installed system), else `root:<path>` of the directory standing for `/`
 * (a host profile, a container without a machine id). Recorded on the host at its first sync,
 * so a tracker started on another machine, or on the wrong `--root`, cannot rewrite the
 * host's inventory under its name.
 */
export async function machineIdentity(root: string): Promise<string> {
  try {
    const id = (await readFile(path.join(root, 'etc', 'machine-id'), 'utf8')).trim();
    if (/^[0-9a-fA-F]{32}$/.test(id)) return `machine-id:${id.toLowerCase()}`;
  } catch {
    // No machine id under this root: the root's own path stands for the machine.
  }
  return `root:${await realpath(root).catch(() => path.resolve(root))}`;
}

/** Where the kernel lists the CPUs that are online, as a CPU list (`0-79`). */
export const ONLINE_CPUS = 'sys/devices/system/cpu/online';

/**
 * The CPUs online on the machine under `root`, or undefined when the list cannot be read or
 * parsed (not Linux, a profile without it): a grant of pinned CPUs is then not checked against
 * the machine, only by the store against other instances.
 */
export async function onlineCpus(root: string): Promise<ReadonlySet<number> | undefined> {
  try {
    const cpus = parseCpuList((await readFile(path.join(root, ONLINE_CPUS), 'utf8')).trim());
    return cpus.length > 0 ? new Set(cpus) : undefined;
  } catch {
    return undefined;
  }
}
