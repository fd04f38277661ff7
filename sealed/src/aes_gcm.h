// AES-256-GCM (NIST SP 800-38D) through OpenSSL's EVP interface: the one
// cipher of the sealed bulk channel. The key is scheduled once per object and
// each message sets only its nonce. OpenSSL picks its code for the CPU (AES-NI
// with carry-less multiplies on x86-64, ARMv8's crypto extensions on aarch64),
// all of it constant-time; we keep no cipher code of our own.
//
// A 256-bit key, a 96-bit nonce, a 128-bit tag. The caller must never seal two
// messages under one key with one nonce (sealed_frames.cc and chunk_tag.cc say
// how each derives its nonces).
//
// Private to gandiva_sealed. Thread-safety: an object is used by one thread.
#ifndef GANDIVA_SEALED_AES_GCM_H_
#define GANDIVA_SEALED_AES_GCM_H_

#include <openssl/evp.h>

#include <cstddef>
#include <cstdint>
#include <span>

#include "gandiva/status.h"

namespace gandiva::sealed {

class AesGcm {
 public:
  static constexpr size_t kKeyBytes = 32;
  static constexpr size_t kNonceBytes = 12;
  static constexpr size_t kTagBytes = 16;
  enum class Direction { kSeal, kOpen };

  // A context for one direction (EVP keys a context for one). If OpenSSL has
  // no memory for it, every call fails with Internal.
  AesGcm(const uint8_t* key, Direction direction);
  ~AesGcm();
  AesGcm(const AesGcm&) = delete;
  AesGcm& operator=(const AesGcm&) = delete;
  AesGcm(AesGcm&& other) noexcept;
  AesGcm& operator=(AesGcm&& other) noexcept;

  // Encrypts n bytes of `in` into `out` (which may be `in`) and writes the tag
  // over `aad` and the ciphertext. With n == 0 the tag is GMAC over `aad`.
  Status Seal(const uint8_t* nonce, std::span<const uint8_t> aad, const uint8_t* in, uint8_t* out,
              size_t n, uint8_t* tag);

  // Decrypts n bytes of `data` in place if `tag` authenticates them and `aad`:
  // DataLoss otherwise, and then the bytes are zeroed (no unverified plaintext
  // is left behind for a caller to use by mistake).
  Status Open(const uint8_t* nonce, std::span<const uint8_t> aad, uint8_t* data, size_t n,
              const uint8_t* tag);

 private:
  EVP_CIPHER_CTX* ctx_ = nullptr;
  Direction direction_;
};

}  // namespace gandiva::sealed

#endif  // GANDIVA_SEALED_AES_GCM_H_
