// AES-256-GCM with VAES and VPCLMULQDQ; see aes_gcm_vaes.h.
//
// How GHASH's field is held. GCM multiplies in GF(2^128) modulo
// P = x^128 + x^7 + x^2 + x + 1, the first bit of a block (the top bit of its
// first byte) being the coefficient of x^0. Byte-reversing a block puts that
// bit at bit 127 of a register: bit 127 - i holds the coefficient of x^i (the
// "reflected" form). The carry-less product of two reflected registers then
// holds their product with bit 254 - k the coefficient of x^k, one bit short of
// a 256-bit reflection. Keeping h times x^-1 instead of h makes up that bit, so
// reflect(a) * reflect(h x^-1) is the 256-bit reflection of a polynomial equal
// to a h modulo P. Folding it to 128 bits takes two multiplies by
// g = x^6 + x + 1 (0xc2 << 56 reflected), a 64-bit word at a time, because
// modulo P:  x^192 E = x^64 E + x^65 E g  and  x^128 F = F + x F g.
//
// Each loop turn handles 256 bytes: 16 counter blocks through AES, four to a
// register, and the 16 ciphertext blocks multiplied by h^16 ... h^1 and summed
// unreduced, then folded once. Only y's own multiply and the fold chain one
// turn to the next.
#include "aes_gcm_vaes.h"

#include <cstring>

#include "cpu_features.h"

#if defined(__x86_64__)

// GCC 12's AVX-512 headers build "undefined" registers that its own
// uninitialised-use warning then reports at every broadcast (GCC bug 105593).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>
#include <openssl/crypto.h>

#define GD_VAES_TARGET \
  __attribute__((target("avx512f,avx512bw,avx512vl,vaes,vpclmulqdq,aes,pclmul,sse4.1,ssse3")))

