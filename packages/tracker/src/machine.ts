import { readFile, realpath } from 'node:fs/promises';
import path from 'node:path';

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
