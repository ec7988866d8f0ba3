/**
 * os-traits names for cpuinfo flags a flavor may ask for (`trait:HW_CPU_X86_AVX2=required`).
 * Only flags with a standard trait are listed; the rest stay in cpuinfo.
 */
export const FLAG_TRAITS: Readonly<Record<string, string>> = {
  avx: 'HW_CPU_X86_AVX',
  avx2: 'HW_CPU_X86_AVX2',
  avx512f: 'HW_CPU_X86_AVX512F',
  avx512cd: 'HW_CPU_X86_AVX512CD',
  avx512bw: 'HW_CPU_X86_AVX512BW',
  avx512dq: 'HW_CPU_X86_AVX512DQ',
  avx512vl: 'HW_CPU_X86_AVX512VL',
  avx512_vnni: 'HW_CPU_X86_AVX512VNNI',
  aes: 'HW_CPU_X86_AESNI',
  pclmulqdq: 'HW_CPU_X86_CLMUL',
  sse4_1: 'HW_CPU_X86_SSE41',
  sse4_2: 'HW_CPU_X86_SSE42',
  ssse3: 'HW_CPU_X86_SSSE3',
  fma: 'HW_CPU_X86_FMA3',
  f16c: 'HW_CPU_X86_F16C',
  sha_ni: 'HW_CPU_X86_SHA',
  bmi1: 'HW_CPU_X86_BMI',
  bmi2: 'HW_CPU_X86_BMI2',
  mpx: 'HW_CPU_X86_MPX',
  vmx: 'HW_CPU_X86_VMX',
  svm: 'HW_CPU_X86_SVM',
};

/** Trait of a host whose cores run more than one hardware thread. */
export const HYPERTHREADING_TRAIT = 'HW_CPU_HYPERTHREADING';

/** The traits for a host's common cpuinfo flags and threads per core, sorted. */
export function cpuTraits(flags: readonly string[], threadsPerCore: number): string[] {
  const traits = flags.flatMap((flag) => (FLAG_TRAITS[flag] ? [FLAG_TRAITS[flag]] : []));
  if (threadsPerCore > 1) traits.push(HYPERTHREADING_TRAIT);
  return [...new Set(traits)].sort();
}
