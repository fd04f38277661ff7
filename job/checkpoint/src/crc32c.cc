// CRC32C: hardware path (folding where the CPU has VPCLMULQDQ, crc32c_fold.cc;
// else three interleaved crc32q streams combined with
// zero-shift tables, after Mark Adler's crc32c.c) and a portable slicing-by-8.
#include "crc32c.h"

#include <cstring>

#include "crc32c_fold.h"
#include "streamed_stores.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace gandiva::checkpoint {
namespace {

constexpr uint32_t kPoly = 0x82f63b78;  // reflected Castagnoli polynomial

struct Tables {
  uint32_t slice[8][256];
  // Shift a CRC over kLong / kShort zero bytes: combines interleaved streams.
  uint32_t shift_long[4][256];
  uint32_t shift_short[4][256];
  Tables();
};

constexpr size_t kLong = 8192;
constexpr size_t kShort = 256;

uint32_t Gf2MatrixTimes(const uint32_t* mat, uint32_t vec) {
  uint32_t sum = 0;
  while (vec) {
    if (vec & 1) sum ^= *mat;
    vec >>= 1;
    ++mat;
  }
  return sum;
}

void Gf2MatrixSquare(uint32_t* square, const uint32_t* mat) {
  for (int n = 0; n < 32; ++n) square[n] = Gf2MatrixTimes(mat, mat[n]);
}

// The GF(2) operator that appends `len` zero bytes to a CRC.
void ZerosOperator(uint32_t* even, size_t len) {
  uint32_t odd[32];
  odd[0] = kPoly;  // operator for one zero bit
  uint32_t row = 1;
  for (int n = 1; n < 32; ++n) {
    odd[n] = row;
    row <<= 1;
  }
  Gf2MatrixSquare(even, odd);  // two zero bits
  Gf2MatrixSquare(odd, even);  // four zero bits
  // Squaring doubles: the first square in the loop gives one zero byte.
  do {
    Gf2MatrixSquare(even, odd);
    len >>= 1;
    if (len == 0) return;
    Gf2MatrixSquare(odd, even);
    len >>= 1;
  } while (len);
  std::memcpy(even, odd, sizeof(odd));
}

void ZerosTable(uint32_t table[4][256], size_t len) {
  uint32_t op[32];
  ZerosOperator(op, len);
  for (uint32_t n = 0; n < 256; ++n) {
    table[0][n] = Gf2MatrixTimes(op, n);
    table[1][n] = Gf2MatrixTimes(op, n << 8);
    table[2][n] = Gf2MatrixTimes(op, n << 16);
    table[3][n] = Gf2MatrixTimes(op, n << 24);
  }
}

Tables::Tables() {
  for (uint32_t n = 0; n < 256; ++n) {
    uint32_t c = n;
    for (int k = 0; k < 8; ++k) c = c & 1 ? (c >> 1) ^ kPoly : c >> 1;
    slice[0][n] = c;
  }
  for (uint32_t n = 0; n < 256; ++n) {
    uint32_t c = slice[0][n];
    for (int k = 1; k < 8; ++k) {
      c = slice[0][c & 0xff] ^ (c >> 8);
      slice[k][n] = c;
    }
  }
  ZerosTable(shift_long, kLong);
  ZerosTable(shift_short, kShort);
}

const Tables& GetTables() {
  static const Tables tables;
  return tables;
}

inline uint32_t Shift(const uint32_t table[4][256], uint32_t crc) {
  return table[0][crc & 0xff] ^ table[1][(crc >> 8) & 0xff] ^ table[2][(crc >> 16) & 0xff] ^
         table[3][crc >> 24];
}

#if defined(__x86_64__)
// Three independent streams of `block` bytes hide the 3-cycle latency of crc32q;
// the zero-shift table moves each partial CRC past the streams after it.
__attribute__((target("sse4.2"))) inline void Interleave(size_t block, const uint32_t table[4][256],
                                                         const unsigned char** pnext, size_t* pn,
                                                         uint64_t* pcrc) {
  const unsigned char* next = *pnext;
  size_t n = *pn;
  uint64_t crc0 = *pcrc;
  while (n >= block * 3) {
    uint64_t crc1 = 0, crc2 = 0;
    const unsigned char* end = next + block;
    do {
      uint64_t a, b, c;
      std::memcpy(&a, next, 8);
      std::memcpy(&b, next + block, 8);
      std::memcpy(&c, next + 2 * block, 8);
      crc0 = _mm_crc32_u64(crc0, a);
      crc1 = _mm_crc32_u64(crc1, b);
      crc2 = _mm_crc32_u64(crc2, c);
      next += 8;
    } while (next < end);
    crc0 = Shift(table, static_cast<uint32_t>(crc0)) ^ crc1;
    crc0 = Shift(table, static_cast<uint32_t>(crc0)) ^ crc2;
    next += block * 2;
    n -= block * 3;
  }
  *pnext = next;
  *pn = n;
  *pcrc = crc0;
}

#endif

bool DetectHardware() {
#if defined(__x86_64__)
  return __builtin_cpu_supports("sse4.2");
#else
  return false;
#endif
}

}  // namespace

