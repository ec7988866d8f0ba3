/**
 * What the host's plugins and the tracker's listeners are told about instances: each plugin's
 * view of the instances on the host (`addInstance`, `removeInstance`, `reset`), the instance
 * events, and enforcement (`enforce`). A plugin that throws or hangs becomes a problem naming
 * it and its hook; the store is already written by then, so nothing is undone here. Its view
 * is then unreliable (`unreliable`): the tracker rebuilds it from the store before the
 * plugin's next `test`, and refuses the claims it would test when that fails too.
 */
import type { ClaimedInstance, InstanceEvent, InstanceEventType, JsonValue } from '@ert/plugin-api';
import { CoreErrorCodes, type ActiveResource } from '@ert/core';
import type { HostPlugins } from './host-plugins.js';
import { problemFrom } from './problems.js';
import type { Problem, TrackerListener } from './types.js';

/** Keeps the plugins' views of the host's instances and tells listeners and enforcing plugins what happened. */
export class PluginViews {
  private readonly listeners = new Map<InstanceEventType, Set<TrackerListener>>();
  /** Uuids the plugins' views hold (added and not removed since their last reset). */
  private readonly inViews = new Set<string>();
  /**
   * Per plugin, why its view may differ from what the store holds: a view hook that failed
   * (threw, timed out, or did not start behind a call that timed out), was not called (its
   * discovery failed), or a step that failed before the views were told what it wrote.
   * Cleared by a reset that succeeds; an `addInstance` that fails after it sets it again.
   */
  private readonly distrusted = new Map<string, string>();

  constructor(
    private readonly plugins: HostPlugins,
    /** Whether the plugin's last discovery failed (threw, hung, garbage): its `test` is not asked then (availability.ts). */
    private readonly discoveryFailed: (plugin: string) => boolean,
  ) {}

  /** True when the plugins' views hold `uuid` (added since their last reset and not removed). */
  holds(uuid: string): boolean {
    return this.inViews.has(uuid);
  }

  /** Why `plugin`'s view cannot be trusted (a message naming the plugin and hook that failed), or undefined. */
  unreliable(plugin: string): string | undefined {
    return this.distrusted.get(plugin);
  }

  /** Every view may lag the store (a step failed between its write and telling the views): `why`. */
  distrustAll(why: string): void {
    for (const resource of this.plugins.resources) this.distrusted.set(resource.name, why);
  }

  /**
   * Whether `resource`'s view hooks are called now: not while its discovery fails, since its
   * test is not asked then and a hung plugin would hold every step for its timeout. Its view
   * is then distrusted, and rebuilt when it is asked again.
   */
  private tells(resource: ActiveResource): boolean {
    if (!this.discoveryFailed(resource.name)) return true;
    this.distrusted.set(resource.name, `plugin ${resource.name} was not told about instances while its discovery failed`);
    return false;
  }

  /** `reset` the plugins (default every one): their views hold no instance after it. Returns those whose reset succeeded. */
  async reset(problems: Problem[], resources: readonly ActiveResource[] = this.plugins.resources): Promise<ActiveResource[]> {
    if (resources === this.plugins.resources) this.inViews.clear();
    const done: ActiveResource[] = [];
    for (const resource of resources) {
      const reset = resource.hooks.reset;
      if (!this.tells(resource)) continue;
      try {
        if (reset) await this.plugins.call(resource, 'reset', () => reset.call(resource.hooks));
        this.distrusted.delete(resource.name);
        done.push(resource);
      } catch (err) {
        this.plugins.logger.error({ err, plugin: resource.name }, 'reset failed');
        this.failed(problems, problemFrom(err, { plugin: resource.name, hook: 'reset' }));
      }
    }
    return done;
  }

  /**
   * Give each plugin (default every one) the instance, with its own assignment. Failures are
   * problems (the store is already written). Returns the plugins that did not fail.
   */
  async add(instance: ClaimedInstance, assignments: Record<string, JsonValue>, problems: Problem[], resources: readonly ActiveResource[] = this.plugins.resources): Promise<ActiveResource[]> {
    this.inViews.add(instance.uuid);
    const done: ActiveResource[] = [];
    for (const resource of resources) {
      const addInstance = resource.hooks.addInstance;
      if (!this.tells(resource)) continue;
      const own: ClaimedInstance = resource.name in assignments ? { ...instance, assignment: assignments[resource.name]! } : instance;
      try {
        if (addInstance) await this.plugins.call(resource, 'addInstance', () => addInstance.call(resource.hooks, own));
        done.push(resource);
      } catch (err) {
        this.plugins.logger.error({ err, plugin: resource.name, instance: instance.uuid }, 'addInstance failed');
        this.failed(problems, problemFrom(err, { plugin: resource.name, hook: 'addInstance', instance: instance.uuid }));
      }
    }
    return done;
  }

