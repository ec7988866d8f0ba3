import { readFileSync } from 'node:fs';

/**
 * The standard resource classes and traits of OpenStack Placement 8.0.0 (os-resource-classes
 * 1.1.0, os-traits 2.9.0 as Debian bookworm ships them), from the data file that
 * scripts/gen-placement-standards.mjs generates from those Python packages. Placement inserts
 * exactly these into its database at startup; clients use them without creating them.
 */
interface StandardsFile {
  source: Record<string, string>;
  resourceClasses: string[];
  traits: string[];
}

const file = JSON.parse(readFileSync(new URL('../data/placement-standards.json', import.meta.url), 'utf8')) as StandardsFile;

/** Versions of the Python packages the data file was generated from. */
export const STANDARDS_SOURCE: Readonly<Record<string, string>> = Object.freeze({ ...file.source });
/** The 21 standard classes in os-resource-classes' order (Placement's ids 0..20). */
export const STANDARD_CLASSES: readonly string[] = Object.freeze([...file.resourceClasses]);
/** The 345 standard traits, sorted. */
export const STANDARD_TRAITS: readonly string[] = Object.freeze([...file.traits]);

export const STANDARD_CLASS_SET: ReadonlySet<string> = new Set(STANDARD_CLASSES);
export const STANDARD_TRAIT_SET: ReadonlySet<string> = new Set(STANDARD_TRAITS);
