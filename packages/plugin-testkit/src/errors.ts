import { ErtError } from '@ert/plugin-api';

/**
 * The kit's error codes. `ERT_PLUGIN_STATS_INVALID` is the code the host's stats writer
 * (`@ert/core`'s `validateStats`) uses for the same fault, so a test matching on it means
 * what a tracker would report.
 */
export const TestkitErrorCodes = {
  /** A plugin broke a rule of the plugin contract (details: plugin, check). */
  CONTRACT_VIOLATION: 'ERT_TESTKIT_CONTRACT_VIOLATION',
  /** Options given to a context builder fail the plugin's options schema (details: plugin, problems). */
  OPTIONS_INVALID: 'ERT_TESTKIT_OPTIONS_INVALID',
  /** A builder was given something it cannot build (details: what). */
  INVALID_INPUT: 'ERT_TESTKIT_INVALID_INPUT',
  /** Stats that fail the plugin's declared stats schema, or a plugin with stats but no schema (details: plugin, problems). */
  STATS_INVALID: 'ERT_PLUGIN_STATS_INVALID',
} as const;

/** One of the codes of `TestkitErrorCodes`. */
export type TestkitErrorCode = (typeof TestkitErrorCodes)[keyof typeof TestkitErrorCodes];

/** Every error the kit throws on purpose; `code` is one of `TestkitErrorCodes`. */
export class TestkitError extends ErtError<TestkitErrorCode> {}

/** A plugin that broke one rule of the contract; `details.check` names the rule. */
export class ContractViolation extends TestkitError {}
