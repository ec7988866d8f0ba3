// Helpers shared by the host-profile fixture generators (scripts/gen-*-fixtures.mjs): files
// written the way the kernel presents them. Run the generators after `npm run build`.
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
export { formatCpuList as cpuList } from '@ert/sysfs';

/** Write a sysfs/procfs-style file; kernel attribute files end with a newline. */
export function writeKernelFile(file, content) {
  mkdirSync(path.dirname(file), { recursive: true });
  writeFileSync(file, content.endsWith('\n') ? content : `${content}\n`);
}

/**
 * The kernel's cpumask format (e.g. `shared_cpu_map`): 32-bit hex groups, most significant
 * first, comma-separated; the first group only as wide as `nrCpus` needs.
 */
export function cpuMask(cpus, nrCpus) {
  const groups = Math.ceil(nrCpus / 32);
  const words = new Array(groups).fill(0);
  for (const cpu of cpus) words[Math.floor(cpu / 32)] |= 1 << cpu % 32;
  const topBits = nrCpus - (groups - 1) * 32;
  return words
    .map((w) => (w >>> 0).toString(16))
    .map((hex, i) => hex.padStart(i === groups - 1 ? Math.ceil(topBits / 4) : 8, '0'))
    .reverse()
    .join(',');
}
