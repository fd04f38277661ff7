// GMAC chunk tags with the VAES code (aes_gcm_vaes.h) or OpenSSL's EVP
// interface (SealedCipher, sealed_frames.h); see chunk_tag.h.
#include "gandiva/contract/chunk_tag.h"

#include <openssl/evp.h>

#include <algorithm>

#include "cipher_context.h"

namespace gandiva::sealed {

namespace {
constexpr uint8_t kNonce[12] = {};
}  // namespace

ChunkTagger::ChunkTagger(const BulkKey& key, SealedCipher cipher)
    : ctx_(KeyedContext(key, cipher)) {}
ChunkTagger::~ChunkTagger() = default;
ChunkTagger::ChunkTagger(ChunkTagger&&) noexcept = default;
ChunkTagger& ChunkTagger::operator=(ChunkTagger&&) noexcept = default;

StatusOr<ChunkTag> ChunkTagger::Of(std::span<const uint8_t> bytes) {
  ChunkTag tag;
  if (ctx_ && ctx_->vaes) {
    ctx_->vaes->Seal(kNonce, bytes.data(), bytes.size(), nullptr, nullptr, 0, tag.data());
    return tag;
  }
  EVP_CIPHER_CTX* c = ctx_ ? ctx_->ctx : nullptr;
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
