// GMAC chunk tags with OpenSSL's EVP interface; see chunk_tag.h.
#include "gandiva/contract/chunk_tag.h"

#include <openssl/evp.h>

#include <algorithm>

namespace gandiva::sealed {

struct ChunkTagger::Context {
  EVP_CIPHER_CTX* ctx = EVP_CIPHER_CTX_new();
  ~Context() { EVP_CIPHER_CTX_free(ctx); }
};

ChunkTagger::ChunkTagger(const BulkKey& key) : ctx_(std::make_unique<Context>()) {
  // The key schedule is set up once; each tag sets only the (fixed) nonce.
  if (ctx_->ctx) EVP_EncryptInit_ex(ctx_->ctx, EVP_aes_256_gcm(), nullptr, key.data(), nullptr);
}
ChunkTagger::~ChunkTagger() = default;
ChunkTagger::ChunkTagger(ChunkTagger&&) noexcept = default;
ChunkTagger& ChunkTagger::operator=(ChunkTagger&&) noexcept = default;

StatusOr<ChunkTag> ChunkTagger::Of(std::span<const uint8_t> bytes) {
  static constexpr uint8_t kNonce[12] = {};
  EVP_CIPHER_CTX* c = ctx_ ? ctx_->ctx : nullptr;
  ChunkTag tag;
  int n = 0;
  if (!c || EVP_EncryptInit_ex(c, nullptr, nullptr, nullptr, kNonce) != 1)
    return Internal("GMAC set-up failed");
  // EVP takes an int length: feed a chunk of any size in pieces.
  constexpr size_t kPiece = size_t{1} << 30;
  for (size_t off = 0; off < bytes.size(); off += kPiece) {
    const size_t len = std::min(kPiece, bytes.size() - off);
    if (EVP_EncryptUpdate(c, nullptr, &n, bytes.data() + off, static_cast<int>(len)) != 1)
      return Internal("GMAC failed");
  }
  uint8_t none[16];
  if (EVP_EncryptFinal_ex(c, none, &n) != 1 ||
      EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_GCM_GET_TAG, static_cast<int>(tag.size()), tag.data()) != 1)
    return Internal("GMAC failed");
  return tag;
}

}  // namespace gandiva::sealed