namespace gandiva::sealed {

namespace {

// A group: the blocks summed before one fold, h^kPowers ... h^1.
constexpr int kRegisters = 4;
constexpr size_t kPowers = 4 * kRegisters;
constexpr size_t kGroupBytes = 64 * kRegisters;

// ---- AES-256 --------------------------------------------------------------

// Word i of the result is the xor of words 0..i of k.
GD_VAES_TARGET inline __m128i PrefixXor(__m128i k) {
  k = _mm_xor_si128(k, _mm_slli_si128(k, 4));
  k = _mm_xor_si128(k, _mm_slli_si128(k, 4));
  return _mm_xor_si128(k, _mm_slli_si128(k, 4));
}

// Round key 2j from keys 2j-2 and 2j-1 (FIPS-197's w[8j] = w[8j-8] xor
// SubWord(RotWord(w[8j-1])) xor Rcon, and the next three words chained on).
template <int kRcon>
GD_VAES_TARGET inline __m128i EvenRoundKey(__m128i two_back, __m128i one_back) {
  const __m128i t = _mm_shuffle_epi32(_mm_aeskeygenassist_si128(one_back, kRcon), 0xff);
  return _mm_xor_si128(PrefixXor(two_back), t);
}

// Round key 2j+1: SubWord of the last word of key 2j, no rotation, no Rcon.
GD_VAES_TARGET inline __m128i OddRoundKey(__m128i two_back, __m128i one_back) {
  const __m128i t = _mm_shuffle_epi32(_mm_aeskeygenassist_si128(one_back, 0), 0xaa);
  return _mm_xor_si128(PrefixXor(two_back), t);
}

GD_VAES_TARGET void ExpandKey(const uint8_t* key, uint8_t (*out)[16]) {
  __m128i k[15];
  k[0] = _mm_loadu_si128(reinterpret_cast<const __m128i*>(key));
  k[1] = _mm_loadu_si128(reinterpret_cast<const __m128i*>(key + 16));
  k[2] = EvenRoundKey<0x01>(k[0], k[1]);
  k[3] = OddRoundKey(k[1], k[2]);
  k[4] = EvenRoundKey<0x02>(k[2], k[3]);
  k[5] = OddRoundKey(k[3], k[4]);
  k[6] = EvenRoundKey<0x04>(k[4], k[5]);
  k[7] = OddRoundKey(k[5], k[6]);
  k[8] = EvenRoundKey<0x08>(k[6], k[7]);
  k[9] = OddRoundKey(k[7], k[8]);
  k[10] = EvenRoundKey<0x10>(k[8], k[9]);
  k[11] = OddRoundKey(k[9], k[10]);
  k[12] = EvenRoundKey<0x20>(k[10], k[11]);
  k[13] = OddRoundKey(k[11], k[12]);
  k[14] = EvenRoundKey<0x40>(k[12], k[13]);
  for (int i = 0; i < 15; ++i) _mm_store_si128(reinterpret_cast<__m128i*>(out[i]), k[i]);
  OPENSSL_cleanse(k, sizeof k);
}

GD_VAES_TARGET inline __m128i EncryptBlock(const uint8_t (*rk)[16], __m128i x) {
  x = _mm_xor_si128(x, _mm_load_si128(reinterpret_cast<const __m128i*>(rk[0])));
  for (int r = 1; r < 14; ++r)
    x = _mm_aesenc_si128(x, _mm_load_si128(reinterpret_cast<const __m128i*>(rk[r])));
  return _mm_aesenclast_si128(x, _mm_load_si128(reinterpret_cast<const __m128i*>(rk[14])));
}

// The round keys, each in all four lanes.
struct WideKeys {
  __m512i k[15];
};

GD_VAES_TARGET inline WideKeys Widen(const uint8_t (*rk)[16]) {
  WideKeys w;
  for (int i = 0; i < 15; ++i)
    w.k[i] = _mm512_broadcast_i32x4(_mm_load_si128(reinterpret_cast<const __m128i*>(rk[i])));
  return w;
}

// ---- GHASH ----------------------------------------------------------------

GD_VAES_TARGET inline __m128i ByteReverse(__m128i x) {
  return _mm_shuffle_epi8(x, _mm_set_epi8(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15));
}

GD_VAES_TARGET inline __m512i ByteReverseLanes(__m512i x) {
  return _mm512_shuffle_epi8(x, _mm512_broadcast_i32x4(_mm_set_epi8(0, 1, 2, 3, 4, 5, 6, 7, 8, 9,
                                                                    10, 11, 12, 13, 14, 15)));
}

// A 256-bit product kept as three parts: lo at bit 0, mid at bit 64, hi at
// bit 128 (the cross terms are summed, not split, until the fold).
struct Product128 {
  __m128i lo, mid, hi;
};

// The 256-bit reflection folded to the 128-bit one (see the top of the file).
GD_VAES_TARGET inline __m128i Fold(Product128 p) {
  const __m128i g = _mm_set_epi64x(0, static_cast<long long>(0xc200000000000000ull));
  // Bits 0..63 hold x^192..x^255: to bits 128..191 as x^64 E, and x^65 E g at 64.
  __m128i t = _mm_clmulepi64_si128(p.lo, g, 0x00);
  p.mid = _mm_xor_si128(p.mid, _mm_xor_si128(_mm_shuffle_epi32(p.lo, 0x4e), t));
  // Bits 64..127 hold x^128..x^191: to bits 192..255 as F, and x F g at 128.
  t = _mm_clmulepi64_si128(p.mid, g, 0x00);
  return _mm_xor_si128(p.hi, _mm_xor_si128(_mm_shuffle_epi32(p.mid, 0x4e), t));
}

// reflect(a) times a stored power of h, not yet folded.
GD_VAES_TARGET inline Product128 Unreduced(__m128i a, __m128i h) {
  return {_mm_clmulepi64_si128(a, h, 0x00),
          _mm_xor_si128(_mm_clmulepi64_si128(a, h, 0x01), _mm_clmulepi64_si128(a, h, 0x10)),
          _mm_clmulepi64_si128(a, h, 0x11)};
}

// reflect(a) times a stored power of h: reflect(a h^k).
GD_VAES_TARGET inline __m128i Multiply(__m128i a, __m128i h) { return Fold(Unreduced(a, h)); }

// Sums of four lanes' unreduced products.
struct Product512 {
  __m512i lo, mid, hi;

