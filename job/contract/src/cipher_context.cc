// The key schedule a chunk tagger keeps; see cipher_context.h.
#include "cipher_context.h"

namespace gandiva::sealed {

std::unique_ptr<CipherContext> KeyedContext(const BulkKey& key, SealedCipher cipher) {
  auto c = std::make_unique<CipherContext>();
  if (AesGcmVaesChosen(cipher)) {
    c->vaes = std::make_unique<AesGcmVaes>(key.data());
    return c;
  }
  c->ctx = EVP_CIPHER_CTX_new();
  if (c->ctx) EVP_EncryptInit_ex(c->ctx, EVP_aes_256_gcm(), nullptr, key.data(), nullptr);
  return c;
}

}  // namespace gandiva::sealed
