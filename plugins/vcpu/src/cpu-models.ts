/**
 * Named guest CPU models, as libvirt's cpu_map defines them for Nova's `[libvirt] cpu_mode =
 * custom` with `cpu_models`, reduced to the cpuinfo flags that have an os-traits name
 * (`traits.ts`); `vmx` / `svm` are no model's (a guest sees them only with nested
 * virtualisation). Each model has its predecessor's flags plus its own.
 */
const NEHALEM = ['sse4_1', 'sse4_2', 'ssse3'];
const WESTMERE = [...NEHALEM, 'aes', 'pclmulqdq'];
const SANDY_BRIDGE = [...WESTMERE, 'avx'];
const IVY_BRIDGE = [...SANDY_BRIDGE, 'f16c'];
const HASWELL = [...IVY_BRIDGE, 'avx2', 'bmi1', 'bmi2', 'fma'];
const SKYLAKE_SERVER = [...HASWELL, 'avx512f', 'avx512cd', 'avx512bw', 'avx512dq', 'avx512vl'];
const CASCADELAKE_SERVER = [...SKYLAKE_SERVER, 'avx512_vnni'];
const EPYC = [...HASWELL, 'sha_ni'];

/** Model name (libvirt's spelling) -> the trait-bearing cpuinfo flags a guest of that model sees. */
export const CPU_MODELS: Readonly<Record<string, readonly string[]>> = {
  Nehalem: NEHALEM,
  Westmere: WESTMERE,
  SandyBridge: SANDY_BRIDGE,
  IvyBridge: IVY_BRIDGE,
  Haswell: HASWELL,
  'Haswell-noTSX': HASWELL,
  Broadwell: HASWELL,
  'Broadwell-noTSX': HASWELL,
  'Skylake-Client': HASWELL,
  'Skylake-Server': SKYLAKE_SERVER,
  'Cascadelake-Server': CASCADELAKE_SERVER,
  'Icelake-Server': [...CASCADELAKE_SERVER, 'sha_ni'],
  EPYC,
  'EPYC-Rome': EPYC,
  'EPYC-Milan': EPYC,
};

/**
 * Nova's rule for `cpu_models` (with `cpu_model_extra_flags`): the CPU-feature traits a host
 * reports are those of the guest CPU, the union of the configured models' features and the
 * extra flags, not the host's own, so that hosts of different CPU generations configured with
 * one model report the same traits and an instance can move between them. The host must be
 * able to run every model (Nova refuses to start otherwise): the flags it lacks, by model
 * (`extra flags` for the extra flags), are returned as `missing`.
 */
export function guestCpuFlags(models: readonly string[], extraFlags: readonly string[], hostFlags: readonly string[]): { flags: string[]; missing: Array<{ model: string; flags: string[] }> } {
  const host = new Set(hostFlags);
  const flags = new Set<string>();
  const missing: Array<{ model: string; flags: string[] }> = [];
  const take = (model: string, wanted: readonly string[]) => {
    const lacking = wanted.filter((flag) => !host.has(flag));
    if (lacking.length > 0) missing.push({ model, flags: lacking });
    for (const flag of wanted) flags.add(flag);
  };
  for (const model of models) take(model, CPU_MODELS[model] ?? []);
  if (extraFlags.length > 0) take('extra flags', extraFlags);
  return { flags: [...flags].sort(), missing };
}
