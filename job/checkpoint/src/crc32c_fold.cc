// CRC32C by folding with carry-less multiplies; see crc32c_fold.h.
#include "crc32c_fold.h"

#include <cstring>

#include "crc32c.h"
#include "streamed_stores.h"

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

// The next 64 bytes, copied on to dst[i] as they are read when kCopy.
template <bool kCopy>
GD_FOLD_TARGET inline __m512i Take(const uint8_t* p, uint8_t* d, size_t i) {
  const __m512i v = _mm512_loadu_si512(p + i);
  // dst is 64-byte aligned here (Crc32cCopy): streamed past the caches,
  // without reading each line in first (the state is not read again soon).
  if constexpr (kCopy) _mm512_stream_si512(reinterpret_cast<__m512i*>(d + i), v);
  return v;
}

template <bool kCopy>
GD_FOLD_TARGET uint32_t Fold512(const uint8_t* p, uint8_t* d, size_t n, uint32_t crc) {
  uint64_t reg = crc ^ 0xffffffffu;
  size_t i = 0;
  if (n >= 256) {
    // The register enters as if xored into the first four bytes.
    const __m512i first = _mm512_set_epi64(0, 0, 0, 0, 0, 0, 0, static_cast<long long>(reg));
    __m512i x0 = _mm512_xor_si512(Take<kCopy>(p, d, 0), first);
    __m512i x1 = Take<kCopy>(p, d, 64), x2 = Take<kCopy>(p, d, 128), x3 = Take<kCopy>(p, d, 192);
    i = 256;
    // Four independent chains hide the multiplier's latency.
    const __m512i by256 = Broadcast(kBy256);
    for (; n - i >= 256; i += 256) {
      x0 = Fold(x0, by256, Take<kCopy>(p, d, i));
      x1 = Fold(x1, by256, Take<kCopy>(p, d, i + 64));
      x2 = Fold(x2, by256, Take<kCopy>(p, d, i + 128));
      x3 = Fold(x3, by256, Take<kCopy>(p, d, i + 192));
    }
    const __m512i by64 = Broadcast(kBy64);
    __m512i x = Fold(x0, Broadcast(kBy192), Fold(x1, Broadcast(kBy128), Fold(x2, by64, x3)));
    for (; n - i >= 64; i += 64) x = Fold(x, by64, Take<kCopy>(p, d, i));
    // The four lanes into the last one: 16 bytes that stand for all before.
    // (Through memory: GCC 12's lane-extract intrinsic trips -Wmaybe-uninitialized.)
    alignas(64) __m128i lane[4];
    _mm512_store_si512(lane, x);
    const __m128i y = Fold(lane[0], kBy48, Fold(lane[1], kBy32, Fold(lane[2], kBy16, lane[3])));
    reg = _mm_crc32_u64(0, static_cast<uint64_t>(_mm_cvtsi128_si64(y)));
    reg = _mm_crc32_u64(reg, static_cast<uint64_t>(_mm_extract_epi64(y, 1)));
    if constexpr (kCopy) _mm_sfence();  // the streamed stores before any later ones
  }
  if constexpr (kCopy) {
    if (n > i) std::memcpy(d + i, p + i, n - i);
  }
  for (; n - i >= 8; i += 8) {
    uint64_t v;
    std::memcpy(&v, p + i, 8);
    reg = _mm_crc32_u64(reg, v);
  }
  for (; i < n; ++i) reg = _mm_crc32_u8(static_cast<uint32_t>(reg), p[i]);
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
  return Fold512<false>(static_cast<const uint8_t*>(data), nullptr, n, crc);
}

uint32_t Crc32cFoldCopy(void* dst, const void* src, size_t n, uint32_t crc) {
  auto* d = static_cast<uint8_t*>(dst);
  const auto* p = static_cast<const uint8_t*>(src);
  // Up to dst's next 64-byte boundary the plain way, then streamed.
  const size_t head = BytesToLine(d, n);
  std::memcpy(d, p, head);
  crc = Crc32c(p, head, crc);
  return Fold512<true>(p + head, d + head, n - head, crc);
}

#else

bool Crc32cCanFold() { return false; }
uint32_t Crc32cFold(const void* data, size_t n, uint32_t crc) {
  return Crc32cPortable(data, n, crc);
}
uint32_t Crc32cFoldCopy(void* dst, const void* src, size_t n, uint32_t crc) {
  std::memcpy(dst, src, n);
  return Crc32cPortable(src, n, crc);
}

#endif

}  // namespace gandiva::checkpoint
