import type { ResourceClass } from './resources.js';

/*
 * Host summaries: numbers per host that the scheduler keeps in typed arrays (one column per
 * name, one entry per host), so that a request never seen before can be ranked without
 * calling every filter and weigher on every host. Plugins publish them and state how their
 * filters and weighers relate to them; a plugin that publishes none still works (its hosts
 * are evaluated one by one, as before). docs/plugins.md, "Host summaries", has the rules.
 */

/**
 * What a consumer publishes for one host (`ConsumerHooks.summarize`): finite numbers by key.
 * The scheduler stores them as `<plugin>.<key>` (e.g. `memory.freeMb`); a key left out, or
 * a value that is not a finite number, is "unknown" for that host.
 */
export type HostSummaries = Readonly<Record<string, number>>;

/**
 * A necessary condition a filter states for one request (`FilterHooks.summaryBounds`): every
 * host whose summary `summary` is known and below `atLeast` is one the filter rejects. The
 * scheduler may then leave such a host out without calling the filter; a host whose summary
 * is unknown is never left out on this bound.
 */
export interface SummaryBound {
  /** A published summary's full name: `<plugin>.<key>`, or a built-in one (`freeSummary`, `UP_SUMMARY`). */
  readonly summary: string;
  /** The least value a host the filter accepts can have. */
  readonly atLeast: number;
}

/** Built-in summary, kept by the scheduler: 1 when the host's status is `up`, else 0. */
export const UP_SUMMARY = 'ert:up';

/**
 * Name of the built-in summary of a class's free amount on a host: capacity minus usage
 * summed over the host's tree (a provider without the class counts 0), exactly
 * `HostState.free(resourceClass)`, so a weigher scoring that can name it as its
 * `summaryScore`. Kept by the scheduler. Pure.
 */
export function freeSummary(resourceClass: ResourceClass): string {
  return `ert:free:${resourceClass}`;
}

/** Full name of a consumer's published summary `key`: `<plugin>.<key>`. Pure. */
export function summaryName(plugin: string, key: string): string {
  return `${plugin}.${key}`;
}
