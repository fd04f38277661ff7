// AES-256-GCM on VAES and VPCLMULQDQ with 512-bit registers: four blocks per
// instruction. OpenSSL 3.0 (Debian 12's) has only its 128-bit AES-NI code,
// ~5.9 GB/s per core on the EPYC nodes we measure on. It sealed the bulk
// frames until AEGIS-256X4 (aegis256x4.h) took them over; it now computes the
// chunk tags (GMAC) a warm copy's pre-copy compares. The same bytes as
// OpenSSL's (tests check every length to a few KiB and whole frames), so either
// end may use either.
//
// Constant time: no table lookups and no branch on secret data; the tag is
// compared without an early exit. The key schedule is wiped on destruction.
//
// Private to gandiva_sealed (chunk_tag.cc picks it where the CPU has it).
#ifndef GANDIVA_CONTRACT_AES_GCM_VAES_H_
#define GANDIVA_CONTRACT_AES_GCM_VAES_H_

#include <cstddef>
#include <cstdint>

#include "gandiva/contract/sealed_frames.h"

namespace gandiva::sealed {

// True where the CPU and the kernel support AVX-512 (F, BW, VL), VAES and
// VPCLMULQDQ; checked once.
bool AesGcmVaesAvailable();

// Whether this code serves `cipher` here: kFastest, available, and not
// overridden by kEnvBulkCipher (sealed_frames.h). The chunk tags ask this.
bool AesGcmVaesChosen(SealedCipher cipher);

class AesGcmVaes {
 public:
  static constexpr size_t kKeyBytes = 32;
  static constexpr size_t kNonceBytes = 12;
  static constexpr size_t kTagBytes = 16;

  // Only where AesGcmVaesAvailable().
  explicit AesGcmVaes(const uint8_t* key);
  ~AesGcmVaes();
  AesGcmVaes(const AesGcmVaes&) = delete;
  AesGcmVaes& operator=(const AesGcmVaes&) = delete;

  // Encrypts n bytes of `in` into `out` (which may be `in`) and writes the tag
  // over `aad` and the ciphertext. n < 2^32 blocks minus two. With n = 0 the
  // tag is GMAC of `aad`.
  void Seal(const uint8_t* nonce, const uint8_t* aad, size_t aad_len, const uint8_t* in,
            uint8_t* out, size_t n, uint8_t* tag) const;

  // Decrypts n bytes in place and says whether `tag` authenticates them and
  // `aad`. On false the bytes are garbage and must be discarded.
  [[nodiscard]] bool Open(const uint8_t* nonce, const uint8_t* aad, size_t aad_len, uint8_t* data,
                          size_t n, const uint8_t* tag) const;

 private:
  // The 15 round keys of AES-256.
  alignas(64) uint8_t round_keys_[15][16];
  // h^16 ... h^1 (h = AES(key, 0)), byte-reflected and times x^-1 in GF(2^128),
  // so that a carry-less product needs no shift (see the .cc). A group of n
  // blocks multiplies by the n entries that end the table.
  alignas(64) uint8_t h_powers_[16][16];
};

}  // namespace gandiva::sealed

#endif  // GANDIVA_CONTRACT_AES_GCM_VAES_H_
