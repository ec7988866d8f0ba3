import type { Inventory, ResourceClass } from '@ert/plugin-api';

/**
 * One provider as the fitting rules see it. The contract's `ProviderState` (and so every
 * entry of `HostState.providers`) satisfies it.
 */
export interface FitProvider {
  readonly uuid: string;
  readonly name: string;
  /** Undefined for a root provider (the host, or a sharing provider). */
  readonly parentUuid?: string | undefined;
  readonly inventories: Readonly<Record<ResourceClass, Inventory>>;
  /** Amount in use per class, every consumer included. */
  readonly usages: Readonly<Record<ResourceClass, number>>;
  readonly traits: ReadonlySet<string>;
  readonly aggregates: ReadonlySet<string>;
}

/**
 * A host's provider tree: `providers` root first, then nested ones in tree order (parents
 * before children), as `HostState.providers` lists them; `sharingProviders` are the
 * candidates from outside the tree (only those with MISC_SHARES_VIA_AGGREGATE that share
 * an aggregate with a provider of the tree are used, so callers may pass a superset).
 */
export interface FitTree {
  readonly providers: readonly FitProvider[];
  readonly sharingProviders?: readonly FitProvider[];
}

/** `amount` of `resourceClass` on provider `providerUuid` (the store's `Allocation` shape). */
export interface FitAllocation {
  providerUuid: string;
  resourceClass: ResourceClass;
  amount: number;
}

/**
 * The most search steps (one step = trying one provider for one demand) a fit or a
 * candidate search may take before it gives up with a reason naming the limit. Every
 * adversarial shape measured in `npm run bench -- placement` needs far fewer (see
 * docs/placement.md); a request that needs more is refused rather than answered late.
 */
export const DEFAULT_SEARCH_BUDGET = 50_000;
