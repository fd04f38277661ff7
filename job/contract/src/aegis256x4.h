// AEGIS-256X4 (RFC 10032): the AEAD that seals a migration's bulk frames.
// Four AEGIS-256 states side by side, each 16 bytes of a 64-byte block: six
// AES rounds per 64 bytes and no field multiply, against AES-256-GCM's fifteen
// rounds and a GHASH. On the VAES nodes we measure on it seals at ~3x the
// speed of our AES-256-GCM in the cache, and a GiB from memory as fast as it
// can be read (docs/benchmarks.md); a 256-bit key, a 256-bit nonce, a 128-bit
// tag.
//
// Three codes, the same bytes: 512-bit registers (AVX-512 with VAES: each of
// the six state blocks holds the four lanes), 128-bit AES instructions (AES-NI,
// or ARMv8's AES on aarch64: the four lanes one by one), and a portable one
// for CPUs with neither, which looks bytes up in a table and so is not
// constant-time (no node we run on lacks AES instructions; gandiva logs a
// warning once if it ever runs). Tests check each against the RFC's vectors
// and against each other.
//
// Private to gandiva_sealed (sealed_frames.cc seals frames with it).
#ifndef GANDIVA_CONTRACT_AEGIS256X4_H_
#define GANDIVA_CONTRACT_AEGIS256X4_H_

#include <cstddef>
#include <cstdint>

namespace gandiva::sealed {

enum class AegisCode { kVaes512, kAes128, kPortable };

// The fastest code this CPU runs (checked once).
AegisCode FastestAegisCode();
// Whether this CPU runs `code`.
bool AegisCodeRuns(AegisCode code);
const char* AegisCodeName(AegisCode code);

class Aegis256x4 {
 public:
  static constexpr size_t kKeyBytes = 32;
  static constexpr size_t kNonceBytes = 32;
  static constexpr size_t kTagBytes = 16;

  // `code` must run here (AegisCodeRuns).
  Aegis256x4(const uint8_t* key, AegisCode code);
  ~Aegis256x4();  // wipes the key
  Aegis256x4(const Aegis256x4&) = delete;
  Aegis256x4& operator=(const Aegis256x4&) = delete;

  // Encrypts n bytes of `in` into `out` (which may be `in`) and writes the
  // 128-bit tag over `aad` and the message.
  void Seal(const uint8_t* nonce, const uint8_t* aad, size_t aad_len, const uint8_t* in,
            uint8_t* out, size_t n, uint8_t* tag) const;

  // Decrypts n bytes in place and says whether `tag` authenticates them and
  // `aad`; on false the bytes are zeroed (the RFC: no unverified plaintext).
  [[nodiscard]] bool Open(const uint8_t* nonce, const uint8_t* aad, size_t aad_len, uint8_t* data,
                          size_t n, const uint8_t* tag) const;

  AegisCode code() const { return code_; }

 private:
  uint8_t key_[kKeyBytes];
  AegisCode code_;
};

namespace aegis {

// RFC 10032's constants: the Fibonacci sequence mod 256, C0 its first 16
// terms and C1 the next 16.
inline constexpr uint8_t kC0[16] = {0x00, 0x01, 0x01, 0x02, 0x03, 0x05, 0x08, 0x0d,
                                    0x15, 0x22, 0x37, 0x59, 0x90, 0xe9, 0x79, 0x62};
inline constexpr uint8_t kC1[16] = {0xdb, 0x3d, 0x18, 0x55, 0x6d, 0xc2, 0x2f, 0xf1,
                                    0x20, 0x11, 0x31, 0x42, 0x73, 0xb5, 0x28, 0xdd};

// One whole AEGIS-256X4 pass: absorbs `aad`, encrypts (or, `decrypt`, decrypts)
// n bytes of `in` into `out` and writes the tag it computed. Each code's own.
struct Pass {
  const uint8_t* key;
  const uint8_t* nonce;
  const uint8_t* aad;
  size_t aad_len;
  const uint8_t* in;
  uint8_t* out;
  size_t n;
  bool decrypt;
};
void RunVaes512(const Pass& p, uint8_t* tag);  // only where the CPU has it
void RunAes128(const Pass& p, uint8_t* tag);   // likewise
void RunPortable(const Pass& p, uint8_t* tag);
bool CpuHasVaes512();
bool CpuHasAes128();

// The AES round AEGIS is built from (FIPS-197 SubBytes, ShiftRows,
// MixColumns, AddRoundKey), in portable code: for the tests.
void PortableAesRound(const uint8_t* in, const uint8_t* round_key, uint8_t* out);

}  // namespace aegis

}  // namespace gandiva::sealed

#endif  // GANDIVA_CONTRACT_AEGIS256X4_H_
