// The plugin test helpers (contexts, temp fixture roots, synthetic host states) live with
// the llc plugin's tests; both plugins use the same ones.
export * from '../../llc/test/helpers.js';