  GD_VAES_TARGET Product512()
      : lo(_mm512_setzero_si512()), mid(_mm512_setzero_si512()), hi(_mm512_setzero_si512()) {}

  GD_VAES_TARGET void Add(__m512i x, __m512i h) {
    lo = _mm512_xor_si512(lo, _mm512_clmulepi64_epi128(x, h, 0x00));
    hi = _mm512_xor_si512(hi, _mm512_clmulepi64_epi128(x, h, 0x11));
    mid = _mm512_ternarylogic_epi64(mid, _mm512_clmulepi64_epi128(x, h, 0x01),
                                    _mm512_clmulepi64_epi128(x, h, 0x10), 0x96);
  }
};

GD_VAES_TARGET inline __m128i XorLanes(__m512i v) {
  const __m256i half = _mm256_xor_si256(_mm512_castsi512_si256(v), _mm512_extracti64x4_epi64(v, 1));
  return _mm_xor_si128(_mm256_castsi256_si128(half), _mm256_extracti128_si256(half, 1));
}

// (y xor first block) h^k + the rest = y h^k + the sum: the lanes' sums do not
// wait for y, which is multiplied on its own, so the one chain that runs from
// group to group is y's multiply and the fold.
GD_VAES_TARGET inline __m128i FoldWith(const Product512& p, __m128i y, __m128i h_first) {
  const Product128 yh = Unreduced(y, h_first);
  return Fold(Product128{_mm_xor_si128(XorLanes(p.lo), yh.lo),
                         _mm_xor_si128(XorLanes(p.mid), yh.mid),
                         _mm_xor_si128(XorLanes(p.hi), yh.hi)});
}

// Bytes [0, n) of a 64-byte register, n <= 64.
inline __mmask64 FirstBytes(size_t n) { return n >= 64 ? ~__mmask64{0} : (__mmask64{1} << n) - 1; }

// The h powers for the lanes of register j of a group of `blocks` blocks: the
// table ends in h^1, so block i of the group takes entry kPowers - blocks + i.
GD_VAES_TARGET inline __m512i PowersFor(const uint8_t (*powers)[16], size_t blocks, size_t j) {
  const size_t lanes = blocks - 4 * j < 4 ? blocks - 4 * j : 4;
  const __mmask8 qwords = static_cast<__mmask8>((1u << (2 * lanes)) - 1);
  return _mm512_maskz_loadu_epi64(qwords, powers[kPowers - blocks + 4 * j]);
}

GD_VAES_TARGET inline __m128i FirstPower(const uint8_t (*powers)[16], size_t blocks) {
  return _mm_load_si128(reinterpret_cast<const __m128i*>(powers[kPowers - blocks]));
}

// y after hashing n <= kGroupBytes bytes (zero-padded to whole blocks).
GD_VAES_TARGET __m128i HashGroup(const uint8_t (*powers)[16], __m128i y, const uint8_t* p,
                                 size_t n) {
  const size_t blocks = (n + 15) / 16;
  Product512 sum;
  for (size_t j = 0; 64 * j < n; ++j) {
    const __m512i x = ByteReverseLanes(_mm512_maskz_loadu_epi8(FirstBytes(n - 64 * j), p + 64 * j));
    sum.Add(x, PowersFor(powers, blocks, j));
  }
  return FoldWith(sum, y, FirstPower(powers, blocks));
}

// A group's registers: its key stream, or the blocks it hashes.
struct Group {
  __m512i v[kRegisters];
};

// The powers a whole group multiplies by, in registers: h^16 ... h^1 four to
// a register, and h^16 alone for y.
struct WidePowers {
  __m512i h[kRegisters];
  __m128i first;
};

GD_VAES_TARGET inline WidePowers WidenPowers(const uint8_t (*powers)[16]) {
  WidePowers w;
  for (int j = 0; j < kRegisters; ++j) w.h[j] = _mm512_load_si512(powers[4 * j]);
  w.first = FirstPower(powers, kPowers);
  return w;
}

GD_VAES_TARGET inline __m128i HashWhole(const Group& blocks, __m128i y, const WidePowers& w) {
  Product512 sum;
#pragma GCC unroll 4
  for (int j = 0; j < kRegisters; ++j) sum.Add(ByteReverseLanes(blocks.v[j]), w.h[j]);
  return FoldWith(sum, y, w.first);
}

// y after hashing n bytes of associated data (the last block zero-padded).
GD_VAES_TARGET __m128i HashBytes(const uint8_t (*powers)[16], __m128i y, const uint8_t* p,
                                 size_t n) {
  const WidePowers w = WidenPowers(powers);
  size_t off = 0;
  for (; off + kGroupBytes <= n; off += kGroupBytes) {
    Group blocks;
    for (int j = 0; j < kRegisters; ++j) blocks.v[j] = _mm512_loadu_si512(p + off + 64 * j);
    y = HashWhole(blocks, y, w);
  }
  return off < n ? HashGroup(powers, y, p + off, n - off) : y;
}

// ---- CTR and GHASH in one pass ----------------------------------------------

// A counter block as its lanes hold it: the nonce's 12 bytes, then the 32-bit
// counter in native order, so that adding to dword 3 counts; turned big-endian
// just before AES.
GD_VAES_TARGET inline __m512i CounterOrder(__m512i ctr) {
  return _mm512_shuffle_epi8(ctr, _mm512_broadcast_i32x4(_mm_set_epi8(12, 13, 14, 15, 11, 10, 9, 8,
                                                                      7, 6, 5, 4, 3, 2, 1, 0)));
}

// Counters first, first + 1, first + 2, first + 3 in the four lanes.
GD_VAES_TARGET inline __m512i FirstCounters(const uint8_t* nonce, uint32_t first) {
  alignas(16) uint8_t block[16];
  std::memcpy(block, nonce, 12);
  std::memcpy(block + 12, &first, 4);
  const __m512i base = _mm512_broadcast_i32x4(_mm_load_si128(reinterpret_cast<__m128i*>(block)));
  return _mm512_add_epi32(base, _mm512_set_epi32(3, 0, 0, 0, 2, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0));
}

GD_VAES_TARGET inline Group KeyStream(const WideKeys& keys, __m512i& ctr) {
  const __m512i four = _mm512_set_epi32(4, 0, 0, 0, 4, 0, 0, 0, 4, 0, 0, 0, 4, 0, 0, 0);
  Group stream;
#pragma GCC unroll 4
  for (int j = 0; j < kRegisters; ++j) {
    stream.v[j] = CounterOrder(ctr);
    ctr = _mm512_add_epi32(ctr, four);
  }
  // Round by round across the registers: four independent chains in flight.
#pragma GCC unroll 4
  for (int j = 0; j < kRegisters; ++j) stream.v[j] = _mm512_xor_si512(stream.v[j], keys.k[0]);
#pragma GCC unroll 13
  for (int r = 1; r < 14; ++r) {
#pragma GCC unroll 4
    for (int j = 0; j < kRegisters; ++j) stream.v[j] = _mm512_aesenc_epi128(stream.v[j], keys.k[r]);
  }
#pragma GCC unroll 4
  for (int j = 0; j < kRegisters; ++j)
    stream.v[j] = _mm512_aesenclast_epi128(stream.v[j], keys.k[14]);
  return stream;
}

// Xors a group with its key stream; returns the ciphertext side, to hash.
template <bool kSeal>
GD_VAES_TARGET inline Group ApplyStream(const Group& stream, const uint8_t* in, uint8_t* out) {
  Group hashed;
#pragma GCC unroll 4
  for (int j = 0; j < kRegisters; ++j) {
    const __m512i x = _mm512_loadu_si512(in + 64 * j);
    const __m512i c = _mm512_xor_si512(x, stream.v[j]);
    _mm512_storeu_si512(out + 64 * j, c);
    hashed.v[j] = kSeal ? c : x;
  }
  return hashed;
}

// Encrypts (kSeal) or decrypts n bytes from `in` to `out` and hashes the
// ciphertext into y.
template <bool kSeal>
GD_VAES_TARGET __m128i CryptAndHash(const uint8_t (*rk)[16], const uint8_t (*powers)[16], __m128i y,
                                    const uint8_t* nonce, const uint8_t* in, uint8_t* out,
                                    size_t n) {
  const WideKeys keys = Widen(rk);
  __m512i ctr = FirstCounters(nonce, 2);  // counter 1 makes the tag's mask
  const WidePowers w = WidenPowers(powers);

  // The hashing trails the cipher by one group, so that a group's AES, the
  // longest chain, runs while the group before it is hashed.
  size_t off = 0;
  if (n >= kGroupBytes) {
    Group hash_next = ApplyStream<kSeal>(KeyStream(keys, ctr), in, out);
    for (off = kGroupBytes; off + kGroupBytes <= n; off += kGroupBytes) {
      const Group stream = KeyStream(keys, ctr);
      y = HashWhole(hash_next, y, w);
      hash_next = ApplyStream<kSeal>(stream, in + off, out + off);
    }
    y = HashWhole(hash_next, y, w);
  }
  if (off < n) {
    // Less than a group: a whole group's key stream, used as far as it goes.
    const size_t rest = n - off, blocks = (rest + 15) / 16;
    const Group stream = KeyStream(keys, ctr);
    Product512 sum;
    for (size_t j = 0; 64 * j < rest; ++j) {
      const __mmask64 bytes = FirstBytes(rest - 64 * j);
      const __m512i x = _mm512_maskz_loadu_epi8(bytes, in + off + 64 * j);
      const __m512i c = _mm512_xor_si512(x, stream.v[j]);
      _mm512_mask_storeu_epi8(out + off + 64 * j, bytes, c);
      // Past the last byte the ciphertext is zero padding, not key stream.
      sum.Add(ByteReverseLanes(kSeal ? _mm512_maskz_mov_epi8(bytes, c) : x),
              PowersFor(powers, blocks, j));
    }
    y = FoldWith(sum, y, FirstPower(powers, blocks));
  }
  return y;
}

// GHASH's last block (the two lengths in bits), then the tag: y xor AES(J0).
GD_VAES_TARGET __m128i Tag(const uint8_t (*rk)[16], const uint8_t (*powers)[16], __m128i y,
                           const uint8_t* nonce, size_t aad_len, size_t n) {
  const __m128i lengths = _mm_set_epi64x(static_cast<long long>(uint64_t{aad_len} * 8),
                                         static_cast<long long>(uint64_t{n} * 8));
  y = Multiply(_mm_xor_si128(y, lengths),
               _mm_load_si128(reinterpret_cast<const __m128i*>(powers[kPowers - 1])));
  alignas(16) uint8_t j0[16] = {};
  std::memcpy(j0, nonce, 12);
  j0[15] = 1;
  const __m128i mask = EncryptBlock(rk, _mm_load_si128(reinterpret_cast<__m128i*>(j0)));
  return _mm_xor_si128(mask, ByteReverse(y));
}

GD_VAES_TARGET void Setup(const uint8_t* key, uint8_t (*rk)[16], uint8_t (*powers)[16]) {
  ExpandKey(key, rk);
  const __m128i h = ByteReverse(EncryptBlock(rk, _mm_setzero_si128()));
  // h x^-1: a shift left by one in the reflected form; the bit shifted out
  // (the coefficient of x^0) comes back as P x^-1 = x^127 + x^6 + x + 1.
  uint64_t lo = static_cast<uint64_t>(_mm_cvtsi128_si64(h));
  uint64_t hi = static_cast<uint64_t>(_mm_extract_epi64(h, 1));
  const uint64_t carry = 0 - (hi >> 63);
  hi = (hi << 1 | lo >> 63) ^ (carry & 0xc200000000000000ull);
  lo = (lo << 1) ^ (carry & 1);
  __m128i power = _mm_set_epi64x(static_cast<long long>(hi), static_cast<long long>(lo));
  const __m128i h1 = power;
  for (int k = kPowers - 1;; --k) {
    _mm_store_si128(reinterpret_cast<__m128i*>(powers[k]), power);
    if (k == 0) break;
    power = Multiply(power, h1);
  }
}

GD_VAES_TARGET void SealFrame(const uint8_t (*rk)[16], const uint8_t (*powers)[16],
                              const uint8_t* nonce, const uint8_t* aad, size_t aad_len,
                              const uint8_t* in, uint8_t* out, size_t n, uint8_t* tag) {
  __m128i y = HashBytes(powers, _mm_setzero_si128(), aad, aad_len);
  y = CryptAndHash<true>(rk, powers, y, nonce, in, out, n);
  _mm_storeu_si128(reinterpret_cast<__m128i*>(tag), Tag(rk, powers, y, nonce, aad_len, n));
}

GD_VAES_TARGET bool OpenFrame(const uint8_t (*rk)[16], const uint8_t (*powers)[16],
                              const uint8_t* nonce, const uint8_t* aad, size_t aad_len,
                              uint8_t* data, size_t n, const uint8_t* tag) {
  __m128i y = HashBytes(powers, _mm_setzero_si128(), aad, aad_len);
  y = CryptAndHash<false>(rk, powers, y, nonce, data, data, n);
  // Compared whole, without an early exit.
  const __m128i diff = _mm_xor_si128(Tag(rk, powers, y, nonce, aad_len, n),
                                     _mm_loadu_si128(reinterpret_cast<const __m128i*>(tag)));
  return _mm_testz_si128(diff, diff) != 0;
}

}  // namespace

bool AesGcmVaesAvailable() { return CpuHasAvx512VaesClmul(); }

bool AesGcmVaesChosen(SealedCipher cipher) {
  return ChosenCipher(cipher) == SealedCipher::kFastest && AesGcmVaesAvailable();
}

AesGcmVaes::AesGcmVaes(const uint8_t* key) { Setup(key, round_keys_, h_powers_); }

AesGcmVaes::~AesGcmVaes() {
  OPENSSL_cleanse(round_keys_, sizeof round_keys_);
  OPENSSL_cleanse(h_powers_, sizeof h_powers_);
}

void AesGcmVaes::Seal(const uint8_t* nonce, const uint8_t* aad, size_t aad_len, const uint8_t* in,
                      uint8_t* out, size_t n, uint8_t* tag) const {
  SealFrame(round_keys_, h_powers_, nonce, aad, aad_len, in, out, n, tag);
}

bool AesGcmVaes::Open(const uint8_t* nonce, const uint8_t* aad, size_t aad_len, uint8_t* data,
                      size_t n, const uint8_t* tag) const {
  return OpenFrame(round_keys_, h_powers_, nonce, aad, aad_len, data, n, tag);
}

}  // namespace gandiva::sealed

#else  // not x86-64: OpenSSL's code serves every frame

namespace gandiva::sealed {
bool AesGcmVaesAvailable() { return false; }
bool AesGcmVaesChosen(SealedCipher) { return false; }
AesGcmVaes::AesGcmVaes(const uint8_t*) {}
AesGcmVaes::~AesGcmVaes() = default;
void AesGcmVaes::Seal(const uint8_t*, const uint8_t*, size_t, const uint8_t*, uint8_t*, size_t,
                      uint8_t*) const {}
bool AesGcmVaes::Open(const uint8_t*, const uint8_t*, size_t, uint8_t*, size_t,
                      const uint8_t*) const {
  return false;
}
}  // namespace gandiva::sealed

#endif
