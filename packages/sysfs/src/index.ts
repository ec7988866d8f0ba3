/**
 * @ert/sysfs — hardware facts read from /proc and /sys below a configurable root.
 * Plugins turn these facts into inventories; nothing here knows about ert's model.
 */
export * from './fs.js';
export * from './reading.js';
export * from './cpuinfo.js';
export * from './meminfo.js';
export * from './topology.js';
export * from './numa.js';
