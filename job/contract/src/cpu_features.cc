// CPU features for the cipher code; see cpu_features.h.
#include "cpu_features.h"

#if defined(__x86_64__)
#include <cpuid.h>
#elif defined(__aarch64__) && defined(__linux__)
#include <asm/hwcap.h>
#include <sys/auxv.h>
#endif

namespace gandiva::sealed {

namespace {

struct Features {
  bool aes = false;
  bool avx512_vaes = false;
  bool vpclmulqdq = false;
};

Features Probe() {
  Features f;
#if defined(__x86_64__)
  unsigned a, b, c, d;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return f;
  f.aes = c & bit_AES;
  const bool pclmul = c & bit_PCLMUL, osxsave = c & bit_OSXSAVE;
  if (!f.aes || !osxsave) return f;
  // The kernel saves and restores the AVX-512 state: XMM, YMM, opmask and
  // both halves of the ZMM registers (XCR0 bits 1, 2, 5, 6, 7).
  unsigned xcr0_lo, xcr0_hi;
  __asm__ volatile("xgetbv" : "=a"(xcr0_lo), "=d"(xcr0_hi) : "c"(0));
  if ((xcr0_lo & 0xe6) != 0xe6) return f;
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return f;
  f.avx512_vaes = (b & bit_AVX512F) && (b & bit_AVX512BW) && (b & bit_AVX512VL) && (c & bit_VAES);
  f.vpclmulqdq = pclmul && (c & bit_VPCLMULQDQ);
#elif defined(__aarch64__) && defined(__linux__)
  f.aes = getauxval(AT_HWCAP) & HWCAP_AES;
#endif
  return f;
}

const Features& Cpu() {
  static const Features features = Probe();
  return features;
}

}  // namespace

bool CpuHasAesRounds() { return Cpu().aes; }
bool CpuHasAvx512Vaes() { return Cpu().avx512_vaes; }
bool CpuHasAvx512VaesClmul() { return Cpu().avx512_vaes && Cpu().vpclmulqdq; }

}  // namespace gandiva::sealed
