/**
 * What the host's plugins and the tracker's listeners are told about instances: each plugin's
 * view of the instances on the host (`addInstance`, `removeInstance`, `reset`), the instance
 * events, and enforcement (`enforce`). A plugin that throws or hangs becomes a problem naming
 * it and its hook; the store is already written by then, so nothing is undone here.
 */
import type { ClaimedInstance, InstanceEvent, InstanceEventType, JsonValue } from '@ert/plugin-api';
import type { HostPlugins } from './host-plugins.js';
import { problemFrom } from './problems.js';
import type { Problem, TrackerListener } from './types.js';

/** Keeps the plugins' views of the host's instances and tells listeners and enforcing plugins what happened. */
export class PluginViews {
  private readonly listeners = new Map<InstanceEventType, Set<TrackerListener>>();
  /** Uuids the plugins' views hold (added and not removed since their last reset). */
  private readonly inViews = new Set<string>();

  constructor(private readonly plugins: HostPlugins) {}

  /** True when the plugins' views hold `uuid` (added since their last reset and not removed). */
  holds(uuid: string): boolean {
    return this.inViews.has(uuid);
  }

  /** `reset` every plugin: their views hold no instance after it. */
  async reset(problems: Problem[]): Promise<void> {
    this.inViews.clear();
    for (const resource of this.plugins.resources) {
      const reset = resource.hooks.reset;
      if (!reset) continue;
      try {
        await this.plugins.call(resource, 'reset', () => reset.call(resource.hooks));
      } catch (err) {
        this.plugins.logger.error({ err, plugin: resource.name }, 'reset failed');
        problems.push(problemFrom(err, { plugin: resource.name, hook: 'reset' }));
      }
    }
  }

  /** Give each plugin the instance, with its own assignment. Failures are problems (the store is already written). */
  async add(instance: ClaimedInstance, assignments: Record<string, JsonValue>, problems: Problem[]): Promise<void> {
    this.inViews.add(instance.uuid);
    for (const resource of this.plugins.resources) {
      const addInstance = resource.hooks.addInstance;
      if (!addInstance) continue;
      const own: ClaimedInstance = resource.name in assignments ? { ...instance, assignment: assignments[resource.name]! } : instance;
      try {
        await this.plugins.call(resource, 'addInstance', () => addInstance.call(resource.hooks, own));
      } catch (err) {
        this.plugins.logger.error({ err, plugin: resource.name, instance: instance.uuid }, 'addInstance failed');
        problems.push(problemFrom(err, { plugin: resource.name, hook: 'addInstance', instance: instance.uuid }));
      }
    }
  }

  /** Take the instance out of every plugin's view. Failures are problems. */
  async remove(uuid: string, problems: Problem[]): Promise<void> {
    this.inViews.delete(uuid);
    for (const resource of this.plugins.resources) {
      const removeInstance = resource.hooks.removeInstance;
      if (!removeInstance) continue;
      try {
        await this.plugins.call(resource, 'removeInstance', () => removeInstance.call(resource.hooks, uuid));
      } catch (err) {
        this.plugins.logger.error({ err, plugin: resource.name, instance: uuid }, 'removeInstance failed');
        problems.push(problemFrom(err, { plugin: resource.name, hook: 'removeInstance', instance: uuid }));
      }
    }
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
   * assignment). Returns the enforcement failures.
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
