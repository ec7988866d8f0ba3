import { ErtError } from '@ert/plugin-api';

/**
 * The error catalogue of @ert/placement. Codes are stable; `details` is always
 * `{ key, value, expected }`: the extra-spec key at fault (or the flavor field, e.g.
 * `vcpus`), the value as written (undefined when the key itself is the problem), and a
 * short description of what would have been accepted. An error about a plugin's key also
 * names the plugin (`details.plugin`, and the message starts `plugin "<name>": `) when the
 * key object came from `definePlugin` (`extraSpecKeyOwner`).
 *
 * - ERT_SPEC_UNKNOWN_KEY        no built-in form and no loaded plugin owns the key, or the key
 *                               has a built-in prefix but a malformed rest (bad resource class,
 *                               trait name or group suffix)
 * - ERT_SPEC_INVALID_VALUE      the key is known but its value is malformed or out of range
 * - ERT_SPEC_CONFLICT           keys that are each valid but contradict each other (two or more
 *                               numbered groups without `group_policy`, a numbered group with
 *                               traits or member_of but no resources, a plugin key whose
 *                               `applyResources` refuses the amounts the flavor set, as
 *                               `llc:ways=3` with `resources:CUSTOM_LLC_WAYS=5`)
 * - ERT_SPEC_SCHEMA_UNSUPPORTED a plugin's `ExtraSpecKey.schema` uses a type or keyword the
 *                               parser does not implement (a plugin bug, not an operator's)
 * - ERT_SPEC_PLUGIN_FAILED      a plugin's `applyResources` threw (a plugin bug): the message
 *                               names the plugin and the hook and carries the thrown message;
 *                               the request is refused, never parsed without the plugin's say
 *
 * SearchBudgetError (ERT_PLACEMENT_SEARCH_BUDGET) is the candidate search giving up at its
 * step budget; its details name the budget, the tree, and the request's size.
 *
 * `PlacementQueryError` (a refused GET /allocation_candidates query string) carries
 * OpenStack Placement 8.0.0's own codes, verbatim, because Placement clients read them from
 * the error body; its `details` are `{ key, value }` (the query parameter at fault and its
 * value, each undefined when the problem is not one parameter's):
 *
 * - placement.undefined_code      Placement's default: malformed values, unknown or too-new
 *                                 parameters, orphaned traits, conflicting traits, a missing
 *                                 group_policy
 * - placement.query.duplicate_key `root_required` given more than once
 * - placement.query.bad_value     conflicting `root_required`, `same_subtree` problems, a
 *                                 resourceless group outside every `same_subtree`
 * - placement.query.missing_value no `resources*` at all (1.36+)
 */
export const PlacementErrorCodes = {
  UNKNOWN_KEY: 'ERT_SPEC_UNKNOWN_KEY',
  INVALID_VALUE: 'ERT_SPEC_INVALID_VALUE',
  CONFLICT: 'ERT_SPEC_CONFLICT',
  SCHEMA_UNSUPPORTED: 'ERT_SPEC_SCHEMA_UNSUPPORTED',
  PLUGIN_FAILED: 'ERT_SPEC_PLUGIN_FAILED',
  QUERY_UNDEFINED: 'placement.undefined_code',
  QUERY_DUPLICATE_KEY: 'placement.query.duplicate_key',
  QUERY_BAD_VALUE: 'placement.query.bad_value',
  QUERY_MISSING_VALUE: 'placement.query.missing_value',
} as const;

/** Codes of `PlacementQueryError`: Placement's own. */
export type PlacementQueryErrorCode = Extract<(typeof PlacementErrorCodes)[keyof typeof PlacementErrorCodes], `placement.${string}`>;

/** Codes of `RequestSpecError`. */
export type PlacementErrorCode = Exclude<(typeof PlacementErrorCodes)[keyof typeof PlacementErrorCodes], PlacementQueryErrorCode>;

export interface RequestSpecErrorDetails {
  key: string;
  value: string | undefined;
  expected: string;
  [extra: string]: unknown;
}

/** A flavor's extra specs (or its amounts) cannot be turned into a `RequestSpec`. */
export class RequestSpecError extends ErtError<PlacementErrorCode> {
  declare readonly details: Readonly<RequestSpecErrorDetails>;

  constructor(code: PlacementErrorCode, message: string, details: RequestSpecErrorDetails) {
    super(code, message, details);
  }
}

/** `key=value` as it appears in messages (`key` alone when the value is unknown). */
export function describeKey(key: string, value: string | undefined): string {
  return value === undefined ? `"${key}"` : `"${key}=${value}"`;
}

/** `plugin "<name>": ` before a message about a key the plugin owns; empty when no plugin is known. */
export function pluginPrefix(plugin: string | undefined): string {
  return plugin === undefined ? '' : `plugin "${plugin}": `;
}

export interface PlacementQueryErrorDetails {
  /** The query parameter at fault (e.g. `resources1`), when one is. */
  key: string | undefined;
  /** Its value as received, when one value is at fault. */
  value: string | undefined;
  [extra: string]: unknown;
}

/**
 * Placement would refuse this GET /allocation_candidates query string. `status` is the HTTP
 * status to answer with; `code` and `message` are Placement 8.0.0's (the message is the part
 * of the error body's `detail` after webob's generic first line).
 */
export class PlacementQueryError extends ErtError<PlacementQueryErrorCode> {
  declare readonly details: Readonly<PlacementQueryErrorDetails>;
  readonly status: 400;

  constructor(code: PlacementQueryErrorCode, message: string, details: PlacementQueryErrorDetails) {
    super(code, message, details);
    this.status = 400;
  }
}

export const SEARCH_BUDGET_CODE = 'ERT_PLACEMENT_SEARCH_BUDGET' as const;

/**
 * `allocationCandidates` needed more than its step budget on one tree to find the next
 * candidate: the request is refused rather than answered after seconds. Raise the budget
 * (`budget` option; `scheduler.placementSearchBudget` in config) or simplify the request.
 */
export class SearchBudgetError extends ErtError<typeof SEARCH_BUDGET_CODE> {
  declare readonly details: Readonly<{ budget: number; tree: string; demands: number; providers: number }>;

  constructor(budget: number, tree: string, demands: number, providers: number) {
    super(
      SEARCH_BUDGET_CODE,
      `the request's ${demands} demands over the ${providers} providers of tree ${tree} need more than the search budget of ${budget} steps; refused rather than searched longer`,
      { budget, tree, demands, providers },
    );
  }
}
