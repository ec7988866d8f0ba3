import path from 'node:path';
import { fileURLToPath } from 'node:url';

/** The store package's directory (its `dist` is what spawned test processes run). */
export const storePackageDir = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
