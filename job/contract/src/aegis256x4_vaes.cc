// AEGIS-256X4 on 512-bit registers (AVX-512 with VAES); see aegis256x4.h.
//
// State block j of all four lanes is one register: lane i of the RFC's
// V[j,i] is the register's 128-bit lane i, and one VAESENC does the AES round
// of a state block for all four lanes. An update is six such rounds, all
// independent of each other, so a 64-byte block costs six VAESENCs and the
// keystream's two three-input logic operations; the only chain from one
// block to the next is one round's latency.
#include "aegis256x4.h"

#if defined(__x86_64__)

// GCC 12's AVX-512 headers build "undefined" registers that its own
// uninitialised-use warning then reports at every broadcast (GCC bug 105593).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>

#define GD_AEGIS_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,vaes,aes")))

namespace gandiva::sealed::aegis {

namespace {

constexpr size_t kBlock = 64;  // the rate: 16 bytes for each of the four lanes

struct State {
  __m512i v[6];
};

GD_AEGIS_TARGET inline __m512i Broadcast(const uint8_t* p) {
  return _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}

// Bytes [0, n) of a 64-byte block, n < 64.
inline __mmask64 FirstBytes(size_t n) { return (__mmask64{1} << n) - 1; }

// V'[0] = R(V[5], V[0] ^ m), V'[j] = R(V[j-1], V[j]): last to first, so
// each round still reads the old block before it.
GD_AEGIS_TARGET inline void Update(State& s, __m512i m) {
  const __m512i last = s.v[5];
  s.v[5] = _mm512_aesenc_epi128(s.v[4], s.v[5]);
  s.v[4] = _mm512_aesenc_epi128(s.v[3], s.v[4]);
  s.v[3] = _mm512_aesenc_epi128(s.v[2], s.v[3]);
  s.v[2] = _mm512_aesenc_epi128(s.v[1], s.v[2]);
  s.v[1] = _mm512_aesenc_epi128(s.v[0], s.v[1]);
  s.v[0] = _mm512_aesenc_epi128(last, _mm512_xor_si512(s.v[0], m));
}

// z = V[1] ^ V[4] ^ V[5] ^ (V[2] & V[3]).
GD_AEGIS_TARGET inline __m512i Keystream(const State& s) {
  const __m512i x = _mm512_ternarylogic_epi64(s.v[1], s.v[4], s.v[5], 0x96);  // a ^ b ^ c
  return _mm512_ternarylogic_epi64(x, s.v[2], s.v[3], 0x78);                  // a ^ (b & c)
}

GD_AEGIS_TARGET State Init(const uint8_t* key, const uint8_t* nonce) {
  const __m512i k0 = Broadcast(key), k1 = Broadcast(key + 16);
  const __m512i k0n0 = _mm512_xor_si512(k0, Broadcast(nonce));
  const __m512i k1n1 = _mm512_xor_si512(k1, Broadcast(nonce + 16));
  const __m512i c0 = Broadcast(kC0), c1 = Broadcast(kC1);
  // ctx[i]: byte 0 the lane's index, byte 1 the highest index (3).
  const __m512i ctx =
      _mm512_set_epi32(0, 0, 0, 0x303, 0, 0, 0, 0x302, 0, 0, 0, 0x301, 0, 0, 0, 0x300);
  State s{{k0n0, k1n1, c1, c0, _mm512_xor_si512(k0, c0), _mm512_xor_si512(k1, c1)}};
  const __m512i absorbed[4] = {k0, k1, k0n0, k1n1};
  for (int round = 0; round < 4; ++round) {
    for (const __m512i& m : absorbed) {
      s.v[3] = _mm512_xor_si512(s.v[3], ctx);
      s.v[5] = _mm512_xor_si512(s.v[5], ctx);
      Update(s, m);
    }
  }
  return s;
}

GD_AEGIS_TARGET void Absorb(State& s, const uint8_t* p, size_t n) {
  for (; n >= kBlock; p += kBlock, n -= kBlock) Update(s, _mm512_loadu_si512(p));
  if (n > 0) Update(s, _mm512_maskz_loadu_epi8(FirstBytes(n), p));
}

// The state is a copy of the caller's that no pointer reaches: the stores to
// `out` (bytes, which may alias anything) then cannot force the six registers
// through memory at every block (that alone cost 2.5x).
template <bool kDecrypt>
GD_AEGIS_TARGET State Crypt(State s, const uint8_t* in, uint8_t* out, size_t n) {
  for (; n >= kBlock; in += kBlock, out += kBlock, n -= kBlock) {
    const __m512i z = Keystream(s);
    const __m512i x = _mm512_loadu_si512(in);
    const __m512i y = _mm512_xor_si512(x, z);
    Update(s, kDecrypt ? y : x);  // the plaintext goes into the state
    _mm512_storeu_si512(out, y);
  }
  if (n == 0) return s;
  // The last partial block, zero-padded; a decrypted one is padded again
  // after the keystream (its tail would otherwise be keystream bytes).
  const __mmask64 mask = FirstBytes(n);
  const __m512i z = Keystream(s);
  const __m512i x = _mm512_maskz_loadu_epi8(mask, in);
  const __m512i y = _mm512_maskz_mov_epi8(mask, _mm512_xor_si512(x, z));
  Update(s, kDecrypt ? y : x);
  _mm512_mask_storeu_epi8(out, mask, y);
  return s;
}

GD_AEGIS_TARGET void Finalize(State& s, size_t aad_len, size_t n, uint8_t* tag) {
  const __m512i lengths = _mm512_broadcast_i32x4(_mm_set_epi64x(
      static_cast<long long>(uint64_t{n} * 8), static_cast<long long>(uint64_t{aad_len} * 8)));
  const __m512i t = _mm512_xor_si512(s.v[3], lengths);
  for (int i = 0; i < 7; ++i) Update(s, t);
  const __m512i all =
      _mm512_ternarylogic_epi64(_mm512_ternarylogic_epi64(s.v[0], s.v[1], s.v[2], 0x96), s.v[3],
                                _mm512_xor_si512(s.v[4], s.v[5]), 0x96);
  const __m256i half =
      _mm256_xor_si256(_mm512_castsi512_si256(all), _mm512_extracti64x4_epi64(all, 1));
  const __m128i folded =
      _mm_xor_si128(_mm256_castsi256_si128(half), _mm256_extracti128_si256(half, 1));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(tag), folded);
}

}  // namespace

GD_AEGIS_TARGET void RunVaes512(const Pass& p, uint8_t* tag) {
  State s = Init(p.key, p.nonce);
  Absorb(s, p.aad, p.aad_len);
  s = p.decrypt ? Crypt<true>(s, p.in, p.out, p.n) : Crypt<false>(s, p.in, p.out, p.n);
  Finalize(s, p.aad_len, p.n, tag);
  // The state would let anyone who read it decrypt the rest of this frame.
  for (__m512i& v : s.v) v = _mm512_setzero_si512();
  __asm__ volatile("" : : "r"(&s) : "memory");
}

}  // namespace gandiva::sealed::aegis

#else  // not x86-64

namespace gandiva::sealed::aegis {
void RunVaes512(const Pass&, uint8_t*) {}
}  // namespace gandiva::sealed::aegis

#endif
