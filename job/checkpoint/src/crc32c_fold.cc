// CRC32C by folding with carry-less multiplies; see crc32c_fold.h.
#include "crc32c_fold.h"

#include <cstring>

#include "crc32c.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace gandiva::checkpoint {

#if defined(__x86_64__)
namespace {

// Moving a 128-bit lane d bytes further along the message multiplies it by
// x^(8d). Modulo the polynomial P, in CRC32C's bit-reflected order, that is
// lo64 * K_lo(d) xor hi64 * K_hi(d), a value of at most 96 bits to xor into
// the lane d bytes on, where K_lo(d) = x^(8d+31) mod P and
// K_hi(d) = x^(8d-33) mod P, bit-reflected to 32 bits. (The lower half holds
// the earlier bytes, which in reflected order are the higher powers.) Computed
// with polynomial arithmetic; the tests check every fold against the crc32
// instruction.
struct FoldConstant {
  uint64_t lo, hi;
};
constexpr FoldConstant kBy16{0xf20c0dfe, 0x493c7d27};
constexpr FoldConstant kBy32{0x3da6d0cb, 0xba4fc28e};
constexpr FoldConstant kBy48{0x1c291d04, 0xddc0152b};
constexpr FoldConstant kBy64{0x740eef02, 0x9e4addf8};
constexpr FoldConstant kBy128{0x6992cea2, 0x0d3b6092};
constexpr FoldConstant kBy192{0xa87ab8a8, 0xab7aff2a};
constexpr FoldConstant kBy256{0xdcb17aa4, 0xb9e02b86};

#define GD_FOLD_TARGET __attribute__((target("avx512f,vpclmulqdq,pclmul,sse4.2")))

GD_FOLD_TARGET inline __m512i Broadcast(FoldConstant k) {
  return _mm512_set_epi64(k.hi, k.lo, k.hi, k.lo, k.hi, k.lo, k.hi, k.lo);
}

// Each 128-bit lane of x moved on by the constant's distance, xor `with`.
GD_FOLD_TARGET inline __m512i Fold(__m512i x, __m512i k, __m512i with) {
  return _mm512_ternarylogic_epi64(_mm512_clmulepi64_epi128(x, k, 0x00),
                                   _mm512_clmulepi64_epi128(x, k, 0x11), with, 0x96);
}

GD_FOLD_TARGET inline __m128i Fold(__m128i x, FoldConstant k, __m128i with) {
  const __m128i kk = _mm_set_epi64x(static_cast<long long>(k.hi), static_cast<long long>(k.lo));
  return _mm_xor_si128(
      _mm_xor_si128(_mm_clmulepi64_si128(x, kk, 0x00), _mm_clmulepi64_si128(x, kk, 0x11)), with);
}

GD_FOLD_TARGET inline __m512i Load(const uint8_t* p) { return _mm512_loadu_si512(p); }

GD_FOLD_TARGET uint32_t Fold512(const uint8_t* p, size_t n, uint32_t crc) {
  uint64_t reg = crc ^ 0xffffffffu;
  if (n >= 256) {
    // The register enters as if xored into the first four bytes.
    const __m512i first = _mm512_set_epi64(0, 0, 0, 0, 0, 0, 0, static_cast<long long>(reg));
    __m512i x0 = _mm512_xor_si512(Load(p), first);
    __m512i x1 = Load(p + 64), x2 = Load(p + 128), x3 = Load(p + 192);
    p += 256;
    n -= 256;
    // Four independent chains hide the multiplier's latency.
    const __m512i by256 = Broadcast(kBy256);
    for (; n >= 256; p += 256, n -= 256) {
      x0 = Fold(x0, by256, Load(p));
      x1 = Fold(x1, by256, Load(p + 64));
      x2 = Fold(x2, by256, Load(p + 128));
      x3 = Fold(x3, by256, Load(p + 192));
    }
    const __m512i by64 = Broadcast(kBy64);
    __m512i x = Fold(x0, Broadcast(kBy192), Fold(x1, Broadcast(kBy128), Fold(x2, by64, x3)));
    for (; n >= 64; p += 64, n -= 64) x = Fold(x, by64, Load(p));
    // The four lanes into the last one: 16 bytes that stand for all before.
    // (Through memory: GCC 12's lane-extract intrinsic trips -Wmaybe-uninitialized.)
    alignas(64) __m128i lane[4];
    _mm512_store_si512(lane, x);
    const __m128i y = Fold(lane[0], kBy48, Fold(lane[1], kBy32, Fold(lane[2], kBy16, lane[3])));
    reg = _mm_crc32_u64(0, static_cast<uint64_t>(_mm_cvtsi128_si64(y)));
    reg = _mm_crc32_u64(reg, static_cast<uint64_t>(_mm_extract_epi64(y, 1)));
  }
  for (; n >= 8; p += 8, n -= 8) {
    uint64_t v;
    std::memcpy(&v, p, 8);
    reg = _mm_crc32_u64(reg, v);
  }
  for (; n > 0; ++p, --n) reg = _mm_crc32_u8(static_cast<uint32_t>(reg), *p);
  return static_cast<uint32_t>(reg) ^ 0xffffffffu;
}

}  // namespace

bool Crc32cCanFold() {
  static const bool can = __builtin_cpu_supports("avx512f") &&
                          __builtin_cpu_supports("vpclmulqdq") &&
                          __builtin_cpu_supports("pclmul") && __builtin_cpu_supports("sse4.2");
  return can;
}

uint32_t Crc32cFold(const void* data, size_t n, uint32_t crc) {
  return Fold512(static_cast<const uint8_t*>(data), n, crc);
}

#else

bool Crc32cCanFold() { return false; }
uint32_t Crc32cFold(const void* data, size_t n, uint32_t crc) {
  return Crc32cPortable(data, n, crc);
}

#endif

}  // namespace gandiva::checkpoint
