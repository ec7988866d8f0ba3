import { TRAIT_SHARING_PROVIDER } from '@ert/plugin-api';
import type { Anchor } from './search.js';
import type { FitProvider } from './types.js';

/** The aggregates of a tree's providers, together: which sharing providers may serve it. */
export function aggregatesOf(tree: readonly FitProvider[]): Set<string> {
  const out = new Set<string>();
  for (const p of tree) for (const a of p.aggregates) out.add(a);
  return out;
}

/**
 * Placement's anchors: a provider with MISC_SHARES_VIA_AGGREGATE serves every tree that has
 * a provider (root or child) in one of its aggregates.
 */
export function sharesWith(sharing: FitProvider, treeAggregates: ReadonlySet<string>): boolean {
  if (!sharing.traits.has(TRAIT_SHARING_PROVIDER)) return false;
  for (const a of sharing.aggregates) if (treeAggregates.has(a)) return true;
  return false;
}

/**
 * The anchor of the tree rooted at `root`: its providers (`tree`, root first, parents before
 * children), then the `outside` sharing providers that serve it. `rootOf` gives the root
 * uuid of any provider's own tree (undefined for a uuid it does not know), `byUuid` any
 * provider by uuid (for walking ancestors; a parent it does not know ends the walk).
 */
export function makeAnchor(
  root: FitProvider,
  tree: readonly FitProvider[],
  outside: readonly FitProvider[],
  rootOf: (uuid: string) => string | undefined,
  byUuid: (uuid: string) => FitProvider | undefined,
): Anchor {
  const providers = outside.length === 0 ? tree : [...tree, ...outside];
  const treeSize = tree.length;
  const rootUuids = providers.map((p, i) => (i < treeSize ? root.uuid : (rootOf(p.uuid) ?? p.uuid)));
  let ancestors: Array<Set<string>> | undefined;
  return {
    root,
    providers,
    treeSize,
    rootUuids,
    ancestors(index) {
      ancestors ??= providers.map((p) => {
        const chain = new Set([p.uuid]);
        for (let parent = p.parentUuid; parent !== undefined && !chain.has(parent); parent = byUuid(parent)?.parentUuid) chain.add(parent);
        return chain;
      });
      return ancestors[index]!;
    },
    rootOfUuid: rootOf,
  };
}
