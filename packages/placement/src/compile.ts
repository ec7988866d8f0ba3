import type { PlacementRequest, RequestGroup, ResourceClass } from '@ert/plugin-api';

/**
 * What must be placed as one unit: one class of the unnumbered group (each class of that
 * group may come from a different provider), or a whole numbered group (all its classes on
 * one provider). A numbered group without resources (allowed in a `same_subtree`) is a
 * demand with no classes: it picks a provider that meets its traits and aggregates.
 */
export interface Demand {
  readonly group: RequestGroup;
  readonly numbered: boolean;
  readonly classes: readonly ResourceClass[];
  readonly amounts: readonly number[];
  /**
   * True when this numbered demand is identical to the one before it (same classes,
   * amounts, traits, aggregates and tree, in no same_subtree): the two are interchangeable,
   * so a yes/no search only tries them in non-decreasing provider order.
   */
  readonly twinOfPrevious: boolean;
}

/** A request compiled once for every tree it is fitted to. */
export interface CompiledRequest {
  readonly request: PlacementRequest;
  readonly unnumbered: RequestGroup;
  /** The unnumbered group's classes first (spec order), then every numbered group (twins adjacent). */
  readonly demands: readonly Demand[];
  readonly unnumberedCount: number;
  readonly isolate: boolean;
  /** The unnumbered group has required or any-of traits, judged on its providers together. */
  readonly unnumberedTraitRule: boolean;
  /** Each same_subtree list as demand indexes (suffixes that name no group are dropped). */
  readonly sameSubtree: readonly (readonly number[])[];
  /** Every class some demand asks for, in first-seen order; demands refer to them by index. */
  readonly classes: readonly ResourceClass[];
  /** `classIndex[d][k]`: index in `classes` of demand d's k-th class. */
  readonly classIndex: readonly (readonly number[])[];
}

const EMPTY_GROUP: RequestGroup = { suffix: '', resources: {}, requiredTraits: [], forbiddenTraits: [], memberOf: [] };

// The scheduler fits one request against thousands of hosts: compile it once.
const compiled = new WeakMap<PlacementRequest, CompiledRequest>();

/** The key that makes two numbered groups interchangeable. */
function twinKey(group: RequestGroup): string {
  return JSON.stringify([
    Object.entries(group.resources).sort(),
    [...group.requiredTraits].sort(),
    (group.anyOfTraits ?? []).map((l) => [...l].sort()).sort(),
    [...group.forbiddenTraits].sort(),
    group.memberOf.map((l) => [...l].sort()).sort(),
    [...(group.forbiddenAggregates ?? [])].sort(),
    group.inTree ?? '',
  ]);
}

/**
 * Compile `request`: `removed` names unnumbered classes already placed elsewhere (plugins'
 * preallocations), which leave the unnumbered group. Cached per request object when
 * nothing is removed.
 */
export function compileRequest(request: PlacementRequest, removed?: ReadonlySet<string>): CompiledRequest {
  if (removed === undefined) {
    const cached = compiled.get(request);
    if (cached !== undefined) return cached;
  }
  const unnumbered = request.groups[0] ?? EMPTY_GROUP;
  const demands: Demand[] = [];
  for (const resourceClass in unnumbered.resources) {
    const amount = unnumbered.resources[resourceClass]!;
    if (amount > 0 && !removed?.has(resourceClass)) {
      demands.push({ group: unnumbered, numbered: false, classes: [resourceClass], amounts: [amount], twinOfPrevious: false });
    }
  }
  const unnumberedCount = demands.length;

  const inSubtree = new Set((request.sameSubtree ?? []).flat());
  // Twins adjacent (stable: groups keep their order otherwise), so one bound per demand suffices.
  const numbered = request.groups.slice(1).map((group, order) => ({ group, order, key: inSubtree.has(group.suffix) ? `#${order}` : twinKey(group) }));
  const firstOrder = new Map<string, number>();
  for (const n of numbered) if (!firstOrder.has(n.key)) firstOrder.set(n.key, n.order);
  numbered.sort((a, b) => firstOrder.get(a.key)! - firstOrder.get(b.key)! || a.order - b.order);
  let previousKey: string | undefined;
  for (const { group, key } of numbered) {
    const classes = Object.keys(group.resources).filter((c) => group.resources[c]! > 0);
    // A numbered group without resources (only valid in a same_subtree; the parsers refuse it
    // elsewhere) is still a demand: it must find a provider that meets its conditions.
    demands.push({ group, numbered: true, classes, amounts: classes.map((c) => group.resources[c]!), twinOfPrevious: key === previousKey });
    previousKey = key;
  }

  const classes: ResourceClass[] = [];
  const classIndex = demands.map((d) =>
    d.classes.map((c) => {
      let i = classes.indexOf(c);
      if (i < 0) i = classes.push(c) - 1;
      return i;
    }),
  );
  const sameSubtree = (request.sameSubtree ?? [])
    .map((suffixes) => demands.flatMap((d, i) => (d.numbered && suffixes.includes(d.group.suffix) ? [i] : [])))
    .filter((list) => list.length > 1);

  const result: CompiledRequest = {
    request,
    unnumbered,
    demands,
    unnumberedCount,
    isolate: request.groupPolicy === 'isolate',
    unnumberedTraitRule: unnumbered.requiredTraits.length > 0 || (unnumbered.anyOfTraits ?? []).some((l) => l.length > 0),
    sameSubtree,
    classes,
    classIndex,
  };
  if (removed === undefined) compiled.set(request, result);
  return result;
}

/**
 * A plain request: only the unnumbered group, with no trait, aggregate, tree or root
 * condition. Its classes do not interact (each takes its whole amount from one provider and
 * no two share a class), so on a tree without sharing providers each class is placed on its
 * own: `fitRequest` and `allocationCandidates` answer it without the search.
 */
export function isPlainRequest(request: PlacementRequest): boolean {
  if (request.groups.length !== 1) return false;
  if ((request.rootRequiredTraits?.length ?? 0) + (request.rootForbiddenTraits?.length ?? 0) > 0) return false;
  const group = request.groups[0]!;
  if (group.requiredTraits.length + group.forbiddenTraits.length + group.memberOf.length > 0) return false;
  return (group.anyOfTraits?.length ?? 0) + (group.forbiddenAggregates?.length ?? 0) === 0 && group.inTree === undefined;
}