  /** Take the instance out of every plugin's view. Failures are problems. */
  async remove(uuid: string, problems: Problem[]): Promise<void> {
    this.inViews.delete(uuid);
    for (const resource of this.plugins.resources) {
      const removeInstance = resource.hooks.removeInstance;
      if (!removeInstance || !this.tells(resource)) continue;
      try {
        await this.plugins.call(resource, 'removeInstance', () => removeInstance.call(resource.hooks, uuid));
      } catch (err) {
        this.plugins.logger.error({ err, plugin: resource.name, instance: uuid }, 'removeInstance failed');
        this.failed(problems, problemFrom(err, { plugin: resource.name, hook: 'removeInstance', instance: uuid }));
      }
    }
  }

  /** A view hook failed: a problem, and the plugin's view is not trusted until rebuilt. */
  private failed(problems: Problem[], problem: Problem): void {
    problems.push(problem);
    this.distrusted.set(problem.plugin!, problem.message);
  }

  /** Listen to instance events; returns a function that removes the listener. */
  on(type: InstanceEventType, listener: TrackerListener): () => void {
    let set = this.listeners.get(type);
    if (!set) this.listeners.set(type, (set = new Set()));
    set.add(listener);
    return () => set.delete(listener);
  }

  /**
   * Tell listeners (their event carries every plugin's assignment, by plugin name, in
   * `assignment`), then the plugins whose enforcement is enabled (each sees its own
   * assignment). Returns the enforcement failures: an `enforce` that failed, and one not
   * called because its plugin's last discovery failed (threw, hung, garbage; a plugin that
   * reported itself unavailable is still called), so `enforcementFailure: undo` undoes what
   * was not enforced.
   */
  async emit(
    type: InstanceEventType,
    instance: ClaimedInstance,
    assignments: Record<string, JsonValue>,
    previous?: { instance: ClaimedInstance; assignments: Record<string, JsonValue> },
  ): Promise<Problem[]> {
    const eventFor = (plugin?: string): InstanceEvent => {
      const pick = (i: ClaimedInstance, a: Record<string, JsonValue>): ClaimedInstance => {
        const assignment = plugin === undefined ? (Object.keys(a).length > 0 ? a : undefined) : a[plugin];
        const { assignment: _drop, ...rest } = i;
        return assignment === undefined ? rest : { ...rest, assignment };
      };
      return { type, host: this.plugins.hostName, instance: pick(instance, assignments), ...(previous ? { previous: pick(previous.instance, previous.assignments) } : {}) };
    };
    const shared = eventFor();
    for (const listener of this.listeners.get(type) ?? []) {
      try {
        listener(shared);
      } catch (err) {
        this.plugins.logger.error({ err, event: type, instance: instance.uuid }, 'instance event listener threw');
      }
    }
    const problems: Problem[] = [];
    for (const resource of this.plugins.resources) {
      const enforce = resource.hooks.enforce;
      if (!resource.enforce || !enforce) continue;
      if (this.discoveryFailed(resource.name)) {
        // Not called, as its view hooks are not (a hung plugin would cost every step its
        // timeout), but not done either: an enforcement failure, which `undo` undoes.
        problems.push({
          code: CoreErrorCodes.PLUGIN_HOOK_FAILED,
          message: `Plugin "${resource.name}" hook "enforce" was not called: the plugin's discovery failed (threw, timed out or returned an invalid discovery), so the ${type} event of instance ${instance.uuid} is not enforced`,
          plugin: resource.name,
          hook: 'enforce',
          instance: instance.uuid,
        });
        continue;
      }
      const event = eventFor(resource.name);
      try {
        await this.plugins.call(resource, 'enforce', () => enforce.call(resource.hooks, event));
      } catch (err) {
        const problem = problemFrom(err, { plugin: resource.name, hook: 'enforce', instance: instance.uuid });
        this.plugins.logger.error({ err, plugin: resource.name, instance: instance.uuid, event: type }, 'enforcement failed');
        problems.push(problem);
      }
    }
    return problems;
  }
}
