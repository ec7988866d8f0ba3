/**
 * The host's resource plugins as the tracker's parts call them: every hook goes through the
 * dispatcher (tagged errors naming plugin and hook, `config.tracker.hookTimeout`, timings), and
 * flavors are parsed with the extra-spec keys the plugins own.
 */
import { messageOf, type Flavor, type Logger, type RequestSpec } from '@ert/plugin-api';
import type { ActiveResource, PluginRuntime } from '@ert/core';
import { parseFlavor } from '@ert/placement';

/** The resource plugins of one host's tracker, as its parts call them. */
export class HostPlugins {
  constructor(
    private readonly runtime: PluginRuntime,
    private readonly hookTimeoutMs: number,
    readonly hostName: string,
    readonly logger: Logger,
  ) {}

  /** The resource plugins of `config.tracker.resources`, in configured order. */
  get resources(): ActiveResource[] {
    return this.runtime.resources;
  }

  /**
   * Call a hook through the dispatcher; `copy` replaces the result with a data copy taken once
   * (a throw while copying refuses it, naming plugin and hook), then `validate` turns the copy
   * into a refusal of that hook (a reason string).
   */
  call<T>(
    resource: ActiveResource,
    hook: string,
    fn: () => T | Promise<T>,
    options: { validate?: (result: Awaited<T>) => string | undefined; copy?: (result: Awaited<T>) => Awaited<T> } = {},
  ): Promise<Awaited<T>> {
    return this.runtime.dispatcher.call(resource.name, hook, fn, { timeoutMs: this.hookTimeoutMs, ...options });
  }

  /** The request spec of `flavor`; throws on extra specs no plugin owns or that a plugin refuses. */
  parse(flavor: Flavor): RequestSpec {
    return parseFlavor(flavor, { keys: this.runtime.extraSpecKeys });
  }

  /**
   * The request spec of a recorded instance's flavor (`parseFlavor`'s `recorded`: the checks
   * made only of new requests are skipped, so an instance placed before one existed stays in
   * the views); throws on extra specs no plugin owns any more or malformed ones.
   */
  parseRecorded(flavor: Flavor): RequestSpec {
    return parseFlavor(flavor, { keys: this.runtime.extraSpecKeys, recorded: true });
  }

  /** The parsed flavor of a recorded instance, or an empty spec when its keys are no longer owned (events only). */
  parseOr(flavor: Flavor): RequestSpec {
    try {
      return this.parseRecorded(flavor);
    } catch {
      return { flavor, groups: [{ suffix: '', resources: {}, requiredTraits: [], forbiddenTraits: [], memberOf: [] }], groupPolicy: 'none', aggregateExtraSpecs: {}, capabilities: [], pluginSpecs: {}, hints: {} };
    }
  }

  /** The extra-spec keys `plugin` declares (none for an unknown plugin). */
  extraSpecKeysOf(plugin: string): string[] {
    return this.resources.find((r) => r.name === plugin)?.plugin.extraSpecs?.map((k) => k.key) ?? [];
  }
}

/**
 * A hook's result as plain data, copied by structured clone (pass as `copy` to `call`): the copy
 * a worker-isolated plugin's result already is, read from the plugin's object once. Not a JSON
 * round trip: a grant or discovery is JSON data when valid, but JSON would turn what the checks
 * must refuse into something they accept (NaN and Infinity into null, a Date into a string,
 * `toJSON`'s answer instead of the value). Throws (the result is refused, naming plugin and
 * hook) for what cannot be copied: a function, a Proxy, a getter that throws.
 */
export function dataCopy<R>(result: R): R {
  try {
    return structuredClone(result);
  } catch (err) {
    throw new Error(`it is not plain data: ${messageOf(err)}`);
  }
}
