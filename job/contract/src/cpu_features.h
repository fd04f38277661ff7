// What this CPU (and the kernel, for register state) lets the bulk channel's
// cipher code use, from CPUID itself: clang 14's __builtin_cpu_supports knows
// no "vaes". Each answer is computed once. Private to gandiva_sealed.
#ifndef GANDIVA_CONTRACT_CPU_FEATURES_H_
#define GANDIVA_CONTRACT_CPU_FEATURES_H_

namespace gandiva::sealed {

// 128-bit AES round instructions: AES-NI on x86-64, ARMv8's AES on aarch64.
bool CpuHasAesRounds();
// AVX-512 (F, BW, VL) with VAES, the kernel saving the whole ZMM state.
bool CpuHasAvx512Vaes();
// The above and VPCLMULQDQ (carry-less multiplies on 512-bit registers).
bool CpuHasAvx512VaesClmul();

}  // namespace gandiva::sealed

#endif  // GANDIVA_CONTRACT_CPU_FEATURES_H_
