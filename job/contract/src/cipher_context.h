// The AES-256-GCM key schedule a chunk tagger keeps: the VAES code's where it
// is chosen (aes_gcm_vaes.h), else an OpenSSL context keyed once, so that each
// tag sets only its nonce.
// Private to gandiva_sealed.
#ifndef GANDIVA_CONTRACT_CIPHER_CONTEXT_H_
#define GANDIVA_CONTRACT_CIPHER_CONTEXT_H_

#include <openssl/evp.h>

#include <memory>

#include "aes_gcm_vaes.h"
#include "gandiva/contract/sealed_frames.h"

namespace gandiva::sealed {

// One of the two is set; `ctx` may be null if OpenSSL had no memory (every
// use then fails).
struct CipherContext {
  std::unique_ptr<AesGcmVaes> vaes;
  EVP_CIPHER_CTX* ctx = nullptr;
  ~CipherContext() { EVP_CIPHER_CTX_free(ctx); }
};

std::unique_ptr<CipherContext> KeyedContext(const BulkKey& key, SealedCipher cipher);

}  // namespace gandiva::sealed

#endif  // GANDIVA_CONTRACT_CIPHER_CONTEXT_H_
