/**
 * @ert/placement — pure functions both sides share: flavor + extra specs -> RequestSpec
 * (`parseFlavor`), fitting a request to a host's provider tree by Placement's
 * allocation-candidate rules (`fitRequest`), every candidate of a deployment
 * (`allocationCandidates`), and Nova's extra-spec operators
 * (`matchCapability`, `matchAggregateExtraSpecs`), Nova's availability zones of aggregates
 * (`availabilityZonesOf`). No I/O, no state.
 */
export * from './errors.js';
export { BUILTIN_EXTRA_SPEC_PREFIXES, isBuiltinExtraSpecKey, parseFlavor, type ParseFlavorOptions } from './parse.js';
export { attributeToImage, mergeImageProperties, type MergedExtraSpecs } from './image.js';
export { requestGroupsOf, withGroupProviders } from './request-groups.js';
export { convertPluginValue, extraSpecKeyProblem } from './plugin-values.js';
export {
  aggregateExtraSpecsProblem,
  matchAggregateExtraSpecs,
  matchCapability,
  parseOpExpression,
  toNumber,
  type OpExpression,
} from './ops.js';
export {
  fitRequest,
  type FitAllocation,
  type FitAllocation as Allocation,
  type FitOptions,
  type FitProvider,
  type FitResult,
  type FitTree,
} from './fit.js';
export { DEFAULT_SEARCH_BUDGET } from './types.js';
export {
  checkPlacementRequest,
  flavorFromPlacementRequest,
  PLACEMENT_REQUEST_FLAVOR,
  placementRequestOf,
  specFromPlacementRequest,
  toCandidatesQuery,
} from './request.js';
export {
  allocationCandidates,
  candidateRoots,
  findCandidates,
  indexWorld,
  providerSummary,
  DEFAULT_MAX_CANDIDATES,
  WorldIndex,
  type CandidateAllocationRequest,
  type CandidateProviderSummary,
  type CandidatesOptions,
  type CandidatesResult,
  type CandidateWorld,
  type FoundCandidates,
} from './candidates.js';
export {
  CANDIDATES_MAX_MICROVERSION,
  CANDIDATES_MIN_MICROVERSION,
  parseCandidatesQuery,
  placementQueryValues,
  type CandidatesQuery,
  type Microversion,
} from './query.js';
export { AVAILABILITY_ZONE_KEY, availabilityZonesOf, type AvailabilityZone, type AvailabilityZones, type ZoneAggregate, type ZoneHost } from './zones.js';