#if defined(__x86_64__)
__attribute__((target("sse4.2"))) uint32_t Crc32cSse42(const void* data, size_t n, uint32_t crc) {
  const Tables& t = GetTables();
  const auto* next = static_cast<const unsigned char*>(data);
  uint64_t crc0 = crc ^ 0xffffffffu;
  while (n && (reinterpret_cast<uintptr_t>(next) & 7)) {
    crc0 = _mm_crc32_u8(static_cast<uint32_t>(crc0), *next++);
    --n;
  }
  Interleave(kLong, t.shift_long, &next, &n, &crc0);
  Interleave(kShort, t.shift_short, &next, &n, &crc0);
  while (n >= 8) {
    uint64_t a;
    std::memcpy(&a, next, 8);
    crc0 = _mm_crc32_u64(crc0, a);
    next += 8;
    n -= 8;
  }
  while (n) {
    crc0 = _mm_crc32_u8(static_cast<uint32_t>(crc0), *next++);
    --n;
  }
  return static_cast<uint32_t>(crc0) ^ 0xffffffffu;
}
#else
uint32_t Crc32cSse42(const void* data, size_t n, uint32_t crc) {
  return Crc32cPortable(data, n, crc);
}
#endif

uint32_t Crc32cPortable(const void* data, size_t n, uint32_t crc) {
  const Tables& t = GetTables();
  const auto* p = static_cast<const unsigned char*>(data);
  crc ^= 0xffffffffu;
  while (n >= 8) {
    uint32_t lo, hi;
    std::memcpy(&lo, p, 4);
    std::memcpy(&hi, p + 4, 4);
    lo ^= crc;  // little-endian hosts only, as is the whole format
    crc = t.slice[7][lo & 0xff] ^ t.slice[6][(lo >> 8) & 0xff] ^ t.slice[5][(lo >> 16) & 0xff] ^
          t.slice[4][lo >> 24] ^ t.slice[3][hi & 0xff] ^ t.slice[2][(hi >> 8) & 0xff] ^
          t.slice[1][(hi >> 16) & 0xff] ^ t.slice[0][hi >> 24];
    p += 8;
    n -= 8;
  }
  while (n--) crc = t.slice[0][(crc ^ *p++) & 0xff] ^ (crc >> 8);
  return crc ^ 0xffffffffu;
}

bool Crc32cIsHardware() {
  static const bool hw = DetectHardware();
  return hw;
}

uint32_t Crc32c(const void* data, size_t n, uint32_t crc) {
#if defined(__x86_64__)
  // Folding pays from the first 256 bytes on (crc32c_fold.h).
  if (n >= 256 && Crc32cCanFold()) return Crc32cFold(data, n, crc);
  if (Crc32cIsHardware()) return Crc32cSse42(data, n, crc);
#endif
  return Crc32cPortable(data, n, crc);
}

uint32_t Crc32cCopy(void* dst, const void* src, size_t n, uint32_t crc) {
#if defined(__x86_64__)
  if (n >= kStreamedCopyMin && Crc32cCanFold()) return Crc32cFoldCopy(dst, src, n, crc);
#endif
  std::memcpy(dst, src, n);
  return Crc32c(src, n, crc);
}

}  // namespace gandiva::checkpoint
