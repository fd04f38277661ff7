// AEGIS-256X4 one 128-bit lane at a time, as RFC 10032 writes it; see
// aegis256x4.h. The AES round comes from the CPU's 128-bit AES instructions
// (AES-NI, ARMv8 AES: this file is built with them enabled, and only runs
// them where CPUID or the kernel says the CPU has them) or from portable code.
#include <cstring>

#include "aegis256x4.h"

#if defined(__x86_64__)
#include <wmmintrin.h>
#elif defined(__aarch64__) && defined(__ARM_FEATURE_AES)
#include <arm_neon.h>
#define GD_AEGIS_ARM_AES 1
#endif

namespace gandiva::sealed::aegis {

namespace {

constexpr size_t kLanes = 4;
constexpr size_t kBlock = 16 * kLanes;

// ---- the AES round, three ways ---------------------------------------------
// Each policy has a Block type with Load, Store, Xor, And and Round(in, rk).

#if defined(__x86_64__)
struct HardwareRound {
  using Block = __m128i;
  static Block Load(const uint8_t* p) { return _mm_loadu_si128(reinterpret_cast<const Block*>(p)); }
  static void Store(uint8_t* p, Block b) { _mm_storeu_si128(reinterpret_cast<Block*>(p), b); }
  static Block Xor(Block a, Block b) { return _mm_xor_si128(a, b); }
  static Block And(Block a, Block b) { return _mm_and_si128(a, b); }
  static Block Round(Block in, Block rk) { return _mm_aesenc_si128(in, rk); }
};
#elif defined(GD_AEGIS_ARM_AES)
struct HardwareRound {
  using Block = uint8x16_t;
  static Block Load(const uint8_t* p) { return vld1q_u8(p); }
  static void Store(uint8_t* p, Block b) { vst1q_u8(p, b); }
  static Block Xor(Block a, Block b) { return veorq_u8(a, b); }
  static Block And(Block a, Block b) { return vandq_u8(a, b); }
  // AESE adds its key before SubBytes: with a zero key, AESE then AESMC is
  // SubBytes, ShiftRows, MixColumns; the round key is added after.
  static Block Round(Block in, Block rk) {
    return veorq_u8(vaesmcq_u8(vaeseq_u8(in, vdupq_n_u8(0))), rk);
  }
};
#endif

// FIPS-197's S-box, computed: the multiplicative inverse in GF(2^8), then the
// affine map. Looked up by secret bytes, so the portable round is not
// constant-time (aegis256x4.h says where it runs).
struct SBox {
  uint8_t table[256];
  constexpr SBox() : table{} {
    uint8_t p = 1, q = 1;
    do {
      // p runs through the multiplicative group (times 3), q = 1/p (divided by 3).
      p = static_cast<uint8_t>(p ^ (p << 1) ^ (p & 0x80 ? 0x1b : 0));
      q = static_cast<uint8_t>(q ^ (q << 1));
      q = static_cast<uint8_t>(q ^ (q << 2));
      q = static_cast<uint8_t>(q ^ (q << 4));
      if (q & 0x80) q ^= 0x09;
      const auto rotl = [](uint8_t x, int k) {
        return static_cast<uint8_t>((x << k) | (x >> (8 - k)));
      };
      table[p] = static_cast<uint8_t>(q ^ rotl(q, 1) ^ rotl(q, 2) ^ rotl(q, 3) ^ rotl(q, 4) ^ 0x63);
    } while (p != 1);
    table[0] = 0x63;
  }
};
constexpr SBox kSBox;

inline uint8_t Times2(uint8_t x) { return static_cast<uint8_t>((x << 1) ^ (x & 0x80 ? 0x1b : 0)); }

struct PortableRound {
  struct Block {
    uint8_t b[16];
  };
  static Block Load(const uint8_t* p) {
    Block x;
    std::memcpy(x.b, p, 16);
    return x;
  }
  static void Store(uint8_t* p, const Block& x) { std::memcpy(p, x.b, 16); }
  static Block Xor(const Block& a, const Block& b) {
    Block x;
    for (int i = 0; i < 16; ++i) x.b[i] = a.b[i] ^ b.b[i];
    return x;
  }
  static Block And(const Block& a, const Block& b) {
    Block x;
    for (int i = 0; i < 16; ++i) x.b[i] = a.b[i] & b.b[i];
    return x;
  }
  // The state is four columns of four bytes (byte 4c + r: column c, row r).
  static Block Round(const Block& in, const Block& rk) {
    Block t;
    for (int c = 0; c < 4; ++c)    // SubBytes, and ShiftRows: row r moves
      for (int r = 0; r < 4; ++r)  // r columns to the left
        t.b[4 * c + r] = kSBox.table[in.b[4 * ((c + r) % 4) + r]];
    Block out;
    for (int c = 0; c < 4; ++c) {  // MixColumns
      const uint8_t* a = t.b + 4 * c;
      const uint8_t all = a[0] ^ a[1] ^ a[2] ^ a[3];
      for (int r = 0; r < 4; ++r)  // 2 a_r ^ 3 a_{r+1} ^ a_{r+2} ^ a_{r+3}
        out.b[4 * c + r] = a[r] ^ all ^ Times2(a[r] ^ a[(r + 1) % 4]);
    }
    return Xor(out, rk);
  }
};

// ---- AEGIS-256X4, lane by lane ---------------------------------------------

template <class R>
struct State {
  typename R::Block v[6][kLanes];  // v[j][i]: the RFC's V[j,i]
};

// V'[0] = R(V[5], V[0] ^ m), V'[j] = R(V[j-1], V[j]): last to first, so
// each round still reads the old block before it.
// Written out, lanes unrolled: as loops, the compiler kept the state in
// memory and indexed it (2.8 GB/s here, against 8.1 written out).
template <class R>
inline void Update(State<R>& s, const typename R::Block* m) {
#pragma GCC unroll 4
  for (size_t i = 0; i < kLanes; ++i) {
    const typename R::Block last = s.v[5][i];
    s.v[5][i] = R::Round(s.v[4][i], s.v[5][i]);
    s.v[4][i] = R::Round(s.v[3][i], s.v[4][i]);
    s.v[3][i] = R::Round(s.v[2][i], s.v[3][i]);
    s.v[2][i] = R::Round(s.v[1][i], s.v[2][i]);
    s.v[1][i] = R::Round(s.v[0][i], s.v[1][i]);
    s.v[0][i] = R::Round(last, R::Xor(s.v[0][i], m[i]));
  }
}

template <class R>
inline void UpdateWith(State<R>& s, const uint8_t* block) {
  typename R::Block m[kLanes];
  for (size_t i = 0; i < kLanes; ++i) m[i] = R::Load(block + 16 * i);
  Update(s, m);
}

// z = V[1] ^ V[4] ^ V[5] ^ (V[2] & V[3]), lane by lane.
template <class R>
inline void Keystream(const State<R>& s, typename R::Block* z) {
#pragma GCC unroll 4
  for (size_t i = 0; i < kLanes; ++i)
    z[i] = R::Xor(R::Xor(R::Xor(s.v[1][i], s.v[4][i]), s.v[5][i]), R::And(s.v[2][i], s.v[3][i]));
}

template <class R>
State<R> Init(const uint8_t* key, const uint8_t* nonce) {
  using Block = typename R::Block;
  const Block k0 = R::Load(key), k1 = R::Load(key + 16);
  const Block k0n0 = R::Xor(k0, R::Load(nonce)), k1n1 = R::Xor(k1, R::Load(nonce + 16));
  const Block c0 = R::Load(kC0), c1 = R::Load(kC1);
  State<R> s;
  Block ctx[kLanes];
  for (size_t i = 0; i < kLanes; ++i) {
    // ctx[i]: byte 0 the lane's index, byte 1 the highest index.
    const uint8_t bytes[16] = {static_cast<uint8_t>(i), static_cast<uint8_t>(kLanes - 1)};
    ctx[i] = R::Load(bytes);
    s.v[0][i] = k0n0;
    s.v[1][i] = k1n1;
    s.v[2][i] = c1;
    s.v[3][i] = c0;
    s.v[4][i] = R::Xor(k0, c0);
    s.v[5][i] = R::Xor(k1, c1);
  }
  const Block absorbed[4] = {k0, k1, k0n0, k1n1};
  for (int round = 0; round < 4; ++round) {
    for (const Block& k : absorbed) {
      Block m[kLanes];
      for (size_t i = 0; i < kLanes; ++i) {
        s.v[3][i] = R::Xor(s.v[3][i], ctx[i]);
        s.v[5][i] = R::Xor(s.v[5][i], ctx[i]);
        m[i] = k;
      }
      Update(s, m);
    }
  }
  return s;
}

template <class R>
void Absorb(State<R>& s, const uint8_t* p, size_t n) {
  for (; n >= kBlock; p += kBlock, n -= kBlock) UpdateWith(s, p);
  if (n > 0) {
    uint8_t padded[kBlock] = {};
    std::memcpy(padded, p, n);
    UpdateWith(s, padded);
  }
}

// The state is a copy of the caller's that no pointer reaches, so the stores
// to `out` (bytes, which may alias anything) do not force it through memory.
template <class R>
State<R> Crypt(State<R> s, bool decrypt, const uint8_t* in, uint8_t* out, size_t n) {
  using Block = typename R::Block;
  for (; n >= kBlock; in += kBlock, out += kBlock, n -= kBlock) {
    Block z[kLanes], plain[kLanes], result[kLanes];
    Keystream(s, z);
#pragma GCC unroll 4
    for (size_t i = 0; i < kLanes; ++i) {
      const Block x = R::Load(in + 16 * i);
      result[i] = R::Xor(x, z[i]);
      plain[i] = decrypt ? result[i] : x;  // the plaintext goes into the state
    }
    Update(s, plain);
#pragma GCC unroll 4
    for (size_t i = 0; i < kLanes; ++i) R::Store(out + 16 * i, result[i]);
  }
  if (n == 0) return s;
  // The last partial block, zero-padded; a decrypted one is padded again
  // after the keystream (its tail would otherwise be keystream bytes).
  uint8_t padded[kBlock] = {};
  std::memcpy(padded, in, n);
  uint8_t result[kBlock];
  Block z[kLanes];
  Keystream(s, z);
  for (size_t i = 0; i < kLanes; ++i)
    R::Store(result + 16 * i, R::Xor(R::Load(padded + 16 * i), z[i]));
  if (decrypt) std::memset(result + n, 0, kBlock - n);
  UpdateWith(s, decrypt ? result : padded);
  std::memcpy(out, result, n);
  return s;
}

template <class R>
void Finalize(State<R>& s, size_t aad_len, size_t n, uint8_t* tag) {
  using Block = typename R::Block;
  uint8_t lengths[16];
  const uint64_t bits[2] = {uint64_t{aad_len} * 8, uint64_t{n} * 8};  // LE64 || LE64
  std::memcpy(lengths, bits, sizeof lengths);
  const Block u = R::Load(lengths);
  Block t[kLanes];
  for (size_t i = 0; i < kLanes; ++i) t[i] = R::Xor(s.v[3][i], u);
  for (int r = 0; r < 7; ++r) Update(s, t);
  Block sum = R::Xor(s.v[0][0], s.v[1][0]);
  for (size_t i = 0; i < kLanes; ++i)
    for (size_t j = i == 0 ? 2 : 0; j < 6; ++j) sum = R::Xor(sum, s.v[j][i]);
  R::Store(tag, sum);
}

template <class R>
void Run(const Pass& p, uint8_t* tag) {
  State<R> s = Init<R>(p.key, p.nonce);
  Absorb(s, p.aad, p.aad_len);
  s = Crypt(s, p.decrypt, p.in, p.out, p.n);
  Finalize(s, p.aad_len, p.n, tag);
  // The state would let anyone who read it decrypt the rest of this frame.
  volatile uint8_t* bytes = reinterpret_cast<volatile uint8_t*>(&s);
  for (size_t i = 0; i < sizeof s; ++i) bytes[i] = 0;
}

}  // namespace

void RunPortable(const Pass& p, uint8_t* tag) { Run<PortableRound>(p, tag); }

#if defined(__x86_64__) || defined(GD_AEGIS_ARM_AES)
void RunAes128(const Pass& p, uint8_t* tag) { Run<HardwareRound>(p, tag); }
#else
void RunAes128(const Pass& p, uint8_t* tag) { RunPortable(p, tag); }
#endif

void PortableAesRound(const uint8_t* in, const uint8_t* round_key, uint8_t* out) {
  PortableRound::Store(
      out, PortableRound::Round(PortableRound::Load(in), PortableRound::Load(round_key)));
}

}  // namespace gandiva::sealed::aegis
